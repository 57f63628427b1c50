"""Aggregates, conditional expressions, window functions, QUALIFY and the names Spark gives
unaliased expressions: the embedded engine answers them exactly as Spark does.

Generated rows (the shared strategies of `test_functions_differential`: nulls, edge text,
halves, -0.0, integers near their limits) go into one table per example; each statement
evaluates many expressions on both engines and the answers must match in names, Arrow types
and every value. Only deterministic forms are compared: windows order by the unique `k` or
use functions whose answer does not depend on how ties are ordered (rank, dense_rank, RANGE
frames). The rows the embedded engine would answer differently go to Spark under `auto`.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings

from shoal.types import LONG, REAL, STRING, Column
from tests.query.conftest import ndjson, rows_at
from tests.query.test_functions_differential import _select, _table, both, fdb, rows_st

__all__ = ["fdb"]       # the shared module's client fixture, used here too

pytestmark = pytest.mark.spark

AGGREGATES = [
    "count(*)", "count(s)", "count(DISTINCT s)", "sum(i)", "sum(DISTINCT i)", "avg(i)",
    "mean(i)", "min(s)", "max(x)", "count_if(x > y)", "count_if(s IS NULL)",
    "sum(i) FILTER (WHERE x > 0)", "count(*) FILTER (WHERE s IS NULL)",
    "max(s) FILTER (WHERE i > 0)", "every(x > 0)", "some(i > 0)",
    "bool_and(s IS NULL)", "bool_or(x < y)",
]
CONDITIONALS = [
    "nvl(s, u)", "ifnull(i, l)", "coalesce(x, y, i)", "coalesce(s, 'none')", "nullif(s, u)",
    "nullif(i, 0)", "nvl2(s, x, y)", "nvl2(u, i, l)", "CASE WHEN x > y THEN s ELSE u END",
    "CASE i WHEN 0 THEN 'zero' WHEN 1 THEN 'one' ELSE a END", "IF(x > 0, i, l)",
    "IF(s IS NULL, 1, 2)", "CASE WHEN i > 0 THEN x WHEN i < 0 THEN i END",
]
WINDOWS = [
    "row_number() OVER (ORDER BY k)", "row_number() OVER (PARTITION BY k % 3 ORDER BY k DESC)",
    "rank() OVER (ORDER BY i)", "dense_rank() OVER (PARTITION BY k % 2 ORDER BY s DESC)",
    "rank() OVER (ORDER BY x DESC, s)", "lag(s) OVER (ORDER BY k)",
    "lead(x + 0, 2) OVER (PARTITION BY k % 2 ORDER BY k)", "lag(i, 1, 0) OVER (ORDER BY k)",
    "lead(s, 1, 'end') OVER (ORDER BY k DESC)", "first_value(s) OVER (ORDER BY k)",
    "last_value(x + 0) OVER (PARTITION BY k % 3 ORDER BY k)", "last_value(s) OVER (ORDER BY k "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
    "sum(i) OVER (ORDER BY i)", "sum(i) OVER (PARTITION BY k % 3)", "count(*) OVER ()",
    "count(s) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)",
    "avg(i) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
    "min(y + 0) OVER (ORDER BY k ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING)",
    "max(s) OVER (PARTITION BY i > 0)", "count(x) OVER (ORDER BY x RANGE BETWEEN UNBOUNDED "
    "PRECEDING AND CURRENT ROW)",
]
# Unaliased: Spark's generated names (checked by `both`, which compares the column names).
NAMES = [
    "k", "k + i", "k - 1", "-l", "-(k + 1)", "k * 2", "x / 2", "i % 7", "i div 2",
    "k + 1 * 2", "(k + 1) * 2", "x > 1", "i = 1", "i <> 1", "i <= 1", "i <=> 2", "NOT (x > y)",
    "x > 0 AND i > 1", "s IS NULL", "s IS NOT NULL", "i IN (1, 2)", "i NOT IN (1, -2)",
    "i BETWEEN -1 AND 2", "i NOT BETWEEN 1 AND 2", "s LIKE 'a%'", "s NOT LIKE '%b'",
    "a RLIKE '^a'", "'lit'", "1", "-1", "3000000000", "true",
    "CASE WHEN i = 1 THEN 'a' END", "CASE WHEN i = 1 THEN 'a' ELSE 'b' END",
    "CASE i WHEN 2 THEN 'a' ELSE 'b' END", "IF(i = 1, 1, 2)", "coalesce(l, i)",
    "nullif(i, 2)", "nvl2(l, 1, 2)", "lower(a)", "ucase(a)", "length(s)",
    "trim(s)", "ltrim(s)", "rtrim(s)", "substr(s, 1, 2)", "substr(s, 2)",
    "concat(s, 'x')", "concat_ws('-', s, u)", "replace(s, 'a', 'b')", "lpad(s, 3, 'x')",
    "rpad(s, 3)", "instr(s, 'a')", "startswith(s, 'a')", "endswith(s, u)", "contains(s, '')",
    "abs(i)", "ceil(x)", "floor(x)", "sign(x)", "sqrt(i)", "least(i, 2)",
    "greatest(i, l)", "abs(-i)", "- -1", "k - (1 + 2)", "i * -1", "char_length(u)",
    "ceiling(y)", "substring(u, 2)", "nvl(l, 0)", "ifnull(i, 0)", "mod(i, 3)", "signum(y)",
    "lcase(trim(a))", "trim(LEADING FROM u)", "instr(u, s)", "'it''s'", "'a' 'b'",
]
NAMES_GROUPED = [
    "count(*)", "count(s)", "count(DISTINCT s)", "sum(i)", "sum(DISTINCT i)",
    "avg(x + 1)", "mean(i)", "min(s)", "max(upper(a))", "count_if(i > 1)",
    "sum(i) FILTER (WHERE i > 1)", "count(*) FILTER (WHERE x > 0)",
    "count(CASE WHEN i > 1 THEN 1 END)", "every(x > 0)", "some(i > 0)", "bool_and(x > 0)",
    "bool_or(x > 0)", "sum(k * 2)",
]
# Each function of this family and a statement above exercising it.
COVERED = {
    "case": "CASE WHEN x > y THEN s ELSE u END", "if": "IF(x > 0, i, l)",
    "coalesce": "coalesce(x, y, i)", "nullif": "nullif(s, u)", "nvl2": "nvl2(s, x, y)",
    "count_if": "count_if(x > y)", "FILTER (WHERE ...)": "sum(i) FILTER (WHERE x > 0)",
    "count": "count(DISTINCT s)", "sum": "sum(i)", "avg": "avg(i)", "min": "min(s)",
    "max": "max(x)",
    "bool_and": "bool_and(s IS NULL)", "bool_or": "bool_or(x < y)",
    "OVER (PARTITION BY ... ORDER BY ... frame)": "sum(i) OVER (PARTITION BY k % 3)",
    "ROWS / RANGE BETWEEN": "count(s) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND 1 "
                            "FOLLOWING)",
    "QUALIFY": "QUALIFY", "row_number": "row_number() OVER (ORDER BY k)",
    "rank": "rank() OVER (ORDER BY i)",
    "dense_rank": "dense_rank() OVER (PARTITION BY k % 2 ORDER BY s DESC)",
    "lag": "lag(s) OVER (ORDER BY k)",
    "lead": "lead(x + 0, 2) OVER (PARTITION BY k % 2 ORDER BY k)",
    "first_value": "first_value(s) OVER (ORDER BY k)",
    "last_value": "last_value(x + 0) OVER (PARTITION BY k % 3 ORDER BY k)",
}
STATEMENTS = AGGREGATES + CONDITIONALS + WINDOWS + NAMES + NAMES_GROUPED + ["QUALIFY"]


def _grouped(exprs: list[str], table: str) -> str:
    cols = ", ".join(f"{e} AS c{n}" for n, e in enumerate(exprs))
    return f"SELECT k % 4 AS g, {cols} FROM {table} GROUP BY k % 4 ORDER BY g"


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_aggregates_conditionals_windows_and_names_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    both(fdb, _grouped(AGGREGATES, name))
    both(fdb, f"SELECT {', '.join(AGGREGATES)} FROM {name}")
    both(fdb, _select(CONDITIONALS, name))
    both(fdb, _select(WINDOWS, name))
    both(fdb, f"SELECT k, s FROM {name} QUALIFY row_number() OVER (PARTITION BY k % 3 "
              "ORDER BY k DESC) <= 2 ORDER BY k")
    both(fdb, f"SELECT * FROM (SELECT k, x, rank() OVER (ORDER BY i) AS r FROM {name}) "
              "WHERE r <= 5 ORDER BY k")
    both(fdb, f"SELECT {', '.join(NAMES)} FROM {name} ORDER BY k")
    both(fdb, f"SELECT {', '.join(NAMES_GROUPED)} FROM {name}")


@pytest.fixture(scope="module")
def wide(fdb):
    fdb.create_table("wide", [Column("k", LONG), Column("s", STRING), Column("x", REAL)])
    fdb.ingest_ndjson("wide", ndjson(rows_at(0, 3, k=lambda n: n, s="a",
                                             x=lambda n: [1.5, -0.0, 3.0][n])))
    return fdb


EDGES = [  # (statement, why the embedded engine hands it to Spark at run time)
    ("SELECT k, lead(x) OVER (ORDER BY k) AS v FROM wide", "a -0.0 in a window"),
    ("SELECT k, min(x) OVER (PARTITION BY s) AS v FROM wide", "a -0.0 in a window"),
]


@pytest.mark.parametrize("sql,why", EDGES)
def test_values_the_embedded_engine_would_answer_differently_go_to_spark(wide, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        wide.sql(sql, engine="local")
    auto = wide.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    assert auto.table.equals(wide.sql(sql, engine="spark").table)


REFUSED = [  # (statement, what the reason names): Spark's to answer (or to refuse)
    ("SELECT CASE WHEN k = 1 THEN CAST(k AS STRING) ELSE 1 END AS v FROM wide",
     "mixes number, string"),
    ("SELECT sum(x) OVER (ORDER BY k) AS v FROM wide", "over a window (only of integers)"),
    ("SELECT count(DISTINCT s, k) AS v FROM wide", "several columns"),
    ("SELECT collect_list(s) AS v FROM wide", "without sort_array()"),
    ("SELECT percentile_approx(x, array(0.5, 0.9)) AS v FROM wide", "array of percentages"),
    ("SELECT k, rank() OVER (ORDER BY k) FROM wide", "unaliased expression"),
    ("SELECT ntile(2) OVER (ORDER BY k) AS v FROM wide", "window function"),
]


@pytest.mark.parametrize("sql,why", REFUSED)
def test_forms_left_to_spark_are_answered_there(wide, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        wide.sql(sql, engine="local")
    auto = wide.sql(sql)
    assert auto.stats.engine == "spark"
    assert auto.table.equals(wide.sql(sql, engine="spark").table)


def test_ranking_without_order_is_refused_by_spark_not_answered_locally(wide):
    """Spark refuses row_number() over an unordered window; the embedded engine must not
    answer what Spark refuses."""
    sql = "SELECT row_number() OVER (PARTITION BY s) AS v FROM wide"
    with pytest.raises(Exception, match="without ORDER BY"):
        wide.sql(sql, engine="local")
    with pytest.raises(Exception):      # noqa: B017 - Spark's analysis error, whatever class
        wide.sql(sql)
