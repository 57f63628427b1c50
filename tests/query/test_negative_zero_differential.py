"""-0.0, 0.0 and NaN as sort, grouping, DISTINCT, window and join keys answer on the embedded
engine exactly as on Spark: a sorted or windowed double comes back as stored (-0.0 keeps its
sign), a grouped or DISTINCT one as Spark normalizes it (0.0), and joins on doubles, which
the embedded engine's hash join would get wrong, go to Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.types import LONG, REAL, Column
from tests.query.test_functions_differential import both, fdb  # noqa: F401

pytestmark = pytest.mark.spark

XS = [-0.0, 0.0, 1.5, float("nan"), None, -0.0, 2.0, float("nan"), -1.0]
US = [0.0, -0.0, float("nan"), 2.0]

LOCAL = [
    "SELECT x, k FROM zt ORDER BY x, k",
    "SELECT x, k FROM zt ORDER BY x DESC, k",
    "SELECT x, k FROM zt ORDER BY 1, 2",
    "SELECT x AS y, k FROM zt ORDER BY y, k",
    "SELECT x, k FROM zt ORDER BY x, k LIMIT 3",
    "SELECT x, k FROM zt ORDER BY x DESC, k LIMIT 6",
    "SELECT x, count(*) AS n FROM zt GROUP BY x ORDER BY n, x",
    "SELECT x, count(*) AS n FROM zt GROUP BY 1 ORDER BY 1",
    "SELECT x AS y, max(k) AS m FROM zt GROUP BY x ORDER BY m",
    "SELECT x * 2 AS d, count(*) AS n FROM zt GROUP BY x * 2 ORDER BY n, d",
    "SELECT DISTINCT x FROM zt ORDER BY x",
    "SELECT DISTINCT x AS y FROM zt ORDER BY y DESC",
    "SELECT x, k, row_number() OVER (ORDER BY x, k) AS r FROM zt ORDER BY k",
    "SELECT x, k, row_number() OVER (PARTITION BY x ORDER BY k) AS r FROM zt ORDER BY k",
    "SELECT x, k, count(*) OVER (PARTITION BY x) AS c FROM zt ORDER BY k",
]
TO_SPARK = [
    "SELECT zt.x, zu.x AS ux, k, j FROM zt JOIN zu ON zt.x = zu.x ORDER BY k, j",
    "SELECT x, k, j FROM zt JOIN zu USING (x) ORDER BY k, j",
    "SELECT zu.x, k, j FROM zt LEFT JOIN zu USING (x) ORDER BY k, j",
    "SELECT k, x FROM zt WHERE x IN (SELECT x FROM zu) ORDER BY k",
    "SELECT x FROM zt UNION ALL SELECT x FROM zu ORDER BY x",
]


@pytest.fixture(scope="module")
def zeros(fdb):  # noqa: F811
    fdb.create_table("zt", [Column("k", LONG), Column("x", REAL)])
    fdb.ingest_arrow("zt", pa.table({"k": pa.array(range(len(XS)), pa.int64()),
                                     "x": pa.array(XS, pa.float64())}))
    fdb.create_table("zu", [Column("j", LONG), Column("x", REAL)])
    fdb.ingest_arrow("zu", pa.table({"j": pa.array(range(len(US)), pa.int64()),
                                     "x": pa.array(US, pa.float64())}))
    return fdb


@pytest.mark.parametrize("sql", LOCAL)
def test_double_keys_answer_as_spark_does(zeros, sql):
    both(zeros, sql)


def test_sorted_doubles_keep_their_sign_and_grouped_ones_are_normalized(zeros):
    sorted_ = both(zeros, "SELECT x, k FROM zt ORDER BY x, k").column("x").to_pylist()
    assert [repr(v) for v in sorted_[2:5]] == ["-0.0", "0.0", "-0.0"]
    grouped = both(zeros, "SELECT DISTINCT x FROM zt ORDER BY x").column("x").to_pylist()
    assert [repr(v) for v in grouped[1:3]] == ["-1.0", "0.0"]


@pytest.mark.parametrize("sql", TO_SPARK)
def test_joins_on_doubles_go_to_spark(zeros, sql):
    auto = zeros.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    spark = zeros.sql(sql, engine="spark")
    assert [repr(r) for r in auto.table.to_pylist()] == [repr(r) for r in
                                                         spark.table.to_pylist()]
