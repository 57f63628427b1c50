"""Rounding, pmod, decimal literals and decimal arithmetic answer on the embedded engine
exactly as on Spark.

Generated rows (halves, 2.675, values near 2**52 and 1e16, integers near their limits,
nulls) go through both engines; names, Arrow types (decimal128(p, s) as Spark types it)
and every value must match, doubles by their exact representation. The rows the embedded
engine would answer differently (a zero divisor, an overflow, a double from 1e16 on
rounded to a negative scale) go to Spark under `auto` and answer as Spark does.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from shoal.query.embedded.functions import ANONYMOUS, FUNCTIONS
from shoal.types import REAL, Column
import shoal
from tests.query.conftest import SPARK_MASTER, ndjson, rows_at
from tests.query.test_functions_differential import (_same, _select, _table, both, int_st,
                                                     long_st, real_st)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def fdb(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("numbers")),
                           spark_master=SPARK_MASTER)
    yield client
    client.close()

EDGE_DOUBLES = [2.675, -2.675, 0.285, 2.5, -2.5, 0.5, -0.5, 1.5, 0.125, 1.005, 1.115, 1234.5,
                -0.0, 0.0, 1e-7, 5e-324, 4503599627370495.5, 4503599627370497.0, 9.5e15,
                1.8e16 + 2, 1.0000000000000002, 0.30000000000000004, 99.995, 1e300, -1e-300,
                123456789.987654321, 2.2250738585072014e-308]
edge_real_st = st.one_of(real_st, st.sampled_from(EDGE_DOUBLES))
row_st = st.fixed_dictionaries({"s": st.none(), "u": st.none(), "a": st.none(),
                                "x": edge_real_st, "y": edge_real_st, "i": int_st,
                                "l": long_st})
rows_st = st.lists(row_st, min_size=20, max_size=40)

ROUNDS = [
    "round(x, 2)", "round(x)", "round(x, 1)", "round(x, 5)", "round(x, 20)", "bround(x, 2)",
    "bround(x)", "bround(y, 3)", "round(sqrt(x), 2)", "bround(i / 7.0, 3)",
    "round(i % 100000, -1)", "bround(i % 100000, -2)",
    "round(l div 1000, -3)", "bround(l div 10, -1)", "round(i, 2)",
    "round(l)", "round(x * 1000, 3)", "round(-x, 2)", "bround(-y, 1)",
    "pmod(i, 7)", "pmod(l, -3)", "pmod(l, i)", "pmod(x, 2)", "pmod(x, y)", "pmod(-i, 10)",
]
DECIMALS = [
    "x / 1000.0", "i / 1000.0", "l / 100.0", "i * 0.95", "i + 0.5", "l - 2.25", "-i * 1.5",
    "x * 0.5", "x + 0.1", "0.95", "100.0", "-0.5", "1e3", "i / 0.3", "1.0 / 3",
    "round(x / 1000.0, 1)", "round(i / 7.0, 2)", "bround(i * 0.5, 0)", "round(2.675, 2)",
    "round(1.25, 1)", "bround(1.25, 1)", "round(-2.5, 0)", "bround(0.125, 2)",
    "x > 100.0", "i >= 0.5", "l = 3.0", "i * 100.0 / l", "(i + 0.25) / (l - 0.5)",
    "i / 1000.0 / 7", "i % 7 * 1.5", "2 * 0.95 + i",
]
NONZERO = "WHERE l <> 0 AND l <> 0.5"
CASTS = [
    "cast(i as string)", "cast(x as string)", "cast(i > 0 as string)", "cast(l as string)",
    "cast(i as double)", "cast(1.5 as double)", "cast(i as boolean)", "cast(i as bigint)",
    "cast(i as decimal(12, 2))", "cast(cast(i as string) as int)",
    "cast(concat(' ', cast(l as string), '  ') as bigint)", "cast(cast(x as string) as double)",
    "cast(cast(i % 2 as string) as boolean)", "cast(x as int)", "cast(l % 1000 as int)",
    "cast(x * 100 as bigint)", "cast(_timestamp as string)",
]
# Rows whose values every cast above answers locally (the integers' extremes, whose text the
# embedded engine hands to Spark, are the hand-off tests' business).
CASTABLE = ("WHERE abs(x) >= 0.001 AND abs(x) < 1e7 AND i % 2 >= 0 "
            "AND i BETWEEN -999999999 AND 999999999 "
            "AND l BETWEEN -999999999999999 AND 999999999999999")

# Each function this family adds to the embedded engine's list, and a statement above
# exercising it.
COVERED = {"round": "round(x, 2)", "bround": "bround(x, 2)", "pmod": "pmod(i, 7)",
           "cast": "cast(x as string)",
           "+": "i + 0.5", "-": "l - 2.25", "*": "i * 0.95"}


@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_rounding_pmod_and_decimals_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    both(fdb, _select(ROUNDS, name, "WHERE y <> 0 AND i <> 0 AND l <> 0"))
    both(fdb, _select(DECIMALS, name, NONZERO))
    both(fdb, _select(CASTS, name, CASTABLE))


def test_everyday_decimal_forms_answer_as_spark_does(fdb):
    rows = [{"s": None, "u": None, "a": None, "x": float(k) * 37.25 - 300, "y": 1.0,
             "i": k % 5 - 1, "l": k} for k in range(30)]
    name = _table(fdb, rows)
    both(fdb, f"SELECT i, sum(CASE WHEN x > 0 THEN 1 ELSE 0 END) * 100.0 / count(*) AS pct, "
              f"avg(x) > 100.0 AS big, round(avg(x), 1) AS r, round(avg(x) / 1000.0, 3) AS k, "
              f"max(x / 1000.0) AS m FROM {name} GROUP BY i ORDER BY i")
    both(fdb, f"SELECT l, x FROM {name} WHERE x / 1000.0 > 0.25 AND l * 1.5 < 40.5 ORDER BY l")


@pytest.fixture(scope="module")
def doubles(fdb):
    fdb.create_table("doubles", [Column("x", REAL)])
    fdb.ingest_ndjson("doubles", ndjson(rows_at(0, len(EDGE_DOUBLES),
                                                x=lambda n: EDGE_DOUBLES[n])))
    return fdb


def test_rounding_the_halves_java_prints(doubles):
    """round(2.675, 2) is 2.68 on a double in Spark (it rounds the decimal Java prints,
    not the binary value): the embedded engine says the same for every edge double."""
    t = both(doubles, "SELECT x, round(x, 2) AS r2, bround(x, 2) AS b2, round(x) AS r0, "
                      "bround(x) AS b0, round(x, -1) AS rm, round(x, 15) AS r15 FROM doubles "
                      "WHERE abs(x) < 1e16 AND x <> 0 ORDER BY x")
    answers = dict(zip(t.column("x").to_pylist(), t.column("r2").to_pylist(), strict=True))
    assert answers[2.675] == 2.68 and answers[0.285] == 0.29 and answers[-2.675] == -2.68
    halves = dict(zip(t.column("x").to_pylist(), t.column("b0").to_pylist(), strict=True))
    assert halves[2.5] == 2.0 and halves[-2.5] == -2.0 and halves[1.5] == 2.0


EDGES = [  # (statement over one row of `numedge`, why the embedded engine hands it to Spark)
    ("SELECT i / 0.0 AS v FROM numedge", "decimal division by zero"),
    ("SELECT pmod(l, i) AS v FROM numedge", "pmod() by zero"),
    ("SELECT round(x, -2) AS v FROM numedge", "round() of a double from 1e16 on"),
    ("SELECT round(b, -1) AS v FROM numedge", "round() beyond the integer type"),
    ("SELECT cast(s AS int) AS v FROM numedge", "text Spark reads as an integer otherwise"),
    ("SELECT cast(x AS int) AS v FROM numedge", "a double beyond the integer type"),
    ("SELECT cast(x AS string) AS v FROM numedge", "a double Java prints in its scientific"),
    ("SELECT cast(s AS boolean) AS v FROM numedge", "text Spark reads as a boolean otherwise"),
    ("SELECT cast(l * 1000000000000 AS int) AS v FROM numedge", "an integer beyond the "
                                                                "narrower type"),
]


@pytest.fixture(scope="module")
def numedge(fdb):
    from shoal.types import INT, LONG, STRING
    fdb.create_table("numedge", [Column("x", REAL), Column("i", INT), Column("l", LONG),
                                 Column("b", INT), Column("s", STRING)])
    fdb.ingest_ndjson("numedge", ndjson(rows_at(0, 1, x=3e17, i=0, l=7, b=2**31 - 1, s="1.5")))
    return fdb


@pytest.mark.parametrize("sql,why", EDGES)
def test_rows_the_embedded_engine_would_answer_differently_go_to_spark(numedge, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        numedge.sql(sql, engine="local")
    try:
        spark_answer = numedge.sql(sql, engine="spark").table
    except Exception as e:          # Spark's ANSI mode raises on these
        with pytest.raises(type(e)):
            numedge.sql(sql)
        return
    auto = numedge.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    _same(spark_answer, auto.table, sql)


def test_every_function_of_the_family_has_a_differential_case():
    names = {f.names.split(",")[0].strip() for f in [*FUNCTIONS.values(), *ANONYMOUS.values()]}
    assert set(COVERED) <= names
    assert {"round", "bround", "pmod"} <= set(COVERED)
    for fn, expr in COVERED.items():
        assert expr in ROUNDS + DECIMALS + CASTS, fn
