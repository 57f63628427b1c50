"""The catalog contract: one suite, run unchanged over SQLite and the real Postgres server."""

from __future__ import annotations

import threading
import uuid

import pytest

from shoal.catalog.base import LedgerEntry, LedgerKeyExistsError, ManifestEntry, SourceOffset
from shoal.errors import (CommitConflictError, InvalidSchemaError, SnapshotNotFoundError,
                          TableAlreadyExistsError, TableNotFoundError)
from shoal.types import INT, LONG, STRING, Column, Schema

SCHEMA = Schema.create([Column("service", STRING), Column("status", INT)])


def entry(min_ts: int = 0, max_ts: int = 10, *, rows: int = 5, stats=None, paths=None,
          version: int = 1, filters=None) -> ManifestEntry:
    eid = uuid.uuid4().hex
    return ManifestEntry(extent_id=eid, object_path=f"tables/t/extents/{eid}.tlm",
                         byte_size=1000, row_count=rows, block_count=1, min_ts=min_ts,
                         max_ts=max_ts, schema_version=version, column_stats=stats or {},
                         present_paths=paths or {}, membership_filters=filters or {})


def commit(cat, table, *, add=(), remove=(), schema=None, ledger=(), offsets=(),
           expected=None, operation="append"):
    if expected is None:
        expected = cat.load_table(table).current_snapshot_id
    return cat.commit(table, expected_snapshot_id=expected, operation=operation,
                      commit_id=uuid.uuid4().hex, add=add, remove=remove, schema=schema,
                      ledger=ledger, offsets=offsets)


def ids(entries) -> set[str]:
    return {e.extent_id for e in entries}


# ---- tables -----------------------------------------------------------------------------------
def test_create_load_list(catalog):
    info = catalog.create_table("logs", SCHEMA, mode="drop", properties={"retention": "7d"})
    assert info.current_snapshot_id == 1
    assert info.schema == SCHEMA and info.schema.version == 1
    assert info.mode == "drop" and info.properties == {"retention": "7d"}
    catalog.create_table("audit", SCHEMA)
    assert [t.name for t in catalog.list_tables()] == ["audit", "logs"]
    loaded = catalog.load_table("logs")
    assert loaded.id == info.id and loaded.schema.names == ["_timestamp", "props", "service",
                                                            "status"]
    snap = catalog.snapshot("logs")
    assert (snap.snapshot_id, snap.operation, snap.parent_id) == (1, "create", None)
    assert catalog.table_counts("logs") == (0, 0)


def test_table_errors(catalog):
    catalog.create_table("logs", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match='table "logs" already exists'):
        catalog.create_table("logs", SCHEMA)
    with pytest.raises(TableNotFoundError, match='table "nope" does not exist'):
        catalog.load_table("nope")
    with pytest.raises(InvalidSchemaError, match="not identifier-safe"):
        catalog.create_table("Bad-Name", SCHEMA)
    with pytest.raises(InvalidSchemaError, match="unknown schema mode"):
        catalog.create_table("x", SCHEMA, mode="loose")  # type: ignore[arg-type]
    with pytest.raises(SnapshotNotFoundError):
        catalog.snapshot("logs", 42)


def test_set_properties(catalog):
    catalog.create_table("logs", SCHEMA, properties={"retention": "7d"})
    info = catalog.set_properties("logs", {"target_extent_bytes": 1 << 20, "retention": None},
                                  mode="reject")
    assert info.properties == {"target_extent_bytes": 1 << 20} and info.mode == "reject"


# ---- commits and visibility ------------------------------------------------------------------
def test_append_and_time_travel(catalog):
    catalog.create_table("logs", SCHEMA)
    a, b = entry(rows=3), entry(rows=4)
    s2 = commit(catalog, "logs", add=[a])
    s3 = commit(catalog, "logs", add=[b])
    assert (s2.snapshot_id, s3.snapshot_id, s3.parent_id) == (2, 3, 2)
    assert ids(catalog.manifests("logs")) == {a.extent_id, b.extent_id}
    assert ids(catalog.manifests("logs", 2)) == {a.extent_id}
    assert catalog.manifests("logs", 1) == []
    assert catalog.table_counts("logs") == (7, 2)
    assert catalog.table_counts("logs", 2) == (3, 1)
    got = {e.extent_id: e for e in catalog.manifests("logs")}[a.extent_id]
    assert got.added_snapshot_id == 2 and got.removed_snapshot_id is None
    assert got.object_path == a.object_path and got.row_count == 3
    assert [s.snapshot_id for s in catalog.snapshots("logs")] == [1, 2, 3]
    assert catalog.referenced_paths() == {a.object_path, b.object_path}


def test_stale_expected_conflicts_and_writes_nothing(catalog):
    catalog.create_table("logs", SCHEMA)
    commit(catalog, "logs", add=[entry()])
    stale = entry()
    with pytest.raises(CommitConflictError):
        commit(catalog, "logs", add=[stale], expected=1,
               ledger=[LedgerEntry("k-stale", {"rows": 1})],
               offsets=[SourceOffset("kafka:g:t", "0", 10)])
    assert catalog.load_table("logs").current_snapshot_id == 2
    assert stale.extent_id not in ids(catalog.manifests("logs"))
    assert catalog.ledger_get("k-stale") is None
    assert catalog.source_offsets("kafka:g:t") == {}
    assert stale.object_path not in catalog.referenced_paths()


def test_remove_extents_keeps_history(catalog):
    catalog.create_table("logs", SCHEMA)
    a, b = entry(), entry()
    commit(catalog, "logs", add=[a, b])
    c = entry(rows=10)
    s = commit(catalog, "logs", add=[c], remove=[a.extent_id, b.extent_id], operation="compact")
    assert ids(catalog.manifests("logs")) == {c.extent_id}
    assert ids(catalog.manifests("logs", s.snapshot_id - 1)) == {a.extent_id, b.extent_id}
    assert catalog.live_extent_ids("logs", [a.extent_id, c.extent_id]) == {c.extent_id}
    # Removing an extent that is no longer live is a conflict and changes nothing.
    d = entry()
    with pytest.raises(CommitConflictError):
        commit(catalog, "logs", add=[d], remove=[a.extent_id], operation="compact")
    assert catalog.load_table("logs").current_snapshot_id == s.snapshot_id
    assert d.extent_id not in ids(catalog.manifests("logs"))


def test_schema_commit_and_history(catalog):
    catalog.create_table("logs", SCHEMA)
    v2 = SCHEMA.evolve([Column("user", STRING), Column("status", LONG)])
    snap = commit(catalog, "logs", schema=v2, operation="schema")
    assert snap.schema_version == 2
    info = catalog.load_table("logs")
    assert info.schema == v2 and info.schema.column("status").type == LONG
    assert [s.version for s in catalog.schema_history("logs")] == [1, 2]
    assert catalog.schema_version("logs", 1) == SCHEMA
    # A schema version that skips ahead (built from a stale schema) is a conflict.
    with pytest.raises(CommitConflictError):
        commit(catalog, "logs", schema=v2.evolve([Column("a", INT)]).evolve([Column("b", INT)]),
               operation="schema")
    assert catalog.load_table("logs").schema.version == 2


def test_schemas_read_through_another_catalog_are_fresh(catalog_url):
    """Two catalogs on one database (two server processes): each keeps the schemas it
    read, and still sees every version the other commits, including a version number that
    the first one's losing commit had also tried to take."""
    from shoal.catalog import open_catalog

    a, b = open_catalog(catalog_url), open_catalog(catalog_url)
    try:
        a.create_table("logs", SCHEMA)
        assert a.load_table("logs").schema == SCHEMA
        mine = SCHEMA.evolve([Column("mine", STRING)])
        theirs = SCHEMA.evolve([Column("theirs", LONG)])
        commit(b, "logs", add=[entry()])
        with pytest.raises(CommitConflictError):
            commit(a, "logs", schema=mine, expected=1, operation="schema")
        assert a.load_table("logs").schema == SCHEMA
        commit(b, "logs", schema=theirs, operation="schema")
        assert a.load_table("logs").schema == theirs
        assert a.schema_version("logs", 2) == theirs
        assert a.schema_version("logs", 1) == SCHEMA
        assert [t.schema for t in a.list_tables()] == [theirs]
    finally:
        a.close()
        b.close()


def test_find_commit(catalog):
    catalog.create_table("logs", SCHEMA)
    cid = uuid.uuid4().hex
    catalog.commit("logs", expected_snapshot_id=1, operation="append", commit_id=cid,
                   add=[entry()])
    assert catalog.find_commit("logs", cid).snapshot_id == 2
    assert catalog.find_commit("logs", uuid.uuid4().hex) is None


# ---- ledger and offsets ----------------------------------------------------------------------
def test_ledger_written_with_snapshot_and_replay_refused(catalog):
    catalog.create_table("logs", SCHEMA)
    first = entry()
    s = commit(catalog, "logs", add=[first], ledger=[LedgerEntry("req-1", {"rows": 5})])
    rec = catalog.ledger_get("req-1")
    assert rec.snapshot_id == s.snapshot_id and rec.ack == {"rows": 5, "snapshot_id": 2}
    again = entry()
    with pytest.raises(LedgerKeyExistsError) as exc:
        commit(catalog, "logs", add=[again], ledger=[LedgerEntry("req-1", {"rows": 5})])
    assert exc.value.record.snapshot_id == s.snapshot_id
    assert catalog.load_table("logs").current_snapshot_id == s.snapshot_id
    assert again.extent_id not in ids(catalog.manifests("logs"))


def test_sweep_ledger(clocked_catalog, clock):
    catalog = clocked_catalog
    catalog.create_table("logs", SCHEMA)
    commit(catalog, "logs", add=[entry()], ledger=[LedgerEntry("old", {})])
    clock.advance(300)
    commit(catalog, "logs", add=[entry()], ledger=[LedgerEntry("new", {})])
    assert catalog.sweep_ledger(300) == 0       # "old" is exactly 300 s old: not older
    clock.advance(1)
    assert catalog.sweep_ledger(300) == 1
    assert catalog.ledger_get("old") is None and catalog.ledger_get("new") is not None
    # The swept key is fresh again.
    commit(catalog, "logs", add=[entry()], ledger=[LedgerEntry("old", {})])
    assert catalog.ledger_get("old").snapshot_id == 4


def test_source_offsets_move_with_snapshots(catalog):
    catalog.create_table("events", SCHEMA)
    commit(catalog, "events", add=[entry()],
           offsets=[SourceOffset("kafka:g:t", "0", 99), SourceOffset("kafka:g:t", "1", 5)])
    commit(catalog, "events", add=[entry()], offsets=[SourceOffset("kafka:g:t", "1", 17)])
    assert catalog.source_offsets("kafka:g:t") == {"0": 99, "1": 17}
    assert catalog.source_offsets("kafka:g:other") == {}


# ---- work units ------------------------------------------------------------------------------
def test_work_units_claim_lease_finish(clocked_catalog, clock):
    catalog = clocked_catalog
    catalog.create_table("logs", SCHEMA)
    u1 = catalog.enqueue_work("compact", table="logs", payload={"n": 1})
    u2 = catalog.enqueue_work("gc")
    assert u1.state == "pending" and u2.table_id is None
    got = catalog.claim_work("w1", kinds=["compact"], lease_s=30)
    assert got.id == u1.id and got.state == "running" and got.attempts == 1
    assert got.lease_expires_at == clock() + 30
    assert catalog.claim_work("w2", kinds=["compact"]) is None
    clock.advance(30)   # at its expiry the lease still holds...
    assert catalog.claim_work("w2", kinds=["compact"]) is None
    clock.advance(1)    # ...past it, another worker reclaims the unit
    again = catalog.claim_work("w2", kinds=["compact"])
    assert again.id == u1.id and again.lease_owner == "w2" and again.attempts == 2
    assert catalog.finish_work(u1.id, "w1", ok=True) is False  # lost its lease
    assert catalog.finish_work(u1.id, "w2", ok=True, result={"merged": 3}) is True
    assert catalog.claim_work("w3", kinds=["compact"]) is None
    assert catalog.claim_work("w3").id == u2.id


def test_concurrent_claimers_never_share_a_unit(catalog):
    for i in range(40):
        catalog.enqueue_work("compact", payload={"i": i})
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while (u := catalog.claim_work(name)) is not None:
            with lock:
                claimed.append(u.id)
            catalog.finish_work(u.id, name, ok=True)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed) == 40 and len(set(claimed)) == 40


# ---- migrations -----------------------------------------------------------------------------
def test_migrations_recorded_and_idempotent(catalog_url):
    import sqlalchemy as sa

    from shoal.catalog import open_catalog
    from shoal.catalog.sql import model as T

    cat = open_catalog(catalog_url)
    cat.create_table("logs", SCHEMA)
    cat.close()
    cat = open_catalog(catalog_url)  # reopening migrates nothing and keeps data
    assert cat.load_table("logs").name == "logs"
    with cat.engine.begin() as conn:
        assert T.current_version(conn) == T.CATALOG_VERSION
        conn.execute(sa.update(T.catalog_meta).values(value=str(T.CATALOG_VERSION + 1)))
    cat.close()
    from shoal.errors import ConfigError
    with pytest.raises(ConfigError, match="newer than this shoal"):
        open_catalog(catalog_url)
