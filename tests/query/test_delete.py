"""DELETE FROM and TRUNCATE TABLE through `db.sql`: the rows a user sees afterwards, what the
statement touched, time travel before it, and erasure once snapshots expire. Every test runs
on the SQLite and Postgres catalogs; the storage tests also on the S3 test server."""

from __future__ import annotations

import json
import time

import pytest

import shoal
from shoal.errors import QueryError, SnapshotNotFoundError, TableNotFoundError
from shoal.maintenance.gc import collect_garbage
from shoal.maintenance.retention import apply_retention
from shoal.query.delete import DeleteNotLocalError
from shoal.query.guard import classify
from shoal.types import Column, parse_type

HOUR_NS = 3600 * 10**9
T0 = 1_795_910_400 * 10**9          # 2026-11-29T00:00:00Z


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_url(request, tmp_path) -> str | None:
    if request.param == "local":
        return None
    return request.getfixturevalue("s3_store_url")


@pytest.fixture
def db(tmp_path, catalog_url, store_url):
    db = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url,
                       storage_url=store_url)
    db.create_table("ev", [Column("svc", parse_type("string")),
                           Column("n", parse_type("long")),
                           Column("user_id", parse_type("string"))])
    for hour in range(4):                      # one extent per hour, 50 rows each
        rows = [{"_timestamp": T0 + hour * HOUR_NS + i * 10**9, "svc": f"s{i % 5}",
                 "n": hour * 100 + i, "user_id": f"u{i % 7}"} for i in range(50)]
        db.ingest_ndjson("ev", "\n".join(json.dumps(r) for r in rows).encode())
    yield db
    db.close()


def _ns(db, sql: str = "SELECT n FROM ev") -> list[int]:
    return sorted(r["n"] for r in db.sql(sql).table.to_pylist())


def _answer(db, sql: str) -> dict:
    result = db.sql(sql)
    assert result.kind == "ddl"
    [row] = result.table.to_pylist()
    return row


def test_delete_removes_exactly_the_matching_rows_and_says_what_it_touched(db):
    everything = _ns(db)
    snap_before = db.catalog.load_table("ev").current_snapshot_id
    row = _answer(db, "DELETE FROM ev WHERE user_id = 'u3' AND n >= 200")
    expected_gone = [n for n in everything if n >= 200 and (n % 100) % 7 == 3]
    assert row["rows_deleted"] == len(expected_gone) == 14
    assert row["operation"] == "delete"
    # only the two later hours hold n >= 200: the others are pruned, never read
    assert (row["extents_touched"], row["extents_rewritten"], row["extents_removed"]) == (2, 2, 0)
    assert row["extents_pruned"] == 2
    assert row["bytes_rewritten"] > 0
    assert _ns(db) == [n for n in everything if n not in expected_gone]
    snap = db.catalog.snapshot("ev", row["snapshot_id"])
    assert snap.operation == "delete" and snap.parent_id == snap_before
    assert db.catalog.table_counts("ev") == (200 - 14, 4)


def test_delete_matching_nothing_commits_nothing(db):
    snap = db.catalog.load_table("ev").current_snapshot_id
    row = _answer(db, "DELETE FROM ev WHERE n = 99999")
    assert row["rows_deleted"] == 0 and row["snapshot_id"] is None
    assert row["extents_touched"] == 0 and row["extents_pruned"] == 4
    assert row["bytes_read"] == 0               # decided by the catalog alone
    # a predicate the stats cannot rule out reads the extents but rewrites none
    row = _answer(db, "DELETE FROM ev WHERE n % 100 = 77")
    assert row["rows_deleted"] == 0 and row["extents_touched"] == 0
    assert row["extents_scanned"] == 4 and row["bytes_rewritten"] == 0
    assert db.catalog.load_table("ev").current_snapshot_id == snap


def test_delete_of_one_hour_removes_its_extent_without_rewriting(db):
    row = _answer(db, "DELETE FROM ev WHERE _timestamp >= '2026-11-29T01:00:00Z' "
                      "AND _timestamp < '2026-11-29T02:00:00Z'")
    assert row["rows_deleted"] == 50
    assert (row["extents_removed"], row["extents_rewritten"], row["extents_pruned"]) == (1, 0, 3)
    assert row["bytes_rewritten"] == 0
    assert db.catalog.table_counts("ev") == (150, 3)


def test_null_predicate_keeps_the_row_and_alias_and_functions_work(db):
    db.ingest_ndjson("ev", b'{"n": 1000, "svc": "x"}\n{"n": 1001, "svc": "x", "user_id": "u1"}')
    row = _answer(db, "DELETE FROM ev AS e WHERE upper(e.user_id) = 'U1' AND e.svc = 'x'")
    assert row["rows_deleted"] == 1
    assert [n for n in _ns(db) if n >= 1000] == [1000]      # user_id NULL: not TRUE, kept


def test_truncate_and_delete_without_where_empty_the_table(db):
    row = _answer(db, "TRUNCATE TABLE ev")
    assert (row["operation"], row["rows_deleted"], row["extents_removed"]) == ("truncate",
                                                                              200, 4)
    assert db.sql("SELECT count(*) AS c FROM ev").table.to_pylist() == [{"c": 0}]
    assert db.catalog.snapshot("ev", row["snapshot_id"]).operation == "truncate"
    db.ingest_ndjson("ev", b'{"n": 1}\n{"n": 2}')
    assert _answer(db, "DELETE FROM ev;")["rows_deleted"] == 2
    assert db.catalog.table_counts("ev") == (0, 0)


def test_time_travel_before_the_delete_shows_the_rows_until_they_expire(db):
    everything = _ns(db)
    before = db.catalog.load_table("ev").current_snapshot_id
    row = _answer(db, "DELETE FROM ev WHERE user_id = 'u2'")
    assert row["rows_deleted"] > 0
    gone = [p for p in _written_before(db, before) if p not in _live_paths(db)]
    assert gone and all(db.store.exists(p) for p in gone)
    assert _ns(db, f"SELECT n FROM ev VERSION AS OF {before}") == everything
    assert "u2" not in {r["user_id"] for r in db.sql("SELECT user_id FROM ev").table.to_pylist()}

    # snapshot retention passes (a clock read later, not a wait): the snapshots before the
    # delete are expired and the files only they needed are deleted
    db.sql("ALTER TABLE ev SET TBLPROPERTIES ('snapshot_retention' = '1s')")
    report = apply_retention(db.catalog, db.coordinator, db.store, "ev", now=time.time() + 60)
    assert report.snapshots_expired >= 1 and report.files_deleted == len(gone)
    with pytest.raises(SnapshotNotFoundError):
        db.sql(f"SELECT n FROM ev VERSION AS OF {before}")
    assert not any(db.store.exists(p) for p in gone)
    assert collect_garbage(db.catalog, db.store, grace_s=0).deleted == 0
    assert "u2" not in {r["user_id"] for r in db.sql("SELECT user_id FROM ev").table.to_pylist()}


def _written_before(db, snapshot_id: int) -> list[str]:
    return [e.object_path for e in db.catalog.manifests("ev", snapshot_id)]


def _live_paths(db) -> set[str]:
    return {e.object_path for e in db.catalog.manifests("ev")}


def test_delete_reads_old_extents_through_the_current_schema(db):
    db.sql("ALTER TABLE ev ADD COLUMN region string")
    db.ingest_ndjson("ev", b'{"n": 5000, "region": "eu"}\n{"n": 5001, "region": "us"}')
    row = _answer(db, "DELETE FROM ev WHERE region = 'eu' OR (region IS NULL AND n < 3)")
    assert row["rows_deleted"] == 4
    assert [n for n in _ns(db) if n < 3 or n >= 5000] == [5001]
    assert db.sql("SELECT region FROM ev WHERE n = 5001").table.to_pylist() == [
        {"region": "us"}]


def test_delete_finds_renamed_columns_and_never_a_dropped_ones_values(db):
    # the four extents were written before the rename and the drop: a delete by the new name
    # finds their rows, and the re-added `user_id` is a new, empty column there
    db.sql("ALTER TABLE ev RENAME COLUMN svc TO service")
    db.sql("ALTER TABLE ev DROP COLUMN user_id")
    db.sql("ALTER TABLE ev ADD COLUMN user_id string")
    row = _answer(db, "DELETE FROM ev WHERE service = 's1' AND n < 100")
    assert row["rows_deleted"] == 10
    assert _answer(db, "DELETE FROM ev WHERE user_id = 'u3'")["rows_deleted"] == 0
    left = db.sql("SELECT service, n, user_id FROM ev WHERE n < 100").table.to_pylist()
    assert len(left) == 40 and {r["service"] for r in left} == {"s0", "s2", "s3", "s4"}
    assert {r["user_id"] for r in left} == {None}
    # the rewritten extent answers under the current names, like the untouched ones
    assert db.sql("SELECT count(*) AS c FROM ev WHERE service = 's1'").table.to_pylist() == [
        {"c": 30}]


def test_bad_deletes_are_clear_4xx_errors(db):
    with pytest.raises(TableNotFoundError):
        db.sql("DELETE FROM nope WHERE n = 1")
    with pytest.raises(QueryError, match="nope"):
        db.sql("DELETE FROM ev WHERE nope = 1")
    with pytest.raises(QueryError, match="only the columns"):
        db.sql("DELETE FROM ev WHERE n IN (SELECT n FROM ev WHERE svc = 's1')")
    with pytest.raises(QueryError, match="line 1, col 26"):
        db.sql("DELETE FROM ev WHERE n = = 1")
    with pytest.raises(QueryError, match="not allowed"):
        db.sql("DELETE FROM ev WHERE reflect('java.lang.System', 'exit', 1) IS NULL")
    with pytest.raises(DeleteNotLocalError, match="cannot evaluate this WHERE in process: CAST"):
        db.sql("DELETE FROM ev WHERE n > 1.5BD")       # Spark's decimal semantics
    assert db.catalog.table_counts("ev") == (200, 4)


def test_column_names_resolve_case_insensitively_as_in_spark(db):
    row = _answer(db, "DELETE FROM ev WHERE User_ID = 'u0' AND N < 100")
    assert row["rows_deleted"] == 8
    assert [n for n in _ns(db) if n < 100 and n % 7 == 0] == []


def test_delete_and_truncate_need_the_admin_scope():
    for sql in ("DELETE FROM t WHERE a = 1", "delete from t", "TRUNCATE TABLE t",
                "/* x */ DELETE FROM t WHERE a = 1"):
        assert classify(sql).kind == "admin_ddl", sql


def test_a_delete_racing_a_compaction_starts_again_and_misses_no_row(db):
    """Compaction replaces the extents a delete has just rewritten, right before the
    delete commits: the delete lands nothing from that read, starts again on the compacted
    extent and deletes the rows there."""
    from shoal.commit import Replacement, swap_extents
    from shoal.query.ddl import parse_ddl

    everything = _ns(db)
    compacted = []

    def compact_first(stage: str, **_info) -> None:
        if stage != "extents_written" or compacted:
            return
        info = db.catalog.load_table("ev")
        live = db.catalog.manifests("ev")
        rows, _ = db.read("ev")
        merged = db.coordinator.write_extent(info, [rows])
        out = swap_extents(db.coordinator, "ev", [Replacement(live, merged)])
        compacted.append(out.snapshot)

    report = db.query_engine.run_delete(parse_ddl("DELETE FROM ev WHERE svc = 's4'"),
                                    on_stage=compact_first)
    assert compacted and compacted[0] is not None and report.rounds == 2
    assert report.rows_deleted == 40 and report.extents_rewritten == 1
    assert _ns(db) == [n for n in everything if n % 100 % 5 != 4]
    assert collect_garbage(db.catalog, db.store, grace_s=0).deleted == 0   # nothing left over


def test_a_rewritten_extent_keeps_shredded_paths_only_if_it_had_them(tmp_path):
    import pyarrow as pa

    from shoal.commit import ExtentStager, extent_prefix
    from shoal.format import rewrite_format
    from shoal.format.shred import parse_hidden

    db = shoal.connect(data_dir=str(tmp_path / "data"))
    db.create_table("j", [Column("n", parse_type("long")), Column("attrs", parse_type("dynamic"))])
    info = db.catalog.load_table("j")
    rows = [{"_timestamp": T0 + i, "n": i,
             "attrs": json.dumps({"http": {"method": "GET" if i % 2 else "POST"}}).encode()}
            for i in range(200)]
    batch = pa.Table.from_pylist([{c: r.get(c) for c in info.schema.names} for r in rows],
                                 schema=info.schema.arrow())
    shredded = ExtentStager(db.store, rewrite_format(db.formats["tlm"])).write(
        extent_prefix(info.name, info.id), info.schema, [batch])
    db.coordinator.append("j", [shredded])
    db.ingest_ndjson("j", "\n".join(json.dumps({"n": 1000 + i, "attrs": {"k": i}})
                                    for i in range(50)).encode())

    def has_paths(entry) -> bool:
        reader = db.formats[entry.format].open_extent(db.store, entry.object_path)
        return any(parse_hidden(n) is not None for st in reader.metadata().block_stats
                   for n in st.get("columns") or ())

    assert [has_paths(e) for e in db.catalog.manifests("j")] == [True, False]
    row = _answer(db, "DELETE FROM j WHERE n % 10 = 3")
    assert row["extents_rewritten"] == 2 and row["rows_deleted"] == 25
    by_rows = sorted(db.catalog.manifests("j"), key=lambda e: e.row_count, reverse=True)
    assert [has_paths(e) for e in by_rows] == [True, False]
    got = db.sql("SELECT get_json_object(attrs, '$.http.method') AS m, count(*) AS c FROM j "
                 "WHERE n < 1000 GROUP BY 1 ORDER BY 1").table.to_pylist()
    assert got == [{"m": "GET", "c": 80}, {"m": "POST", "c": 100}]   # n % 10 = 3 is odd
    # a predicate on a path reads it from the shredded sub-column or the JSON alike
    row = _answer(db, "DELETE FROM j WHERE get_json_object(attrs, '$.http.method') = 'GET' "
                      "OR get_json_object(attrs, '$.k') = '7'")
    assert row["rows_deleted"] == 81
    assert db.sql("SELECT count(*) AS c FROM j").table.to_pylist() == [{"c": 100 + 44}]
    db.close()
