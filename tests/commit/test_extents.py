"""The catalog-free half of the commit layer: writing extents and discarding those that did
not commit (a failed delete is logged, never raised over the caller's error)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from shoal.commit import ExtentStager, discard_extents, discard_on_failure, extent_prefix
from shoal.errors import CommitConflictError, CommitStateUnknownError, StorageError
from shoal.format import default_formats
from shoal.storage import open_store
from shoal.types import INT, Column, Schema

SCHEMA = Schema.create([Column("n", INT)], version=3)
PREFIX = extent_prefix("t", 7)


def batch(*ns: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"_timestamp": n, "props": None, "n": n} for n in ns],
                                      schema=SCHEMA.arrow())


def objects(store) -> set[str]:
    return {o.path for o in store.list("")}


class FailingDeletes:
    """A store whose deletes fail (a storage outage while cleaning up)."""

    def __init__(self, inner):
        self.inner = inner
        self.attempts: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def delete(self, path: str) -> None:
        self.attempts.append(path)
        raise StorageError(f"delete {path}: service unavailable")


@pytest.fixture
def store(local_store_url):
    return open_store(local_store_url)


def test_stager_writes_an_extent_without_a_catalog(store):
    stages = []
    stager = ExtentStager(store, default_formats()["tlm"],
                          on_stage=lambda s, **kw: stages.append((s, kw["path"])))
    entry = stager.write(PREFIX, SCHEMA, [batch(1, 2), batch(3)])
    assert entry.row_count == 3 and entry.schema_version == 3 and entry.format == "tlm"
    assert entry.object_path.startswith("tables/t.7/extents/")
    assert objects(store) == {entry.object_path}
    assert stages == [("extent_written", entry.object_path)]


def test_open_extent_streams_batches(store):
    extent = ExtentStager(store, default_formats()["tlm"]).open(PREFIX, SCHEMA, block_rows=2)
    for n in range(5):
        extent.append(batch(n))
    entry = extent.finish()
    assert entry.row_count == 5 and entry.block_count == 3
    assert objects(store) == {entry.object_path}


def test_a_failed_write_leaves_nothing(store):
    stager = ExtentStager(store, default_formats()["tlm"])

    def batches():
        yield batch(1)
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        stager.write(PREFIX, SCHEMA, batches())
    assert objects(store) == set()


def test_discard_deletes_every_extent(store):
    stager = ExtentStager(store, default_formats()["tlm"])
    entries = [stager.write(PREFIX, SCHEMA, [batch(n)]) for n in range(3)]
    discard_extents(store, entries)
    assert objects(store) == set()


def test_a_failed_delete_is_logged_not_raised(store, caplog):
    stager = ExtentStager(store, default_formats()["tlm"])
    entries = [stager.write(PREFIX, SCHEMA, [batch(n)]) for n in range(2)]
    failing = FailingDeletes(store)
    with caplog.at_level(logging.WARNING, logger="shoal.commit.extents"):
        discard_extents(failing, entries)
    assert failing.attempts == [e.object_path for e in entries]   # every one was tried
    assert objects(store) == {e.object_path for e in entries}     # left for orphan GC
    logged = [r for r in caplog.records if r.name == "shoal.commit.extents"]
    assert [r.args[0] for r in logged] == [e.object_path for e in entries]
    assert all(isinstance(r.exc_info[1], StorageError) for r in logged)


def test_discard_on_failure_keeps_the_original_error(store):
    entry = ExtentStager(store, default_formats()["tlm"]).write(PREFIX, SCHEMA, [batch(1)])
    with pytest.raises(CommitConflictError), \
            discard_on_failure(FailingDeletes(store), [entry]):
        raise CommitConflictError("t", 1)
    assert objects(store) == {entry.object_path}


def test_discard_on_failure_deletes_on_a_certain_failure(store):
    entry = ExtentStager(store, default_formats()["tlm"]).write(PREFIX, SCHEMA, [batch(1)])
    with pytest.raises(CommitConflictError), discard_on_failure(store, [entry]):
        raise CommitConflictError("t", 1)
    assert objects(store) == set()


def test_discard_on_failure_keeps_extents_when_the_outcome_is_unknown(store):
    entry = ExtentStager(store, default_formats()["tlm"]).write(PREFIX, SCHEMA, [batch(1)])
    with pytest.raises(CommitStateUnknownError), discard_on_failure(store, [entry]):
        raise CommitStateUnknownError("t", ConnectionResetError("reset"))
    with pytest.raises(KeyboardInterrupt), discard_on_failure(store, [entry]):
        raise KeyboardInterrupt
    assert objects(store) == {entry.object_path}


def test_discard_on_failure_keeps_extents_on_success(store):
    entry = ExtentStager(store, default_formats()["tlm"]).write(PREFIX, SCHEMA, [batch(1)])
    with discard_on_failure(store, [entry]):
        pass
    assert objects(store) == {entry.object_path}


def test_a_sort_key_orders_every_batch_of_the_extent_before_blocks_are_cut(store):
    stager = ExtentStager(store, default_formats()["tlm"])
    reordered = batch(9, 2).select(["n", "_timestamp", "props"])   # columns in another order
    entry = stager.write(PREFIX, SCHEMA, [batch(5, 1, 7), reordered, pa.table(batch(3, 8))],
                         block_rows=3, sort_by=("n",))
    reader = default_formats()["tlm"].open_extent(store, entry.object_path)
    blocks = [reader.read_block(b)["n"].to_pylist()
              for b in range(reader.metadata().block_count)]
    assert blocks == [[1, 2, 3], [5, 7, 8], [9]]
    assert (entry.min_ts, entry.max_ts, entry.row_count) == (1, 9, 7)
