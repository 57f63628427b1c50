"""The statistical aggregates on the embedded engine against Spark, each by its rule
(`shoal.query.embedded.functions.statistics`):

- percentile and median: Spark's answer bit for bit, over generated rows (halves, -0.0,
  integers near their limits, huge values) and over rows with NaN, infinities and both
  zeros;
- percentile_approx: Spark's answer while a group holds at most half the accuracy; over a
  larger group Spark's answer is within ceil(n / accuracy) ranks of the exact one;
- approx_count_distinct: the exact count; Spark's estimate lies within three times its
  relative error of it;
- the variances and standard deviations: Spark's own last bits depend on its partitions,
  so they are compared to a tolerance (`assert_moments_agree`: 1e-12 of the group's mean
  square), and the special cases (no value, one value, NaN or infinity, all values equal)
  exactly.

Also: grouped statements and FILTER (WHERE ...) on each of them stay on the embedded engine.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shoal.types import INT, LONG, REAL, STRING, Column
from tests.query.test_functions_differential import _same, _table, both, fdb, rows_st

__all__ = ["fdb"]       # the shared module's client fixture, used here too

pytestmark = pytest.mark.spark

# No shrinking: each example costs Spark seconds, and a failure names its rows already.
SETTINGS = settings(max_examples=3, deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])

PERCENTILES = [
    "percentile(x, 0.5)", "percentile(y, 0.95)", "percentile(x, 0)", "percentile(y, 1)",
    "percentile(x, 0.333)", "percentile(i, 0.25)", "percentile(l, 0.9)", "percentile(k, 0.1)",
    "median(x)", "median(i)", "median(l)",
    "percentile_approx(x, 0.5)", "percentile_approx(y, 0.95, 100)", "approx_percentile(x, 0)",
    "percentile_approx(x, 1.0)", "percentile_approx(i, 0.9)", "percentile_approx(l, 0.01)",
    "percentile(x, 0.75) FILTER (WHERE i > 0)", "median(l) FILTER (WHERE x > y)",
    "percentile_approx(y, 0.5) FILTER (WHERE s IS NOT NULL)",
]
DISTINCT_COUNTS = ["approx_count_distinct(u)", "approx_count_distinct(s, 0.01)",
                   "approx_count_distinct(u, 0.1)",
                   "approx_count_distinct(s) FILTER (WHERE g = 1)"]
MOMENTS = [
    "stddev(x)", "std(y)", "stddev_samp(i)", "stddev_pop(l)", "variance(x)", "var_samp(l)",
    "var_pop(y)", "stddev_pop(i)", "variance(k)", "stddev(x) FILTER (WHERE i > 0)",
    "var_pop(l) FILTER (WHERE x > y)",
]
# Each function of this family and a statement above exercising it.
COVERED = {
    "percentile": "percentile(x, 0.5)", "median": "median(x)",
    "percentile_approx": "percentile_approx(x, 0.5)",
    "approx_count_distinct": "approx_count_distinct(u)", "stddev": "stddev(x)",
    "stddev_samp": "stddev_samp(i)", "stddev_pop": "stddev_pop(l)", "variance": "variance(x)",
    "var_pop": "var_pop(y)",
}
STATEMENTS = PERCENTILES + MOMENTS + DISTINCT_COUNTS
TOLERANCE = 1e-12


def _cols(exprs: list[str]) -> str:
    return ", ".join(f"{e} AS c{n}" for n, e in enumerate(exprs))


def _grouped(exprs: list[str], table: str) -> str:
    return f"SELECT k % 3 AS g, {_cols(exprs)} FROM {table} GROUP BY k % 3 ORDER BY g"


@SETTINGS
@given(rows=rows_st)
def test_percentiles_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    both(fdb, _grouped(PERCENTILES, name))
    both(fdb, f"SELECT {_cols(PERCENTILES)} FROM {name}")
    both(fdb, f"SELECT {_cols(PERCENTILES)} FROM {name} WHERE k < 0")      # no rows
    both(fdb, f"SELECT {_cols(PERCENTILES)} FROM {name} WHERE x IS NULL")  # only NULLs


# ---- the variances: a tolerance ----------------------------------------------------------------
def assert_moments_agree(spark: pa.Table, local: pa.Table, groups: list[list[float]],
                         exprs: list[str], sql: str) -> None:
    """Names and types as Spark's; each value Spark's exactly where Spark's answer is NULL or
    NaN or the group's values are all equal, else within `TOLERANCE` of the group's mean
    square (a variance; a standard deviation is compared squared). Spark merges its
    partitions' running sums in an order of its own, so its last bits are not one answer
    (one and four partitions of the same rows differ in the 14th digit)."""
    assert local.schema.names == spark.schema.names, sql
    assert [f.type for f in local.schema] == [f.type for f in spark.schema], sql
    assert spark.num_rows == local.num_rows == len(groups), sql
    for n, e in enumerate(exprs):
        squared = e.startswith("std")
        for row, (a, b) in enumerate(zip(spark.column(f"c{n}").to_pylist(),
                                         local.column(f"c{n}").to_pylist(), strict=True)):
            values = groups[row]
            what = f"{sql}: {e} in group {row}: Spark {a!r}, embedded engine {b!r}"
            if a is None or b is None or math.isnan(a) or math.isnan(b):
                assert repr(a) == repr(b), what
                continue
            if len(set(values)) == 1:
                assert repr(a) == repr(b) == "0.0", what
                continue
            mean_square = sum(v * v for v in values) / len(values)
            x, y = (a * a, b * b) if squared else (a, b)
            assert abs(x - y) <= TOLERANCE * mean_square, what


def _values(rows: list[dict], column: str, keep=lambda r: True) -> list[float]:
    out = []
    for k, r in enumerate(rows):
        v = k if column == "k" else r[column]
        if v is not None and keep({**r, "k": k}):
            out.append(float(v))
    return out


def _moment_groups(rows: list[dict], e: str, group: Callable[[dict], bool]) -> list[float]:
    column = re.search(r"\((\w)\)", e)[1]
    keep = {"stddev(x) FILTER (WHERE i > 0)": lambda r: r["i"] is not None and r["i"] > 0,
            "var_pop(l) FILTER (WHERE x > y)": lambda r: None not in (r["x"], r["y"])
            and r["x"] > r["y"]}.get(e, lambda r: True)
    return _values(rows, column, lambda r: keep(r) and group(r))


def _moments_both(db, rows: list[dict], sql: str,
                  groups: list[Callable[[dict], bool]]) -> None:
    """`sql` (MOMENTS as c0, c1, ..; a row per group of `groups`) on both engines, each
    expression compared over its own groups of values."""
    s = db.sql(sql, engine="spark")
    loc = db.sql(sql, engine="local")
    assert s.stats.engine == "spark" and loc.stats.engine == "local"
    for n, e in enumerate(MOMENTS):
        assert_moments_agree(pa.table({"c0": s.table.column(f"c{n}")}),
                             pa.table({"c0": loc.table.column(f"c{n}")}),
                             [_moment_groups(rows, e, g) for g in groups], [e], sql)


@SETTINGS
@given(rows=rows_st)
def test_variances_agree_with_spark_to_the_stated_tolerance(fdb, rows):
    name = _table(fdb, rows)
    _moments_both(fdb, rows, f"SELECT {_cols(MOMENTS)} FROM {name} GROUP BY k % 3 "
                             "ORDER BY k % 3", [lambda r, g=g: r["k"] % 3 == g for g in range(3)])
    _moments_both(fdb, rows, f"SELECT {_cols(MOMENTS)} FROM {name}", [lambda r: True])
    _moments_both(fdb, rows, f"SELECT {_cols(MOMENTS)} FROM {name} WHERE k IN (0, 1, 2)",
                  [lambda r: r["k"] < 3])                                   # few rows
    both(fdb, f"SELECT {_cols(MOMENTS)} FROM {name} WHERE k < 0")           # NULLs
    both(fdb, f"SELECT {_cols(MOMENTS)} FROM {name} WHERE k = 3")           # one row


# ---- NaN, infinities, both zeros ----------------------------------------------------------------
SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 0.0, 0.5, -2.5, 1e308, -1e308, 3.0, 3.0]
special_st = st.one_of(st.none(), st.sampled_from(SPECIAL), st.floats(width=64))
moderate_st = st.one_of(st.none(), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0,
                                                    7.0, 7.0, 2.5]),
                        st.floats(min_value=-1e15, max_value=1e15))
special_rows_st = st.lists(st.tuples(special_st, moderate_st), min_size=1, max_size=30)
_specials = itertools.count()


def _arrow_table(db, columns: dict[str, pa.Array]) -> str:
    """A table of the given columns (NaN and infinities included: NDJSON cannot carry them)."""
    name = f"st{next(_specials)}"
    db.create_table(name, [Column(c, {pa.float64(): REAL, pa.int64(): LONG,
                                      pa.int32(): INT, pa.string(): STRING}[a.type])
                           for c, a in columns.items()])
    db.ingest_arrow(name, pa.table(columns))
    return name


SPECIAL_PERCENTILES = [
    "percentile(x, 0.5)", "percentile(x, 0.1)", "percentile(x, 0.9)", "percentile(x, 1)",
    "percentile(x, 0)", "median(y)", "percentile(y, 0.25)",
]
# Over a NaN these go to Spark (where Spark's summary places a NaN depends on row order).
SPECIAL_APPROX = ["percentile_approx(x, 0.5)", "percentile_approx(x, 0.99)",
                  "percentile_approx(y, 0)", "percentile_approx(y, 1)"]
SPECIAL_MOMENTS = ["stddev(y)", "stddev_pop(y)", "variance(y)", "var_pop(y)"]


@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=special_rows_st)
def test_nan_infinity_and_both_zeros_answer_as_spark_does(fdb, rows):
    name = _arrow_table(fdb, {"k": pa.array(range(len(rows)), pa.int64()),
                              "x": pa.array([r[0] for r in rows], pa.float64()),
                              "y": pa.array([r[1] for r in rows], pa.float64())})
    both(fdb, _grouped(SPECIAL_PERCENTILES, name))
    both(fdb, f"SELECT {_cols(SPECIAL_PERCENTILES)} FROM {name}")
    for column in ("x", "y"):
        exprs = [e for e in SPECIAL_APPROX if f"({column}," in e]
        sql = f"SELECT {_cols(exprs)} FROM {name}"
        values = [r[0 if column == "x" else 1] for r in rows]
        if any(v is not None and math.isnan(v) for v in values):
            with pytest.raises(Exception, match="over a NaN"):
                fdb.sql(sql, engine="local")
            auto = fdb.sql(sql)
            assert auto.stats.engine == "spark", auto.stats.engine_reason
            _same(fdb.sql(sql, engine="spark").table, auto.table, sql)
        else:
            both(fdb, sql)
    sql = f"SELECT {_cols(SPECIAL_MOMENTS)} FROM {name}"
    s, loc = fdb.sql(sql, engine="spark"), fdb.sql(sql, engine="local")
    ys = [r[1] for r in rows if r[1] is not None]
    for n, e in enumerate(SPECIAL_MOMENTS):
        assert_moments_agree(pa.table({"c0": s.table.column(f"c{n}")}),
                             pa.table({"c0": loc.table.column(f"c{n}")}),
                             [ys], [e], sql)


@pytest.mark.parametrize("values,answers", [
    # (values of x, Spark's answers of percentile 0.5 / 0.25 / median / percentile_approx 0.5)
    ([0.0, -0.0], ["-0.0", "-0.0", "-0.0", "-0.0"]),
    ([1.0, math.nan, math.inf], ["inf", "inf", "inf", None]),
    ([-math.inf, 1.0, math.inf], ["1.0", "nan", "1.0", "1.0"]),
    ([math.inf, math.inf], ["inf", "inf", "inf", "inf"]),
    ([None, 1.0, 2.0], ["1.5", "1.25", "1.5", "1.0"]),
])
def test_known_spark_answers_of_percentiles(fdb, values, answers):
    """Answers read off Spark: -0.0 sorts before 0.0 and an interpolation between equal
    values is that value; NaN sorts above +inf."""
    name = _arrow_table(fdb, {"x": pa.array(values, pa.float64())})
    got = both(fdb, f"SELECT percentile(x, 0.5) AS a, percentile(x, 0.25) AS b, median(x) AS c "
                    f"FROM {name}")
    assert [repr(v) for v in got.to_pylist()[0].values()] == answers[:3]
    if answers[3] is not None:      # (over a NaN percentile_approx is Spark's)
        got = both(fdb, f"SELECT percentile_approx(x, 0.5) AS d FROM {name}")
        assert repr(got.column("d")[0].as_py()) == answers[3]


# ---- percentile_approx beyond Spark's exact summary ---------------------------------------------
def _doubles(db, n: int, seed: int) -> tuple[str, list[float]]:
    rng = random.Random(seed)
    values = [round(rng.lognormvariate(3, 1.5), 3) for _ in range(n)]     # duplicates too
    return _arrow_table(db, {"x": pa.array(values, pa.float64())}), sorted(values)


QUANTILES = [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]


def test_percentile_approx_is_spark_answer_up_to_half_the_accuracy(fdb):
    name, _ = _doubles(fdb, 5000, seed=1)       # half the default accuracy
    both(fdb, f"SELECT {_cols([f'percentile_approx(x, {p})' for p in QUANTILES])} FROM {name}")
    small, _ = _doubles(fdb, 500, seed=2)
    both(fdb, f"SELECT {_cols([f'percentile_approx(x, {p}, 1000)' for p in QUANTILES])} "
              f"FROM {small}")


@pytest.mark.parametrize("n,accuracy", [(30_000, 10000), (5_001, 10000), (3_000, 1000)])
def test_percentile_approx_beyond_half_the_accuracy_is_within_spark_rank_error(
        fdb, n, accuracy):
    name, ordered = _doubles(fdb, n, seed=n)
    sql = f"SELECT {_cols([f'percentile_approx(x, {p}, {accuracy})' for p in QUANTILES])} " \
          f"FROM {name}"
    local = fdb.sql(sql, engine="local")
    spark = fdb.sql(sql, engine="spark").table.to_pylist()[0]
    assert local.stats.engine == "local"
    bound = math.ceil(n / accuracy)
    for k, p in enumerate(QUANTILES):
        rank = max(1, math.ceil(p * n))
        assert local.table.column(f"c{k}")[0].as_py() == ordered[rank - 1], p
        got = spark[f"c{k}"]
        first, last = bisect.bisect_left(ordered, got) + 1, bisect.bisect_right(ordered, got)
        assert first <= last, f"Spark's {got!r} is not one of the values"
        distance = 0 if first <= rank <= last else min(abs(rank - first), abs(rank - last))
        assert distance <= bound, (p, rank, first, last, bound)


# ---- approx_count_distinct -----------------------------------------------------------------
def test_approx_count_distinct_is_within_spark_error_of_the_exact_count(fdb):
    rng = random.Random(5)
    n = 40_000
    ids = [rng.randrange(25_000) for _ in range(n)]
    name = _arrow_table(fdb, {"u": pa.array(ids, pa.int64()),
                              "s": pa.array([f"user-{i}" for i in ids], pa.string()),
                              "g": pa.array([i % 4 for i in range(n)], pa.int64())})
    rsd = [0.05, 0.01, 0.1, 0.05]
    wheres = [lambda i: True, lambda i: True, lambda i: True, lambda i: i % 4 == 1]
    sql = f"SELECT g % 2 AS k, {_cols(DISTINCT_COUNTS)} FROM {name} GROUP BY g % 2 ORDER BY k"
    local = fdb.sql(sql, engine="local")
    spark = fdb.sql(sql, engine="spark")
    assert local.stats.engine == "local"
    assert local.table.schema.names == spark.table.schema.names
    assert local.table.schema.types == spark.table.schema.types
    for k in range(2):
        for c, e in enumerate(DISTINCT_COUNTS):
            exact = len({ids[i] for i in range(n) if i % 2 == k and wheres[c](i)})
            assert local.table.column(f"c{c}")[k].as_py() == exact, e
            estimate = spark.table.column(f"c{c}")[k].as_py()
            assert abs(estimate - exact) <= 3 * rsd[c] * exact, (e, k, estimate, exact)


# ---- routing ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def svc(fdb):
    name = _arrow_table(fdb, {"service": pa.array([f"svc-{i % 3}" for i in range(60)]),
                              "ms": pa.array([(i * 37) % 101 for i in range(60)], pa.int64()),
                              "x": pa.array([1e200 if i == 7 else i / 3 for i in range(60)],
                                            pa.float64())})
    return fdb, name


def test_per_service_percentiles_and_deviations_stay_local(svc):
    db, name = svc
    sql = (f"SELECT service, percentile_approx(ms, 0.95) AS p95, percentile(ms, 0.99) AS p99, "
           f"median(ms) AS p50, stddev(ms) FILTER (WHERE ms > 10) AS sd, "
           f"approx_count_distinct(ms) AS d FROM {name} GROUP BY service ORDER BY service")
    assert db.sql("EXPLAIN " + sql).stats.engine == "local"
    answer = db.sql(sql)
    assert answer.stats.engine == "local"
    assert answer.table.num_rows == 3


def test_a_variance_over_huge_values_goes_to_spark(svc):
    db, name = svc
    sql = f"SELECT stddev(x) AS sd, var_pop(x) AS v FROM {name}"
    with pytest.raises(Exception, match=re.escape("beyond 1e100")):
        db.sql(sql, engine="local")
    auto = db.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    assert auto.table.equals(db.sql(sql, engine="spark").table)


REFUSED = [  # (statement, what the reason names): Spark's to answer
    ("SELECT percentile(ms, array(0.5, 0.9)) AS v FROM {t}", "array of percentages"),
    ("SELECT percentile_approx(ms, array(0.5, 0.9)) AS v FROM {t}", "array of percentages"),
    ("SELECT stddev(DISTINCT ms) AS v FROM {t}", "stddev() of DISTINCT"),
    ("SELECT percentile(service, 0.5) AS v FROM {t}", "only of integers and doubles"),
    ("SELECT approx_count_distinct(ms, 0.5) AS v FROM {t}", "relative error"),
]


@pytest.mark.parametrize("sql,why", REFUSED)
def test_other_forms_are_answered_by_spark(svc, sql, why):
    db, name = svc
    sql = sql.format(t=name)
    with pytest.raises(Exception, match=re.escape(why)):
        db.sql(sql, engine="local")
    try:
        want = db.sql(sql, engine="spark").table
    except Exception as e:      # Spark refuses some of them itself
        with pytest.raises(type(e)):
            db.sql(sql)
        return
    auto = db.sql(sql)
    assert auto.stats.engine == "spark"
    assert auto.table.equals(want)


NAMES = ["percentile(x, 0.5)", "percentile(x, 1)", "median(x)", "percentile_approx(x, 0.95)",
         "approx_percentile(x, 0.5, 100)", "percentile_approx(x, 0.50)",
         "approx_count_distinct(x)", "stddev(x)", "std(x)", "stddev_samp(x)", "stddev_pop(x)",
         "variance(x)", "var_samp(x)", "var_pop(x)", "median(x) FILTER (WHERE x > 1)"]


def test_unaliased_statistics_carry_the_names_spark_gives_them(svc):
    db, name = svc
    sql = f"SELECT {', '.join(NAMES)} FROM {name} WHERE x < 100"
    local = db.sql(sql, engine="local")
    spark = db.sql(sql, engine="spark")
    assert local.stats.engine == "local"
    assert local.table.schema.names == spark.table.schema.names
    assert local.table.schema.types == spark.table.schema.types
