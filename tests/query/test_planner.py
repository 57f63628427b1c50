"""The planner without Spark: which scans a statement gets, with which columns and which
pushed predicates. The rule under test everywhere: push only what is certainly about that
one reference, so pruning can never change an answer."""

from __future__ import annotations

import pytest

from shoal.errors import QueryError
from shoal.format.base import (And, DynamicPathEquals, DynamicPathExists, Equals, InSet, Or,
                               StringHas, TimeRange)
from shoal.format.tokens import tokenize
from shoal.query.planner import analyze, has_pattern
from shoal.types import DYNAMIC, INT, LONG, STRING, TIMESTAMP

TABLES = {
    "logs": {"_timestamp": TIMESTAMP, "props": DYNAMIC, "service": STRING, "status": LONG,
             "msg": STRING, "attrs": DYNAMIC},
    "users": {"_timestamp": TIMESTAMP, "props": DYNAMIC, "service": STRING, "owner": STRING,
              "tier": INT},
}


def scans(sql: str):
    return [(r.table, r.alias, r.columns, r.predicate) for r in analyze(sql, TABLES).refs]


def test_single_scan_projects_only_mentioned_columns_and_pushes_where():
    [(table, alias, cols, pred)] = scans(
        "SELECT service, count(*) FROM logs WHERE service = 'api' AND status >= 500 "
        "GROUP BY service")
    assert (table, alias) == ("logs", "logs")
    assert cols == ["service", "status"]
    assert pred == And((Equals("service", "api"), TimeRange(500, None, column="status")))


def test_star_reads_every_column_but_count_star_reads_one():
    assert scans("SELECT * FROM logs")[0][2] == list(TABLES["logs"])
    assert scans("SELECT l.* FROM logs l")[0][2] == list(TABLES["logs"])
    assert scans("SELECT count(*) FROM logs")[0][2] == ["_timestamp"]


def test_self_join_gives_each_reference_its_own_predicate():
    refs = scans("SELECT a.msg FROM logs a JOIN logs b ON a.status = b.status "
                 "WHERE a.service = 'x' AND b.service = 'y'")
    assert [(r[1], r[3]) for r in refs] == [("a", Equals("service", "x")),
                                            ("b", Equals("service", "y"))]


def test_unqualified_columns_are_not_pushed_when_two_sources_could_own_them():
    refs = scans("SELECT * FROM logs JOIN users USING (service) WHERE service = 'x'")
    assert [r[3] for r in refs] == [None, None]


def test_subquery_scans_are_separate_and_correlated_references_stay_unpushed():
    refs = scans("SELECT service FROM logs o WHERE status > (SELECT avg(status) FROM logs i "
                 "WHERE i.service = o.service AND i.msg = 'boom')")
    by_alias = {r[1]: r[3] for r in refs}
    assert by_alias["i"] == Equals("msg", "boom")      # the outer column is not pushed
    assert by_alias["o"] is None                        # comparison with a subquery


def test_union_all_branches_each_push_their_own_filter():
    refs = scans("SELECT msg FROM logs WHERE service = 'a' UNION ALL "
                 "SELECT msg FROM logs WHERE service = 'b'")
    assert sorted(r[3].value for r in refs) == ["a", "b"]


def test_cte_named_like_a_table_shadows_it():
    refs = scans("WITH logs AS (SELECT 1 AS service) SELECT * FROM logs")
    assert refs == []
    refs = scans("WITH x AS (SELECT * FROM logs WHERE service = 'a') SELECT * FROM x")
    assert [r[3] for r in refs] == [Equals("service", "a")]


def test_outer_join_on_conditions_push_only_to_the_joined_side():
    refs = scans("SELECT * FROM logs l LEFT JOIN users u ON l.service = u.service "
                 "AND u.tier = 1 AND l.status = 5")
    by_alias = {r[1]: r[3] for r in refs}
    assert by_alias["u"] == Equals("tier", 1)
    assert by_alias["l"] is None       # the preserved side keeps rows the ON rejects
    refs = scans("SELECT * FROM logs l RIGHT JOIN users u ON u.tier = 1")
    assert {r[1]: r[3] for r in refs}["u"] is None


def test_or_pushes_only_when_every_branch_lowers():
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE service = 'a' OR service = 'b'")
    assert p == Or((Equals("service", "a"), Equals("service", "b")))
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE service = 'a' OR upper(msg) = 'X'")
    assert p is None


def test_in_lists_and_literal_type_mismatches():
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE service IN ('a', 'b')")
    assert p == InSet("service", ("a", "b"))
    # a string compared with a long column is Spark's cast, not ours to guess: not pushed
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE status = '5'")
    assert p is None


@pytest.mark.parametrize("op, lo, hi", [
    (">=", 0, None), (">", 1_000, None), ("<=", None, 999), ("<", None, -1), ("=", 0, 999)])
def test_timestamp_bounds_cover_the_nanoseconds_spark_truncates(op, lo, hi):
    base = 1_772_323_200_000_000_000 + 123_456_000      # 2026-03-01T00:00:00.123456Z
    [(_, _, _, p)] = scans(
        f"SELECT * FROM logs WHERE _timestamp {op} '2026-03-01 00:00:00.123456'")
    assert p == TimeRange(None if lo is None else base + lo, None if hi is None else base + hi)


def test_timestamp_literal_forms():
    for lit in ("TIMESTAMP '2026-03-01T00:00:00Z'", "'2026-03-01'",
                "CAST('2026-03-01 01:00:00+01:00' AS TIMESTAMP)"):
        [(_, _, _, p)] = scans(f"SELECT * FROM logs WHERE _timestamp >= {lit}")
        assert p == TimeRange(1_772_323_200_000_000_000, None), lit


def test_has_is_rewritten_to_the_tokenizer_rule_and_pushed():
    a = analyze("SELECT count(*) FROM logs WHERE has(msg, 'Timeout')", TABLES)
    assert a.refs[0].predicate == StringHas("msg", "timeout")
    assert "RLIKE" in a.sql_for(["v"]) or "REGEXP" in a.sql_for(["v"]).upper()
    with pytest.raises(QueryError, match="one token"):
        analyze("SELECT * FROM logs WHERE has(msg, 'a b')", TABLES)


@pytest.mark.parametrize("text", ["timeout", "a timeout!", "TIMEOUT42 x", "x-timeout-y",
                                  "timeouts", "atimeout", "time out", "ü timeout ü", ""])
def test_has_pattern_agrees_with_the_tokenizer(text):
    import re

    # Java's (?i) without UNICODE_CASE folds ASCII only, like Python's re.ASCII
    matched = re.search(has_pattern("timeout"), text, re.ASCII) is not None
    assert matched == ("timeout" in tokenize(text))


def test_json_paths_push_path_presence():
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE get_json_object(attrs, '$.http.method') "
                           "= 'GET'")
    assert p == DynamicPathEquals("attrs", "http.method", "GET")
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE get_json_object(attrs, '$.code') > '5'")
    assert p == DynamicPathExists("attrs", "code")
    [(_, _, _, p)] = scans("SELECT * FROM logs WHERE get_json_object(attrs, '$.a') IS NOT NULL")
    assert p == DynamicPathExists("attrs", "a")


def test_time_travel_and_rewrite_keep_aliases():
    a = analyze("SELECT l.service FROM logs VERSION AS OF 3 l WHERE l.service = 'a'", TABLES)
    assert a.refs[0].version == "3"
    sql = a.sql_for(["__scan_1"])
    assert "__scan_1 AS l" in sql and "VERSION" not in sql
    a = analyze("SELECT * FROM logs TIMESTAMP AS OF '2026-03-01T00:00:00Z'", TABLES)
    assert a.refs[0].timestamp == "2026-03-01T00:00:00Z"


def test_byte_functions_get_their_default_order():
    a = analyze("SELECT int_from_bytes(msg) FROM logs", TABLES)
    assert "INT_FROM_BYTES(msg, 'BIG_ENDIAN')" in a.sql_for(["v"]).upper().replace(
        "MSG", "msg")


def test_unknown_tables_are_left_to_the_caller():
    assert scans("SELECT * FROM other_thing") == []
