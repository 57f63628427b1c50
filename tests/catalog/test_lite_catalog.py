"""`LiteCatalog` (the embedded catalog's hot operations on `sqlite3`) against `SqlCatalog`
(the same operations through SQLAlchemy): one history of commits replayed through each, on
two catalog files, leaves the same rows, byte for byte, and the same answers and errors.

Every kind of commit is in the history: appends with manifest stats, present paths,
membership filters and ledger keys; a schema change; a compaction (remove + add); source
offsets inserted, then moved (the upsert); a replayed key; a lost race; a removal of an
extent that is not live. Then the connection pool: connections come back after errors, at
most `max_connections` are open, and an operation never needs two at once."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from shoal.catalog import open_catalog
from shoal.catalog.base import (LedgerEntry, LedgerKeyExistsError, ManifestEntry, SourceOffset)
from shoal.catalog.lite import LiteCatalog, _Pool
from shoal.catalog.sqlite import sqlite_file
from shoal.catalog.sql import SqlCatalog
from shoal.errors import CatalogBusyError, CommitConflictError, TableNotFoundError
from shoal.format.membership import BloomFilter
from shoal.http.errors import status_for
from shoal.types import INT, STRING, Column, Schema
from tests.support.clock import ManualClock

SCHEMA = Schema.create([Column("service", STRING), Column("status", INT)])
CATALOG_TABLES = ("catalog_meta", "tables", "schema_versions", "snapshots", "manifests",
                  "manifest_filters", "ingest_ledger", "source_offsets", "work_units")


def entry(i: int, version: int = 1) -> ManifestEntry:
    bloom = BloomFilter.build([f"svc-{i}-{j}" for j in range(1500)]).to_bytes()
    return ManifestEntry(
        extent_id=f"e{i:04d}", object_path=f"tables/logs/e{i:04d}.tlm", byte_size=1000 + i,
        row_count=10 * i, block_count=1, min_ts=i * 100, max_ts=i * 100 + 99,
        schema_version=version,
        column_stats={"status": {"min": 200, "max": 503, "distinct": [200, 503], "nulls": 0},
                      "service": {"min": "a", "max": "zé", "tokens": ["a", "é"]}},
        present_paths={"props": ["a.b", "c"]}, membership_filters={"service": bloom})


def wider(schema: Schema) -> Schema:
    return schema.evolve([Column(f"region{schema.version}", STRING)])


def history(catalog: Any) -> list[Any]:
    """The same calls on `catalog`; what each returned or raised (type and message)."""
    out: list[Any] = []

    def call(fn: Any, **kw: Any) -> None:
        try:
            out.append(fn(**kw))
        except Exception as e:       # noqa: BLE001 - the error is what is compared
            out.append((type(e).__name__, str(e)))

    catalog.create_table("logs", SCHEMA, properties={"retention": "7d"})
    info = catalog.load_table("logs")
    out.append((info.current_snapshot_id, info.schema, info.mode, info.properties))
    call(catalog.commit, table="logs", expected_snapshot_id=1, operation="append",
         commit_id="c2", add=[entry(1), entry(2)], summary={"rows": 30},
         ledger=[LedgerEntry("req-1", {"rows": 30, "extra": ["x", 1.5, None]})])
    call(catalog.commit, table="logs", expected_snapshot_id=2, operation="schema",
         commit_id="c3", schema=wider(info.schema))
    call(catalog.commit, table="logs", expected_snapshot_id=3, operation="append",
         commit_id="c4", add=[entry(3, 2)],
         offsets=[SourceOffset("kafka:g:t", "0", 10), SourceOffset("kafka:g:t", "1", 7)])
    call(catalog.commit, table="logs", expected_snapshot_id=4, operation="append",
         commit_id="c5", add=[entry(4, 2)], offsets=[SourceOffset("kafka:g:t", "0", 25)])
    call(catalog.commit, table="logs", expected_snapshot_id=5, operation="compact",
         commit_id="c6", add=[entry(5, 2)], remove=["e0001", "e0002"])
    # Errors, none of which may leave a row behind:
    call(catalog.commit, table="logs", expected_snapshot_id=6, operation="append",
         commit_id="c7", add=[entry(7, 2)], ledger=[LedgerEntry("req-1", {"rows": 1})])
    call(catalog.commit, table="logs", expected_snapshot_id=3, operation="append",
         commit_id="c8", add=[entry(8, 2)])
    call(catalog.commit, table="logs", expected_snapshot_id=6, operation="compact",
         commit_id="c9", add=[entry(9, 2)], remove=["e0001"])
    call(catalog.commit, table="logs", expected_snapshot_id=6, operation="schema",
         commit_id="c10", schema=wider(wider(wider(info.schema))))   # skips a version
    call(catalog.commit, table="nope", expected_snapshot_id=1, operation="append",
         commit_id="c11")
    info = catalog.load_table("logs")
    out.append((info.current_snapshot_id, info.schema, info.mode, info.properties))
    out.append(catalog.ledger_get("req-1"))
    out.append(catalog.ledger_get("req-2"))
    out.append(catalog.find_commit("logs", "c4"))
    out.append(catalog.find_commit("logs", "c8"))
    call(catalog.find_commit, table="nope", commit_id="c4")
    call(catalog.load_table, name="nope")
    out.append(catalog.source_offsets("kafka:g:t"))
    return out


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every catalog table, in a fixed order; the commit id of a `create`
    snapshot (a random token `create_table` makes, no commit's) blanked."""
    db = sqlite3.connect(path)
    try:
        rows = {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in CATALOG_TABLES}
    finally:
        db.close()
    rows["snapshots"] = [(*s[:5], "" if s[4] == "create" else s[5], *s[6:])
                         for s in rows["snapshots"]]
    return rows


def test_lite_and_sqlalchemy_leave_the_same_rows(tmp_path: Path) -> None:
    got = {}
    for name, cls in (("lite", LiteCatalog), ("sql", SqlCatalog)):
        path = tmp_path / f"{name}.db"
        url = f"sqlite:///{path}"
        SqlCatalog(url).close()                 # the file exists, migrated: the lite lane
        catalog = cls(url, clock=ManualClock(1_700_000_000.0))
        try:
            got[name] = (history(catalog), dump(path))
        finally:
            catalog.close()
    (lite_calls, lite_rows), (sql_calls, sql_rows) = got["lite"], got["sql"]
    assert lite_calls == sql_calls
    # The history did what it says (so the comparison covers every kind of statement).
    errors = [c[0] for c in lite_calls if isinstance(c, tuple) and isinstance(c[0], str)]
    assert errors == ["LedgerKeyExistsError", *["CommitConflictError"] * 3,
                      *["TableNotFoundError"] * 3]
    assert lite_calls[-1] == {"0": 25, "1": 7}
    assert len(lite_rows["manifests"]) == 5 and len(lite_rows["manifest_filters"]) == 5
    assert len(lite_rows["schema_versions"]) == 2 and len(lite_rows["snapshots"]) == 6
    for table in CATALOG_TABLES:
        assert lite_rows[table] == sql_rows[table], table


def test_open_catalog_takes_the_lite_lane_only_for_a_plain_sqlite_file(tmp_path: Path
                                                                      ) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    fresh = open_catalog(url)                  # no file yet: SqlCatalog created it
    assert isinstance(fresh, LiteCatalog)
    fresh.create_table("logs", SCHEMA)
    fresh.close()
    again = open_catalog(url)
    assert isinstance(again, LiteCatalog)
    assert again.load_table("logs").schema == SCHEMA
    assert again._sql is None            # noqa: SLF001 - nothing needed SQLAlchemy
    again.list_tables()
    assert again._sql is not None        # noqa: SLF001 - opened for the rest
    again.close()
    for other in ("sqlite:///:memory:", url + "?timeout=5", "postgresql://h/db"):
        assert sqlite_file(other) is None


def test_a_replayed_key_and_a_lost_race_through_the_lite_lane(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    SqlCatalog(url).create_table("logs", SCHEMA)
    a, b = LiteCatalog(url), LiteCatalog(url)
    a.commit("logs", expected_snapshot_id=1, operation="append", commit_id="x1",
             add=[entry(1)], ledger=[LedgerEntry("k", {"rows": 10})])
    with pytest.raises(LedgerKeyExistsError) as replay:
        b.commit("logs", expected_snapshot_id=2, operation="append", commit_id="x2",
                 add=[entry(2)], ledger=[LedgerEntry("k", {"rows": 20})])
    assert replay.value.record.ack == {"rows": 10, "snapshot_id": 2}
    with pytest.raises(CommitConflictError):
        b.commit("logs", expected_snapshot_id=1, operation="append", commit_id="x3",
                 add=[entry(3)])
    assert [e.extent_id for e in a.manifests("logs")] == ["e0001"]
    with pytest.raises(TableNotFoundError):
        a.load_table("other")
    a.close()
    b.close()


def test_failed_operations_do_not_leak_connections(tmp_path: Path) -> None:
    """Errors inside a transaction (a missing table, a lost race) give the connection back:
    a server answering many bad requests does not run out of file descriptors."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    SqlCatalog(url).create_table("logs", SCHEMA)
    catalog = LiteCatalog(url)
    catalog.load_table("logs")
    fds = len(os.listdir("/proc/self/fd"))
    for i in range(300):
        with pytest.raises(TableNotFoundError):
            catalog.load_table(f"nope{i}")
        with pytest.raises(CommitConflictError):
            catalog.commit("logs", expected_snapshot_id=7, operation="append",
                           commit_id=f"n{i}")
    assert len(os.listdir("/proc/self/fd")) <= fds + 2
    assert catalog.load_table("logs").current_snapshot_id == 1
    catalog.close()


def test_connections_are_bounded_and_a_full_pool_says_so(tmp_path: Path) -> None:
    """At most `max_connections` at once; one more waits, and past the wait gets a 503 that
    says why (wait 0 here: no clock in the test)."""
    pool = _Pool(str(tmp_path / "c.db"), max_connections=2, wait_s=0)
    with pool.connection(), pool.connection():
        with pytest.raises(CatalogBusyError) as busy:
            with pool.connection():
                pass
        assert status_for(busy.value) == 503
        assert "all 2 catalog connections stayed in use" in str(busy.value)
    with pool.connection() as conn:            # given back: free again
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    pool.close()


def test_a_replay_is_answered_with_one_connection(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The duplicate key's first ack is looked up after the failed commit gave its
    connection back: with every other connection in use, a replay still gets its answer
    (it would wait for itself otherwise)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    SqlCatalog(url).create_table("logs", SCHEMA)
    catalog = LiteCatalog(url)
    catalog.commit("logs", expected_snapshot_id=1, operation="append", commit_id="x1",
                   ledger=[LedgerEntry("k", {"rows": 1})])
    monkeypatch.setattr(catalog, "_pool", _Pool(catalog._pool.path,  # noqa: SLF001
                                                max_connections=1, wait_s=0))
    with pytest.raises(LedgerKeyExistsError):
        catalog.commit("logs", expected_snapshot_id=2, operation="append", commit_id="x2",
                       ledger=[LedgerEntry("k", {"rows": 2})])
    catalog.close()
