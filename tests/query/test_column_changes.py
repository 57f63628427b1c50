"""Column changes as schema versions (docs/sql.md): RENAME COLUMN, DROP COLUMN and ALTER
COLUMN TYPE over extents written before and after, on both catalogs and both engines;
pruning under a renamed name; a dropped name added again by live ingest; protected columns;
compaction across the versions. The extents live in the local store and in the S3 test
server alike (the S3 reads go through the block reader, the local ones through the fast one)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import shoal
from shoal.errors import (IncompatibleSchemaChangeError, InvalidSchemaError,
                          ProtectedColumnError)
from shoal.format.base import Equals
from shoal.maintenance.compaction import compact_table

from tests.query.test_extent_versions import InlineRunner
from tests.support.fixtures import SPARK_MASTER


def _ndjson(rows: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode()


def _ts(minute: int, second: int = 0) -> str:
    return f"2026-03-01T00:{minute:02d}:{second:02d}Z"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_url(request) -> str | None:
    return None if request.param == "local" else request.getfixturevalue("s3_store_url")


@pytest.fixture
def db(tmp_path, catalog_url, store_url):
    client = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url,
                           storage_url=store_url)
    yield client
    client.close()


def _build(db) -> None:
    """Four extents, one per schema shape: a/c/n int; a renamed b; c dropped, then added
    again by live ingest as a new column; n widened to long."""
    db.sql("CREATE TABLE t (a string, c string, n int)")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(0, i), "a": f"x{i}", "c": f"old{i}",
                                    "n": i} for i in range(3)]))
    db.sql("ALTER TABLE t RENAME COLUMN a TO b")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(1), "b": "y0", "c": "old9", "n": 9}]))
    db.sql("ALTER TABLE t DROP COLUMN c")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(2), "b": "z0", "c": "new0", "n": 20}]))
    db.sql("ALTER TABLE t ALTER COLUMN n TYPE long")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(3), "b": "w0", "c": "new1",
                                    "n": 3_000_000_000}]))


EXPECTED = [
    ("x0", 0, None), ("x1", 1, None), ("x2", 2, None), ("y0", 9, None), ("z0", 20, "new0"),
    ("w0", 3_000_000_000, "new1")]


def _rows(table) -> list[tuple]:
    return [(r["b"], r["n"], r["c"]) for r in table.to_pylist()]


def _matching(db, column: str, value: Any, **options: Any) -> tuple[list[dict], Any]:
    """`db.read` of the rows whose `column` equals `value` (a read returns the blocks that
    may match; the filter itself is the caller's) and the scan's stats."""
    table, stats = db.read("t", Equals(column, value), **options)
    return [r for r in table.to_pylist() if r[column] == value], stats


def test_rename_drop_and_readd_read_through_every_version(db):
    _build(db)
    assert [c["name"] for c in db.describe("t")["columns"]] == [
        "_timestamp", "props", "b", "n", "c"]
    result = db.sql("SELECT * FROM t ORDER BY _timestamp", engine="local").table
    assert result.column_names == ["_timestamp", "props", "b", "n", "c"]
    assert _rows(result) == EXPECTED
    truth, _ = db.read("t")
    assert sorted(_rows(truth), key=str) == sorted(EXPECTED, key=str)
    # the dropped column's old values never come back, pruning on or off
    for prune in (True, False):
        assert db.sql("SELECT count(*) AS k FROM t WHERE c LIKE 'old%'", engine="local",
                      prune=prune).table.to_pylist() == [{"k": 0}]
        assert _matching(db, "c", "old1", prune=prune)[0] == []
        found = _matching(db, "c", "new0", prune=prune)[0]
        assert [(r["b"], r["n"]) for r in found] == [("z0", 20)]
    with pytest.raises(shoal.ShoalError):
        db.sql("SELECT a FROM t", engine="local")


def test_old_snapshots_keep_their_own_names(db):
    _build(db)
    first_data = 2          # snapshot 1 is the creation, 2 the first ingest
    old, _ = db.read("t", snapshot_id=first_data)
    assert old.column_names == ["_timestamp", "props", "a", "c", "n"]
    assert [(r["a"], r["c"]) for r in old.to_pylist()] == [
        ("x0", "old0"), ("x1", "old1"), ("x2", "old2")]


def test_pruning_by_a_renamed_column(db):
    _build(db)
    rows, stats = _matching(db, "b", "x1")
    assert [(r["b"], r["n"], r["c"]) for r in rows] == [("x1", 1, None)]
    assert (stats.extents_considered, stats.extents_pruned, stats.extents_read) == (4, 3, 1)
    answer = db.sql("SELECT b, n FROM t WHERE b = 'y0'", engine="local")
    assert answer.table.to_pylist() == [{"b": "y0", "n": 9}]
    assert answer.stats.scans[0]["stats"].extents_read == 1


def test_block_pruning_by_a_renamed_column(db):
    """Stage 2 looks up the block stats an extent keeps under the name it was written with
    (three blocks of sorted values: two are skipped)."""
    db.sql("CREATE TABLE t (a string) WITH (block_rows = 1024)")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(0), "a": f"x{i:05d}"}
                                   for i in range(3 * 1024)]))
    db.sql("ALTER TABLE t RENAME COLUMN a TO b")
    before, _ = _matching(db, "b", "x02000", prune=False)
    rows, stats = _matching(db, "b", "x02000")
    assert rows == before and [r["b"] for r in rows] == ["x02000"]
    assert (stats.blocks_considered, stats.blocks_pruned) == (3, 2)


def test_live_ingest_adds_a_dropped_name_as_a_new_column(db):
    db.sql("CREATE TABLE t (s string)")
    db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(0), "s": "kept", "tag": "before"}]))
    db.sql("ALTER TABLE t DROP COLUMN tag")
    ack = db.ingest_ndjson("t", _ndjson([{"_timestamp": _ts(1), "s": "again", "tag": "after"}]))
    assert ack.new_columns == ["tag"]
    rows = db.sql("SELECT s, tag FROM t ORDER BY _timestamp", engine="local").table.to_pylist()
    assert rows == [{"s": "kept", "tag": None}, {"s": "again", "tag": "after"}]
    assert _matching(db, "tag", "before")[0] == []


@pytest.mark.parametrize("sql, column", [
    ("ALTER TABLE t RENAME COLUMN _timestamp TO ts", "_timestamp"),
    ("ALTER TABLE t DROP COLUMN _timestamp", "_timestamp"),
    ("ALTER TABLE t DROP COLUMN props", "props"),
    ("ALTER TABLE t ALTER COLUMN props TYPE string", "props"),
    ("ALTER TABLE t RENAME COLUMN s TO props", "props"),
    ("ALTER TABLE t RENAME COLUMN hdr TO h2", "hdr"),
    ("ALTER TABLE t DROP COLUMN hdr", "hdr"),
    ("ALTER TABLE t ALTER COLUMN hdr TYPE dynamic", "hdr"),
])
def test_protected_columns_change_nothing(db, sql, column):
    db.sql("CREATE TABLE t (s string, hdr bytes HEADER('trace'))")
    with pytest.raises(ProtectedColumnError) as info:
        db.sql(sql)
    assert info.value.column == column and f'column "{column}"' in str(info.value)
    assert db.describe("t")["schema_version"] == 1


def test_bad_renames_and_drops_change_nothing(db):
    db.sql("CREATE TABLE t (s string, n int)")
    with pytest.raises(InvalidSchemaError, match='column "n" already exists'):
        db.sql("ALTER TABLE t RENAME COLUMN s TO n")
    with pytest.raises(InvalidSchemaError, match="the table has no such column"):
        db.sql("ALTER TABLE t DROP COLUMN nope")
    with pytest.raises(InvalidSchemaError, match="not identifier-safe"):
        db.sql('ALTER TABLE t RENAME COLUMN s TO "Bad Name"')
    assert db.sql("ALTER TABLE t DROP COLUMN IF EXISTS nope").table.to_pylist()[0][
        "status"] == "unchanged"
    assert db.describe("t")["schema_version"] == 1


def test_sort_key_follows_a_rename_and_blocks_a_drop(db):
    db.sql("CREATE TABLE t (svc string, n int) WITH (sort_by = 'svc, _timestamp')")
    db.sql("ALTER TABLE t RENAME COLUMN svc TO service")
    assert db.describe("t")["properties"]["sort_by"] == "service, _timestamp"
    with pytest.raises(IncompatibleSchemaChangeError, match="unset sort_by first"):
        db.sql("ALTER TABLE t DROP COLUMN service")
    db.sql("ALTER TABLE t DROP COLUMN n")
    assert [c["name"] for c in db.describe("t")["columns"]] == ["_timestamp", "props",
                                                                "service"]


def test_compaction_carries_rows_into_the_current_names(db):
    _build(db)
    report = compact_table(db.catalog, db.coordinator, InlineRunner(), "t",
                           storage_url=db.config.resolved_storage_url, s3_endpoint=None,
                           formats=db.formats)
    assert report.live_extents_after < report.live_extents_before
    result = db.sql("SELECT * FROM t ORDER BY _timestamp", engine="local").table
    assert _rows(result) == EXPECTED
    assert len(_matching(db, "b", "x1")[0]) == 1


@pytest.mark.spark
@pytest.mark.slow
def test_both_engines_answer_alike(tmp_path, spark):
    client = shoal.connect(data_dir=str(tmp_path / "data"), spark_master=SPARK_MASTER)
    try:
        _build(client)
        for sql in ("SELECT * FROM t ORDER BY _timestamp",
                    "SELECT b, n, c FROM t WHERE b IN ('x1', 'w0') ORDER BY b",
                    "SELECT count(*) AS k, count(c) AS kc FROM t WHERE c LIKE 'old%' OR n > 0"):
            local = client.sql(sql, engine="local").table.to_pylist()
            on_spark = client.sql(sql, engine="spark").table.to_pylist()
            assert on_spark == local, sql
        assert _rows(client.sql("SELECT * FROM t ORDER BY _timestamp",
                                engine="spark").table) == EXPECTED
    finally:
        client.close()
