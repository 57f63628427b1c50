"""Collected arrays (sorted, sized, searched, joined), max_by / min_by and first / last /
any_value answer on the embedded engine exactly as on Spark, or go to Spark.

Generated rows (the shared strategies of `test_functions_differential`: nulls, edge text
beyond the BMP, -0.0, integers near their limits) go into one table per example; each
statement runs on Spark and on the embedded engine, whole and grouped. Where the answer is
not defined by the rows (a tie of max_by's ordering value, first() over differing values,
a -0.0 in a sorted collect_list) the embedded engine hands the statement to Spark, and
`auto` answers as Spark does. The bare collects, whose order is not defined, are Spark's.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from shoal.query.embedded.local_engine import LocalMismatchError
from shoal.types import LONG, REAL, STRING, Column
from tests.query.conftest import ndjson, rows_at
from tests.query.test_functions_differential import _same, _table, both, fdb, rows_st

__all__ = ["fdb"]       # the shared module's client fixture, used here too

pytestmark = pytest.mark.spark

ARRAYS = [
    "sort_array(collect_set(s))", "sort_array(collect_list(s))",
    "sort_array(collect_list(u), false)", "sort_array(collect_set(x))",
    "sort_array(collect_list(x + 0))", "sort_array(collect_set(x), false)",
    "sort_array(collect_list(i), false)", "sort_array(collect_set(l))",
    "sort_array(collect_set(x > 0))", "array_sort(collect_list(a))",
    "size(collect_set(x))", "size(collect_list(s))", "size(collect_set(u))",
    "size(sort_array(collect_list(l)))",
    "array_join(sort_array(collect_set(a)), ',')", "array_join(sort_array(collect_list(i)), '|')",
    "array_join(sort_array(collect_set(s), false), '')",
    "array_contains(collect_set(i), 7)", "array_contains(collect_list(s), 'abc')",
    "array_contains(collect_set(x), 4)", "array_contains(sort_array(collect_set(l)), 3)",
]
BY = [  # ordered by the unique k, or with NULL values and NULL ordering values
    "max_by(s, k)", "min_by(x, k)", "max_by(i, -k)", "min_by(u, k * 2)",
    "max_by(CASE WHEN k % 3 = 0 THEN NULL ELSE s END, k)",
    "max_by(s, CASE WHEN k % 2 = 0 THEN k END)", "min_by(l, IF(k > 5, k, NULL))",
    "max_by(s, CASE WHEN k < 0 THEN k END)",
]
TIED = ["max_by(s, x)", "min_by(i, l)", "max_by(k, s)", "min_by(s, i)"]
PICKS = [  # every row of a group alike, all NULL, or NULLs skipped
    "first(k % 4)", "last(IF(k % 4 = 1, NULL, k % 4))", "any_value(IF(k % 4 = 2, NULL, 'svc'))",
    "first(IF(k % 8 < 4, NULL, k % 4), true)", "last(IF(k % 8 < 4, NULL, 'v'), true)",
    "any_value(IF(k % 8 < 4, NULL, k % 4)) IGNORE NULLS",
]
DIFFERING = ["first(s)", "last(x)", "any_value(i)", "first(IF(k % 8 < 4, NULL, k % 4))"]

COVERED = {
    "collect_list": "sort_array(collect_list(s))", "collect_set": "sort_array(collect_set(s))",
    "sort_array": "sort_array(collect_list(u), false)", "size": "size(collect_set(x))",
    "array_contains": "array_contains(collect_set(i), 7)",
    "array_join": "array_join(sort_array(collect_set(a)), ',')",
    "max_by": "max_by(s, k)", "min_by": "min_by(x, k)", "first": "first(k % 4)",
    "last": "last(IF(k % 4 = 1, NULL, k % 4))",
    "any_value": "any_value(IF(k % 4 = 2, NULL, 'svc'))",
    "IGNORE NULLS": "any_value(IF(k % 8 < 4, NULL, k % 4)) IGNORE NULLS",
}


def _whole(exprs: list[str], table: str) -> str:
    return "SELECT " + ", ".join(f"{e} AS c{n}" for n, e in enumerate(exprs)) + f" FROM {table}"


def _grouped(exprs: list[str], table: str) -> str:
    cols = ", ".join(f"{e} AS c{n}" for n, e in enumerate(exprs))
    return f"SELECT k % 4 AS g, {cols} FROM {table} GROUP BY k % 4 ORDER BY g"


def agree(db, sql: str) -> str:
    """The engine `auto` chose for `sql`; its answer is Spark's, and where the embedded
    engine answered, it answered as Spark does."""
    spark = db.sql(sql, engine="spark").table
    auto = db.sql(sql)
    _same(spark, auto.table, sql)
    if auto.stats.engine == "spark":
        with pytest.raises(LocalMismatchError):
            db.sql(sql, engine="local")
        assert "would not render as Spark does" in auto.stats.engine_reason
    return auto.stats.engine


@settings(max_examples=2, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_collects_and_picks_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    for sql in (_whole(ARRAYS + BY, name), _grouped(ARRAYS, name), _grouped(BY + PICKS, name)):
        both(fdb, sql)
    both(fdb, f"SELECT k % 4 AS g, {', '.join(ARRAYS[:3] + BY[:2] + ['first(k % 4)'])} "
              f"FROM {name} GROUP BY k % 4 ORDER BY g")     # Spark's names of unaliased calls
    agree(fdb, _grouped(TIED + DIFFERING, name))


@pytest.fixture(scope="module")
def edge(fdb):
    fdb.create_table("cedge", [Column("k", LONG), Column("s", STRING), Column("x", REAL)])
    fdb.ingest_ndjson("cedge", ndjson(rows_at(0, 6, k=lambda n: n,
                                              s=lambda n: ["b", "a", None, "😀", "\uffff",
                                                           "é"][n],
                                              x=lambda n: [-0.0, 0.0, None, 2.0, 2.0,
                                                           1.0][n])))
    return fdb


def test_values_spark_defines_answer_locally(edge):
    """Spark's collect_set keeps 0.0 for -0.0; strings sort by their UTF-8 bytes; an
    empty group collects an empty array; max_by keeps a NULL value of its extreme row."""
    got = both(edge, "SELECT sort_array(collect_set(x)) AS a, sort_array(collect_set(s)) AS b, "
                     "size(collect_set(x)) AS c, max_by(s, k) AS d, min_by(s, k) AS e, "
                     "max_by(x, CASE WHEN k = 2 THEN 9 END) AS f FROM cedge")
    assert got.to_pylist() == [{"a": [0.0, 1.0, 2.0], "b": ["a", "b", "é", "\uffff", "😀"],
                                "c": 3, "d": "é", "e": "b", "f": None}]
    assert got.schema.field("a").type == pa.list_(pa.field("element", pa.float64(),
                                                           nullable=False))
    empty = both(edge, "SELECT sort_array(collect_list(s)) AS a, size(collect_set(x)) AS b, "
                       "array_join(sort_array(collect_set(s)), ',') AS c, "
                       "array_contains(collect_set(s), 'a') AS d, max_by(s, k) AS e, "
                       "first(s) AS f FROM cedge WHERE k > 100")
    assert empty.to_pylist() == [{"a": [], "b": 0, "c": "", "d": False, "e": None, "f": None}]


HANDED = [  # (statement, why the embedded engine hands it to Spark at run time)
    ("SELECT sort_array(collect_list(x)) AS a FROM cedge", "a -0.0 in a sorted collect_list"),
    ("SELECT max_by(s, x) AS a FROM cedge", "a tie of the ordering value of max_by"),
    ("SELECT min_by(s, x) AS a FROM cedge WHERE k < 2", "a tie of the ordering value of min_by"),
    ("SELECT first(s) AS a FROM cedge", "first() over differing values"),
    ("SELECT last(x) AS a FROM cedge WHERE k < 2", "last() over differing values"),
    ("SELECT any_value(s) AS a FROM cedge WHERE k IN (0, 2)", "any_value() over differing"),
]


@pytest.mark.parametrize("sql,why", HANDED)
def test_undefined_answers_go_to_spark(edge, sql, why):
    with pytest.raises(LocalMismatchError, match=re.escape(why)):
        edge.sql(sql, engine="local")
    auto = edge.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    assert auto.table.equals(edge.sql(sql, engine="spark").table)


REFUSED = [  # (statement, what the reason names): Spark's to answer
    ("SELECT collect_list(s) AS a FROM cedge", "collect_list() without sort_array()"),
    ("SELECT collect_set(x) AS a FROM cedge", "collect_set() without sort_array()"),
    ("SELECT array_agg(s) AS a FROM cedge", "collect_list() without sort_array()"),
    ("SELECT array_join(sort_array(collect_set(x)), ',') AS a FROM cedge", "of doubles"),
    ("SELECT max_by(s, k, 2) AS a FROM cedge", "with a count"),
    ("SELECT first(s) OVER (ORDER BY k) AS a FROM cedge", "window function"),
]


@pytest.mark.parametrize("sql,why", REFUSED)
def test_forms_left_to_spark_are_answered_there(edge, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        edge.sql(sql, engine="local")
    auto = edge.sql(sql)
    assert auto.stats.engine == "spark"
    assert why in auto.stats.engine_reason
    assert auto.table.equals(edge.sql(sql, engine="spark").table)


def test_first_of_the_grouped_column_is_local(edge):
    """A dashboard's `first(service)` beside GROUP BY service: one value per group."""
    sql = "SELECT s, first(s) AS f, count(*) AS n FROM cedge GROUP BY s ORDER BY s"
    auto = edge.sql(sql)
    assert auto.stats.engine == "local", auto.stats.engine_reason
    _same(edge.sql(sql, engine="spark").table, auto.table, sql)
