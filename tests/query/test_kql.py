"""KQL beyond the corpus: positioned errors, pruning and time travel through KQL,
the render hint, and where the translation puts predicates (next to the scan)."""

from __future__ import annotations

import pytest

from shoal.errors import KqlSemanticError, KqlSyntaxError, TableNotFoundError
from shoal.frontends.kusto.kql import kql_to_sql
from tests.query.conftest import ndjson
from tests.query.kql_corpus import NOW_NS, TEAMS
from tests.query.test_kql_corpus import make_db

TABLES = {"logs": {"_timestamp": "timestamp", "props": "dynamic", "service": "string",
                   "level": "string", "message": "string", "attrs": "dynamic",
                   "latency_ms": "long"}}


@pytest.fixture(scope="module")
def kdb(tmp_path_factory):
    db = make_db(str(tmp_path_factory.mktemp("kql-more")), query_engine="local")
    yield db
    db.close()


@pytest.mark.parametrize(("query", "line", "column", "found"), [
    ("logs | where level = = 'x'", 1, 20, "'='"),
    ("logs\n| where level == 'x'\n| summarise count()", 3, 3, "'summarise'"),
    ("logs | take", 1, 12, "end of input"),
    ("logs | where message has 'unterminated", 1, 26, '"\'"'),
    ("logs\n  | project a,\n  | take 1", 3, 3, "'|'"),
    ("logs | where latency_ms > 5q", 1, 28, "'q'"),
    ("logs | sort by level ascending", 1, 22, "'ascending'"),
    ("logs | join kind=sideways (logs) on service", 1, 18, "'sideways'"),
    ("logs | where _timestamp > datetime(2026-13-45)", 1, 27, "'2026-13-45'"),
    # names and numbers are ASCII: other letters and digits are refused where they stand
    ("\u00f9.\u00d5\U0002f1c0", 1, 1, "'\u00f9'"),
    ("logs | where latency_ms == \u0663", 1, 28, "'\u0663'"),
    ("logs | where !\u00e9x", 1, 14, "'!'"),
])
def test_syntax_errors_name_line_column_and_token(query, line, column, found):
    with pytest.raises(KqlSyntaxError) as e:
        kql_to_sql(query, TABLES)
    assert (e.value.line, e.value.column, e.value.found) == (line, column, found)
    assert f"on line [{line},{column}]" in str(e.value)
    assert e.value.code == "kql_syntax"


@pytest.mark.parametrize(("query", "line", "column", "text"), [
    ("logs | where nosuch == 1", 1, 14, "Failed to resolve scalar expression named 'nosuch'"),
    ("logs\n| project service\n| where level == 'x'", 3, 9, "named 'level'"),
    ("logs | where message has level", 1, 26, "string literal"),
    ("logs | project n = count()", 1, 20, "only allowed in summarize"),
    ("logs | extend x = frobnicate(level)", 1, 19, "Unknown function: 'frobnicate'"),
    ("logs | where level.x == 1", 1, 19, "read into dynamic values"),
    ("logs | summarize percentile(latency_ms, 150)", 1, 18, "0..100"),
])
def test_semantic_errors_are_positioned(query, line, column, text):
    with pytest.raises(KqlSemanticError) as e:
        kql_to_sql(query, TABLES)
    assert (e.value.line, e.value.column) == (line, column)
    assert text in str(e.value)


def test_an_unknown_table_is_not_found():
    with pytest.raises(TableNotFoundError):
        kql_to_sql("nosuch | take 1", TABLES)


def test_time_and_filters_reach_the_scan_as_pushable_literals():
    sql = kql_to_sql("logs | extend m = attrs.http.method | where m == 'GET' and "
                     "_timestamp > ago(1h) and message has 'deadlock' | take 3",
                     TABLES, now_ns_utc=NOW_NS).sql
    inner = sql[sql.index("FROM logs"):]
    assert "_timestamp > CAST('2026-03-01 05:00:00' AS TIMESTAMP)" in inner
    assert "has(message, 'deadlock')" in inner
    assert inner.index("has(") < inner.index(") AS _k")      # inside the scan's SELECT
    assert sql.rstrip().endswith("WHERE (m = 'GET') LIMIT 3")


def test_has_prunes_extents_through_kql(kdb):
    kql = "logs | where message has 'deadlock' | project message"
    pruned = kdb.query_engine.execute_kql(kql, engine="local")
    full = kdb.query_engine.execute_kql(kql, engine="local", prune=False)
    stats = pruned.stats.to_json()
    assert stats["extents_considered"] == 4
    assert stats["extents_pruned"] == 3          # "deadlock" is only in the third extent
    assert full.stats.to_json()["extents_pruned"] == 0
    assert sorted(pruned.table.column("message").to_pylist()) == sorted(
        full.table.column("message").to_pylist())
    assert pruned.table.num_rows == 6


def test_time_range_prunes_extents_through_kql(kdb):
    result = kdb.query_engine.execute_kql("logs | where _timestamp > ago(1h) | count",
                                          engine="local", now_ns=NOW_NS)
    assert result.stats.to_json()["extents_pruned"] == 3      # only the last 90 minutes
    assert result.table.to_pylist() == [{"Count": 199}]    # 18 s apart, after 05:00


def test_time_travel_on_the_table_source(tmp_path):
    db = make_db(str(tmp_path / "data"), query_engine="local")
    try:
        before = db.catalog.load_table("teams").current_snapshot_id
        db.ingest_ndjson("teams", ndjson(TEAMS[:2]))
        now = db.kql("teams | count", engine="local").table.to_pylist()
        then = db.kql(f"table('teams', version={before}) | count", engine="local")
        assert now == [{"Count": 6}]
        assert then.table.to_pylist() == [{"Count": 4}]
        assert f"VERSION AS OF {before}" in (then.translated_sql or "")
    finally:
        db.close()


def test_render_is_returned_as_a_hint(kdb):
    result = kdb.kql("logs | summarize c = count() by bin(_timestamp, 1h) "
                     "| render timechart with (title='per hour', ytitle=count)",
                     engine="local")
    assert result.render == {"visualization": "timechart",
                             "properties": {"title": "per hour", "ytitle": "count"}}
    assert result.table.num_rows == 6


def test_render_must_come_last():
    with pytest.raises(KqlSyntaxError):
        kql_to_sql("logs | render table | take 1", TABLES)


def test_header_columns_and_their_byte_functions_through_kql(tmp_path):
    import struct

    import pyarrow as pa

    import shoal

    db = shoal.connect(data_dir=str(tmp_path / "h"), query_engine="local")
    try:
        db.sql("CREATE TABLE h (k string, n binary HEADER('n'))")
        info = db.catalog.load_table("h")
        rows = 10
        t = pa.table({
            "_timestamp": pa.array([NOW_NS - i for i in range(rows)], pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(rows, pa.binary()),
            "k": [f"k{i}" for i in range(rows)],
            "n": [struct.pack(">i", i) for i in range(rows)],
        }).cast(info.schema.arrow())
        db.coordinator.append("h", [db.coordinator.write_extent(info, t.to_batches())])
        kql = db.kql("h | where int_from_bytes(n) >= 7 | project k, v = int_from_bytes(n)"
                     " | sort by v asc", engine="local")
        sql = db.sql("SELECT k, int_from_bytes(n) AS v FROM h WHERE int_from_bytes(n) >= 7 "
                     "ORDER BY v", engine="local")
        assert kql.table.to_pylist() == sql.table.to_pylist() == [
            {"k": "k7", "v": 7}, {"k": "k8", "v": 8}, {"k": "k9", "v": 9}]
    finally:
        db.close()


@pytest.mark.parametrize("query", [
    "logs | where " + "(" * 3000 + "latency_ms" + ")" * 3000 + " > 0",
    "logs | where " + " + ".join(["latency_ms"] * 20000) + " > 0",
    "logs | where " + "not(" * 2000 + "true" + ")" * 2000,
    "logs | where latency_ms > " + "-" * 5000 + "1",
    "logs | join (" * 400 + "logs" + ") on service" * 400,
    "union " + "(union " * 400 + "logs" + ")" * 400,
])
def test_deep_queries_are_syntax_errors_not_a_crash(query):
    # bounded nesting and expression depth: a 400 with a position, never a RecursionError
    with pytest.raises(KqlSyntaxError, match="at most"):
        kql_to_sql(query, TABLES)
