"""KQL's print, range, getschema, parse / parse-where, mv-expand, lookup, the join kinds,
union with withsource, as and materialize(), against answers worked out by hand over two
small tables; where each runs (everything but mv-expand on the embedded engine); and
positioned errors for malformed forms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import shoal
from shoal.errors import KqlSemanticError, KqlSyntaxError
from shoal.frontends.kusto.kql import kql_to_sql
from shoal.types import DYNAMIC, LONG, STRING, Column
from tests.query.conftest import ndjson

REQUESTS = [
    {"msg": "GET /a 200 12ms", "host": "h1", "code": 200, "tags": ["x", "y"]},
    {"msg": "POST /b 500 7ms", "host": "h2", "code": 500, "tags": ["z"]},
    {"msg": "garbage", "host": "h1", "code": 404, "tags": []},
    {"msg": "GET /c 200 3ms", "host": "h3", "code": 200, "tags": None},
]
OWNERS = [{"host": "h1", "owner": "ann"}, {"host": "h2", "owner": "bob"},
          {"host": "h9", "owner": "zed"}]
TABLES = {"req": {"_timestamp": "timestamp", "props": "dynamic", "msg": "string",
                  "host": "string", "code": "long", "tags": "dynamic"},
          "owners": {"_timestamp": "timestamp", "props": "dynamic", "host": "string",
                     "owner": "string"}}


def _build(db: shoal.Shoal) -> None:
    db.create_table("req", [Column("msg", STRING), Column("host", STRING), Column("code", LONG),
                            Column("tags", DYNAMIC)])
    db.ingest_ndjson("req", ndjson(REQUESTS))
    db.create_table("owners", [Column("host", STRING), Column("owner", STRING)])
    db.ingest_ndjson("owners", ndjson(OWNERS))


@pytest.fixture(scope="module")
def kdb(tmp_path_factory):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("kql-ops")), query_engine="local")
    _build(db)
    yield db
    db.close()


def run(db: shoal.Shoal, query: str) -> list[dict]:
    result = db.kql(query, engine="local")
    assert result.stats.engine == "local"
    return result.table.to_pylist()


def by(rows: list[dict], *keys: str) -> list[tuple]:
    """Rows as tuples of `keys`, sorted (None first) for answers in no particular order."""
    return sorted((tuple(r[k] for k in keys) for r in rows),
                  key=lambda t: [(v is not None, v) for v in t])


# ---- print, range, getschema ------------------------------------------------------------------
def test_print_is_one_row_of_expressions(kdb):
    assert run(kdb, "print a = 1 + 2, b = strcat('x', 'y'), 5") == [
        {"a": 3, "b": "xy", "print_2": 5}]


@pytest.mark.parametrize(("query", "values"), [
    ("range x from 1 to 10 step 3", [1, 4, 7, 10]),
    ("range x from 10 to 1 step -4", [10, 6, 2]),
    ("range x from 1 to 0 step 1", []),
    ("range x from 0 to 1 step 0.25", [0.0, 0.25, 0.5, 0.75, 1.0]),
    ("range x from 1 to 12 step 1 | where x % 5 == 0", [5, 10]),
])
def test_range_counts_from_start_to_stop_inclusive_in_order(kdb, query, values):
    assert [r["x"] for r in run(kdb, query)] == values


def test_range_over_datetimes_and_a_thousand_rows(kdb):
    rows = run(kdb, "range t from datetime(2026-03-01) to datetime(2026-03-01 02:00) step 1h")
    assert [r["t"] for r in rows] == [datetime(2026, 3, 1, h, tzinfo=UTC) for h in (0, 1, 2)]
    assert run(kdb, "range n from 1 to 1000 step 1 | summarize s = sum(n), c = count()") == [
        {"s": 500500, "c": 1000}]


def test_getschema_lists_the_columns_with_their_types(kdb):
    assert run(kdb, "req | project host, code, t = _timestamp, tags | getschema") == [
        {"ColumnName": "host", "ColumnOrdinal": 0, "DataType": "System.String",
         "ColumnType": "string"},
        {"ColumnName": "code", "ColumnOrdinal": 1, "DataType": "System.Int64",
         "ColumnType": "long"},
        {"ColumnName": "t", "ColumnOrdinal": 2, "DataType": "System.DateTime",
         "ColumnType": "datetime"},
        {"ColumnName": "tags", "ColumnOrdinal": 3, "DataType": "System.Object",
         "ColumnType": "dynamic"}]


# ---- parse ------------------------------------------------------------------------------------
def test_parse_fills_typed_columns_and_nulls_where_the_pattern_fails(kdb):
    rows = run(kdb, 'req | parse msg with verb " " path " " status:long " " took:long "ms" '
                    "| project code, verb, path, status, took")
    assert by(rows, "code", "verb", "path", "status", "took") == [
        (200, "GET", "/a", 200, 12), (200, "GET", "/c", 200, 3),
        (404, None, None, None, None), (500, "POST", "/b", 500, 7)]


def test_parse_star_skips_and_a_last_column_takes_the_rest(kdb):
    rows = run(kdb, 'req | parse msg with * " " path " " rest | project path, rest')
    assert by(rows, "path", "rest") == [(None, None), ("/a", "200 12ms"), ("/b", "500 7ms"),
                                        ("/c", "200 3ms")]


def test_parse_where_keeps_only_the_rows_that_parse(kdb):
    rows = run(kdb, 'req | parse-where msg with verb " " * " " status:int " " * '
                    "| project verb, status")
    assert by(rows, "verb", "status") == [("GET", 200), ("GET", 200), ("POST", 500)]


def test_parse_kind_regex_counts_the_pattern_s_own_groups(kdb):
    rows = run(kdb, 'req | parse kind=regex msg with "([A-Z]+) " path " [0-9]+ " '
                    'took:long "ms" | project path, took')
    assert by(rows, "path", "took") == [(None, None), ("/a", 12), ("/b", 7), ("/c", 3)]


def test_parse_kind_regex_flags_lead_the_regex():
    sql = kql_to_sql('req | parse-where kind=regex flags=is msg with "get " path " " *',
                     TABLES).sql
    assert "msg RLIKE '(?is)^get (.*?) '" in sql


# ---- joins, lookup, union, as, materialize ----------------------------------------------------
L = "req | project host, code"


@pytest.mark.parametrize(("kind", "columns", "rows"), [
    ("inner", ("host", "code", "host1", "owner"),
     [("h1", 200, "h1", "ann"), ("h1", 404, "h1", "ann"), ("h2", 500, "h2", "bob")]),
    ("leftouter", ("host", "code", "host1", "owner"),
     [("h1", 200, "h1", "ann"), ("h1", 404, "h1", "ann"), ("h2", 500, "h2", "bob"),
      ("h3", 200, None, None)]),
    ("rightouter", ("host", "code", "host1", "owner"),
     [(None, None, "h9", "zed"), ("h1", 200, "h1", "ann"), ("h1", 404, "h1", "ann"),
      ("h2", 500, "h2", "bob")]),
    ("fullouter", ("host", "code", "host1", "owner"),
     [(None, None, "h9", "zed"), ("h1", 200, "h1", "ann"), ("h1", 404, "h1", "ann"),
      ("h2", 500, "h2", "bob"), ("h3", 200, None, None)]),
    ("leftsemi", ("host", "code"), [("h1", 200), ("h1", 404), ("h2", 500)]),
    ("leftanti", ("host", "code"), [("h3", 200)]),
    ("rightsemi", ("host", "owner"), [("h1", "ann"), ("h2", "bob")]),
    ("rightanti", ("host", "owner"), [("h9", "zed")]),
])
def test_join_kinds(kdb, kind, columns, rows):
    got = run(kdb, f"{L} | join kind={kind} (owners | project host, owner) on host")
    assert tuple(got[0]) == columns if got else True
    assert by(got, *columns) == rows


def test_join_innerunique_keeps_one_left_row_per_key(kdb):
    # h1 is on the left twice (codes 200 and 404): innerunique keeps one of them.
    got = run(kdb, f"{L} | join (owners | project host, owner) on host")
    assert sorted(r["host"] for r in got) == ["h1", "h2"]
    h1 = next(r for r in got if r["host"] == "h1")
    assert h1["code"] in (200, 404) and h1["owner"] == "ann"


def test_lookup_adds_the_right_columns_once(kdb):
    got = run(kdb, f"{L} | lookup (owners | project host, owner) on host")
    assert list(got[0]) == ["host", "code", "owner"]
    assert by(got, "host", "code", "owner") == [("h1", 200, "ann"), ("h1", 404, "ann"),
                                                ("h2", 500, "bob"), ("h3", 200, None)]
    inner = run(kdb, f"{L} | lookup kind=inner owners on host | project host, owner")
    assert by(inner, "host", "owner") == [("h1", "ann"), ("h1", "ann"), ("h2", "bob")]
    renamed = run(kdb, f"{L} | lookup (owners | project h = host, owner) on $left.host == "
                       "$right.h | where code == 500")
    assert renamed == [{"host": "h2", "code": 500, "h": "h2", "owner": "bob"}]


def test_union_of_a_table_and_a_subquery_with_withsource(kdb):
    got = run(kdb, "union withsource=src (req | where code == 500 | project host), "
                   "(owners | where owner == 'zed' | project host), (print host = 'p')")
    assert by(got, "src", "host") == [("owners", "h9"), ("req", "h2"), ("union", "p")]
    piped = run(kdb, "req | where code == 404 | project host | union withsource=src "
                     "(owners | where owner == 'bob' | project host)")
    assert by(piped, "src", "host") == [("owners", "h2"), ("req", "h1")]


def test_as_names_the_rows_so_far_for_a_later_leg(kdb):
    got = run(kdb, "req | where code == 200 | as ok | join kind=inner (ok | project host, "
                   "again = code) on host | project host, again")
    assert by(got, "host", "again") == [("h1", 200), ("h3", 200)]


def test_materialize_in_a_let_is_read_like_the_query_it_holds(kdb):
    got = run(kdb, "let per_host = materialize(req | summarize n = count() by host);\n"
                   "per_host | where n > 1 | join kind=inner (per_host) on host "
                   "| project host, n")
    assert got == [{"host": "h1", "n": 2}]


def test_top_nested_by_hand(kdb):
    got = run(kdb, "req | top-nested 1 of host by n = count(), top-nested 1 of code by "
                   "m = max(code)")
    assert got == [{"host": "h1", "n": 2, "code": 404, "m": 404}]


# ---- mv-expand (Spark) --------------------------------------------------------------------------
def test_mv_expand_is_translated_for_spark():
    sql = kql_to_sql("req | mv-expand with_itemindex=i tag = tags to typeof(string) limit 5",
                     TABLES).sql
    assert "explode(sequence(0, least(size(__kql_a1), 5)))" in sql
    assert "from_json(tags, 'array<string>')" in sql


@pytest.mark.slow
def test_mv_expand_expands_arrays_in_parallel_on_spark(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path / "data"))
    try:
        _build(db)
        result = db.kql("req | mv-expand with_itemindex=i tag = tags to typeof(string) "
                        "| project host, tag, i")
        assert result.stats.engine == "spark"
        # ["x","y"] two rows, ["z"] one, [] none, null one row of null
        assert by(result.table.to_pylist(), "host", "tag", "i") == [
            ("h1", "x", 0), ("h1", "y", 1), ("h2", "z", 0), ("h3", None, 0)]
        parallel = db.kql("req | where host == 'h1' and code == 200 | extend n = "
                          "todynamic('[1, 2, 3]') | mv-expand tags, n to typeof(long) "
                          "| project tags, n").table.to_pylist()
        assert parallel == [{"tags": "x", "n": 1}, {"tags": "y", "n": 2},
                            {"tags": None, "n": 3}]
        # a regex with flags is Spark's too
        flagged = db.kql('req | parse-where kind=regex flags=i msg with "get " path " " * '
                         "| project path").table.to_pylist()
        assert by(flagged, "path") == [("/a",), ("/c",)]
    finally:
        db.close()


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("query", "line", "column", "found"), [
    ("req | parse msg with", 1, 21, "end of input"),
    ("req | parse kind=relaxed msg with a", 1, 18, "'relaxed'"),
    ("req | parse kind=regex flags=U msg with a", 1, 30, "'U'"),
    ("req | parse msg with a:guid", 1, 24, "'guid'"),
    ("req | mv-expand kind=bag tags", 1, 22, "'bag'"),
    ("req | mv-expand tags to typeof(guid)", 1, 32, "'guid'"),
    ("req | lookup kind=fullouter owners on host", 1, 19, "'fullouter'"),
    ("range x from 1 to 10", 1, 21, "end of input"),
    ("req | as", 1, 9, "end of input"),
])
def test_malformed_forms_are_positioned_syntax_errors(query, line, column, found):
    with pytest.raises(KqlSyntaxError) as e:
        kql_to_sql(query, TABLES)
    assert (e.value.line, e.value.column, e.value.found) == (line, column, found)


@pytest.mark.parametrize(("query", "line", "column", "text"), [
    ("range x from 1 to 2000000 step 1", 1, 32, "at most 1,000,000 rows"),
    ("range x from 1 to 5 step 0", 1, 26, "non-zero step"),
    ("range x from 'a' to 'b' step 1", 1, 14, "numbers"),
    ("req | mv-expand tostring(tags)", 1, 17, "needs a name"),
    ("req | mv-expand code", 1, 17, "not long"),
    ("req | parse kind=regex msg with '(' a", 1, 33, "the regex '('"),
    ("req | parse msg with a ' ' a", 1, 28, "names 'a' twice"),
])
def test_semantic_errors_are_positioned(query, line, column, text):
    with pytest.raises(KqlSemanticError) as e:
        kql_to_sql(query, TABLES)
    assert (e.value.line, e.value.column) == (line, column)
    assert text in str(e.value)


def test_range_of_reals_reaches_stop_despite_rounding(kdb):
    # 0.3 / 0.1 is 2.9999999999999996 in binary floating point: 0.3 is still a row
    assert len(run(kdb, "range x from 0 to 0.3 step 0.1")) == 4
