"""What the KQL front end's translations need beyond the other families, against Spark:
`percentile_approx` of integers (KQL's percentile and percentiles), whose answer here is the
value at rank ceil(p * n): Spark's while a group holds at most half the accuracy.

Generated rows (the shared strategies of `test_functions_differential`: nulls, integers near
their limits) go into one table per example; each statement computes many percentiles on
both engines and the answers must match in names, Arrow types and every value.

Also the translations of `arg_max`/`arg_min` and `top-nested`, over rows with many ties (the
maximized value and the ranked aggregation take few values): both engines must pick the
same rows.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings

from shoal.types import LONG, REAL, Column
from tests.query.conftest import ndjson, rows_at
from tests.query.test_functions_differential import _table, both, fdb, rows_st

__all__ = ["fdb"]       # the shared module's client fixture, used here too

pytestmark = pytest.mark.spark

PERCENTILES = [
    "percentile_approx(i, 0.5, 1000000)", "percentile_approx(l, 0.0, 1000000)",
    "percentile_approx(l, 1.0, 1000000)", "percentile_approx(i, 0.0000001, 1000000)",
    "percentile_approx(l, 0.01, 1000000)", "percentile_approx(i, 0.333, 1000000)",
    "percentile_approx(l, 0.999999, 1000000)", "percentile_approx(i, 0.9)",
    "approx_percentile(l, 0.25, 100)", "percentile_approx(k, 0.75, 1000)",
    "percentile_approx(i, 0, 1000000)", "percentile_approx(l, 1)",
]
# Each function of this family and a statement above exercising it.
COVERED = {"percentile_approx": "percentile_approx(i, 0.5, 1000000)"}


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_percentiles_of_integers_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    cols = ", ".join(f"{e} AS c{n}" for n, e in enumerate(PERCENTILES))
    both(fdb, f"SELECT k % 3 AS g, {cols} FROM {name} GROUP BY k % 3 ORDER BY g")
    both(fdb, f"SELECT {cols} FROM {name}")
    both(fdb, f"SELECT {cols} FROM {name} WHERE k < 0")          # no rows: NULLs
    both(fdb, f"SELECT {cols} FROM {name} WHERE i IS NULL")      # only NULLs


KQL_PICKS = [
    "{t} | summarize arg_max(iff(x > 0, 1, 0), s, u) by g = i % 3 | sort by g asc",
    "{t} | summarize n = count(), arg_min(iff(l > 0, 'p', 'n'), *) by g = i % 2 "
    "| project g, n, s, u, a, x, l | sort by g asc",
    "{t} | summarize arg_min(x, a, y) | project a, y",
    "{t} | top-nested 2 of g = i % 4 with others = -1 by n = count(), "
    "top-nested 1 of a by m = max(l % 5) | sort by g asc, n asc, a asc, m asc",
]


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_kql_picks_and_tops_of_ties_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    for kql in KQL_PICKS:
        both(fdb, fdb.query_engine.translate_kql(kql.format(t=name)).sql)


def test_kql_picks_and_tops_keep_a_negative_zero(fdb):
    # -0.0 and 0.0 sort as equals in both engines; the value picked comes back as stored.
    fdb.create_table("zeros", [Column("k", LONG), Column("x", REAL)])
    fdb.ingest_ndjson("zeros", ndjson(rows_at(0, 6, k=lambda n: n % 2,
                                              x=lambda n: [-0.0, 2.0, -0.0, 0.5, 3.0, -1.0][n])))
    for kql in ("zeros | summarize arg_min(k, x) by g = k | sort by g asc",
                "zeros | where x > -1 | summarize arg_min(x, *) | project x, k",
                "zeros | summarize arg_max(x, k) by x2 = x * 2 | sort by x2 asc",
                "zeros | top-nested of k by a = min(x) | sort by k asc"):
        both(fdb, fdb.query_engine.translate_kql(kql).sql)


@pytest.fixture(scope="module")
def hundred(fdb):
    fdb.create_table("hundred", [Column("k", LONG), Column("x", REAL)])
    fdb.ingest_ndjson("hundred", ndjson(rows_at(0, 100, k=lambda n: (n * 37) % 100,
                                                x=lambda n: n / 3)))
    return fdb


def test_a_group_beyond_half_the_accuracy_is_answered_by_its_exact_rank(hundred):
    """At half the accuracy Spark's summary is still exact; beyond, Spark estimates (within
    ceil(n / accuracy) ranks) and the embedded engine answers the exact rank."""
    both(hundred, "SELECT percentile_approx(k, 0.5, 200) AS a, percentile_approx(k, 0.5, 201) "
                  "AS b FROM hundred")
    sql = "SELECT percentile_approx(k, 0.5, 100) AS a, percentile_approx(k, 0.9, 20) AS b " \
          "FROM hundred"
    local = hundred.sql(sql, engine="local")
    assert local.stats.engine == "local"
    assert local.table.to_pylist() == [{"a": 49, "b": 89}]       # ranks 50 and 90 of 0..99
    spark = hundred.sql(sql, engine="spark").table.to_pylist()[0]
    assert abs(spark["a"] - 49) <= 1 and abs(spark["b"] - 89) <= 5


REFUSED = [  # (statement, what the reason names): Spark's to answer
    ("SELECT percentile_approx(k, array(0.5, 0.9), 1000000) AS v FROM hundred",
     "array of percentages"),
    ("SELECT percentile_approx(k, 0.5, 100 * 10) AS v FROM hundred", "integer literal"),
]


@pytest.mark.parametrize("sql,why", REFUSED)
def test_other_percentile_forms_are_answered_by_spark(hundred, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        hundred.sql(sql, engine="local")
    auto = hundred.sql(sql)
    assert auto.stats.engine == "spark"
    assert auto.table.equals(hundred.sql(sql, engine="spark").table)
