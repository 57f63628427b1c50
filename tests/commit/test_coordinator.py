"""The commit coordinator's failure rules: what happens to written extents on each outcome."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.catalog import open_catalog
from shoal.catalog.base import LedgerEntry
from shoal.commit import CommitCoordinator, CommitSpec
from shoal.errors import (CommitRetriesExhaustedError, CommitStateUnknownError,
                          IncompatibleSchemaChangeError)
from shoal.format.tlm import TlmFormat
from shoal.maintenance.orphans import find_orphans
from shoal.storage import open_store
from shoal.types import INT, STRING, Column, Schema

SCHEMA = Schema.create([Column("n", INT)])


@pytest.fixture
def setup(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    catalog.create_table("t", SCHEMA)
    yield catalog, store
    catalog.close()


def batch(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"_timestamp": n, "props": None, "n": n}],
                                      schema=SCHEMA.arrow())


def objects(store) -> set[str]:
    return {o.path for o in store.list("")}


def test_append_lands_and_stages_are_reported(setup):
    catalog, store = setup
    stages = []
    coord = CommitCoordinator(catalog, store, TlmFormat(),
                              on_stage=lambda s, **kw: stages.append(s))
    out = coord.append_batches("t", [batch(1)])
    assert out.snapshot.snapshot_id == 2 and out.attempts == 1
    assert stages == ["extent_written", "committing", "committed"]
    assert objects(store) == {out.added[0].object_path}


def test_replayed_key_returns_first_ack_and_deletes_new_extent(setup):
    catalog, store = setup
    coord = CommitCoordinator(catalog, store, TlmFormat())
    first = coord.append_batches("t", [batch(1)], ledger=[LedgerEntry("k", {"rows": 1})])
    again = coord.append_batches("t", [batch(1)], ledger=[LedgerEntry("k", {"rows": 1})])
    assert again.snapshot is None and again.replayed.snapshot_id == first.snapshot.snapshot_id
    assert again.replayed.ack == {"rows": 1, "snapshot_id": 2}
    assert catalog.load_table("t").current_snapshot_id == 2
    assert objects(store) == {first.added[0].object_path}  # the duplicate's extent is gone


def test_exhausted_conflicts_delete_the_extent(setup):
    catalog, store = setup
    coord = CommitCoordinator(catalog, store, TlmFormat(), max_attempts=3, base_delay_s=0)
    info = catalog.load_table("t")
    entry = coord.write_extent(info, [batch(1)])
    other = CommitCoordinator(catalog, store, TlmFormat())

    def build(_info):
        # Another writer lands between this attempt's read and its CAS: a real conflict.
        other.append_batches("t", [batch(9)])
        return CommitSpec(operation="append", add=[entry])

    with pytest.raises(CommitRetriesExhaustedError, match="after 3 attempts"):
        coord.run("t", build, written=[entry])
    assert not store.exists(entry.object_path)
    assert entry.extent_id not in {e.extent_id for e in catalog.manifests("t")}


def test_rebase_gives_up_cleanly(setup):
    catalog, store = setup
    coord = CommitCoordinator(catalog, store, TlmFormat())
    entry = coord.write_extent(catalog.load_table("t"), [batch(1)])

    def build(_info):
        raise IncompatibleSchemaChangeError("t", "n", "int", "bool")

    with pytest.raises(IncompatibleSchemaChangeError):
        coord.run("t", build, written=[entry])
    assert not store.exists(entry.object_path)


class DropsConnectionAfterCommit:
    """A catalog whose connection breaks right after COMMIT reached the server.

    A fake for a fault that cannot be caused on demand here (the TCP connection dying
    between the server committing and the client hearing back): the real commit runs, then
    the error the real catalog raises in that case is raised.
    """

    def __init__(self, inner, *, commit_first: bool, lookups_fail: bool = False):
        self.inner = inner
        self.commit_first = commit_first
        self.lookups_fail = lookups_fail
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def commit(self, table, **kw):
        self.calls += 1
        if self.calls == 1:
            if self.commit_first:
                self.inner.commit(table, **kw)
            raise CommitStateUnknownError(table, ConnectionResetError("connection reset"))
        return self.inner.commit(table, **kw)

    def find_commit(self, table, commit_id):
        if self.lookups_fail:
            raise ConnectionResetError("catalog unreachable")
        return self.inner.find_commit(table, commit_id)


def test_unknown_outcome_that_landed_is_recognised(setup):
    catalog, store = setup
    flaky = DropsConnectionAfterCommit(catalog, commit_first=True)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    coord.catalog = flaky
    out = coord.append_batches("t", [batch(1)])
    assert out.snapshot.snapshot_id == 2 and flaky.calls == 1  # no second commit
    assert len(catalog.manifests("t")) == 1 and store.exists(out.added[0].object_path)


def test_unknown_outcome_not_landed_is_retried_once(setup):
    catalog, store = setup
    flaky = DropsConnectionAfterCommit(catalog, commit_first=False)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    coord.catalog = flaky
    out = coord.append_batches("t", [batch(1)])
    assert flaky.calls == 2 and out.snapshot.snapshot_id == 2
    assert len(catalog.manifests("t")) == 1


def test_unknown_outcome_keeps_extent_for_orphan_gc(setup):
    catalog, store = setup
    flaky = DropsConnectionAfterCommit(catalog, commit_first=False, lookups_fail=True)
    coord = CommitCoordinator(catalog, store, TlmFormat(), base_delay_s=0)
    coord.catalog = flaky
    with pytest.raises(CommitStateUnknownError):
        coord.append_batches("t", [batch(1)])
    orphans = find_orphans(catalog, store, grace_s=0)
    assert len(orphans) == 1 and store.exists(orphans[0].path)


def test_evolve_schema_noop_and_widen(setup):
    catalog, store = setup
    coord = CommitCoordinator(catalog, store, TlmFormat())
    info = coord.evolve_schema("t", [Column("n", INT)])
    assert info.schema.version == 1 and info.current_snapshot_id == 1  # nothing to commit
    info = coord.evolve_schema("t", [Column("s", STRING)])
    assert info.schema.version == 2 and catalog.snapshot("t").operation == "schema"
