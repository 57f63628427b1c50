"""Date, timestamp, interval and time-bucket functions answer on the embedded engine exactly
as on Spark (session time zone UTC).

Generated rows (timestamps over the whole range shoal stores, 1677..2262, with the instants
around the epoch, leap days and the ends of ISO years among them; epoch numbers in seconds,
milliseconds and microseconds, negative ones included; day counts) are ingested into one
table per example; each statement evaluates many functions over the whole table on both
engines and the answers must match exactly (names, Arrow types, every value). Rows the
embedded engine would answer differently (a year outside 1..9999, a zero divisor) go to
Spark. `current_timestamp()` is one instant per statement, the same for both engines.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.types import INT, LONG, STRING, TIMESTAMP, Column
from tests.query.conftest import SPARK_MASTER, ndjson, rows_at
from tests.query.test_functions_differential import _same, _select, both

pytestmark = pytest.mark.spark

NS = 1_000_000_000


def _ns(text: str) -> int:
    dt = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return (int(dt.timestamp()) * 1_000_000 + dt.microsecond) * 1_000


# Instants whose fields are easy to get wrong: around the epoch (negative µs with a
# fraction), leap days, the ISO weeks at the ends of years, the ends of shoal's range.
EDGE_TS = [_ns(t) for t in (
    "1970-01-01 00:00:00", "1969-12-31 23:59:59.999999", "1969-12-31 23:59:59.000001",
    "2024-02-29 12:34:56.789", "2024-02-29 23:59:59.999999", "2000-02-29 00:00:00",
    "2100-03-01 00:00:00", "2020-12-31 23:59:59", "2021-01-03 00:00:00",
    "2021-01-04 00:00:00", "2018-12-31 00:00:00", "2026-12-28 06:00:00",
    "1677-09-22 00:00:00.000001", "2262-04-10 23:59:59.999999", "1900-01-01 00:00:00",
    "2026-03-29 01:30:00")]
ts_st = st.one_of(st.none(), st.sampled_from(EDGE_TS),
                  st.integers(EDGE_TS[12], EDGE_TS[13]).map(lambda n: n - n % 1000))
_texts = st.datetimes(datetime(1000, 1, 1), datetime(9999, 12, 31, 23, 59, 59))
row_st = st.fixed_dictionaries({
    "t": ts_st,
    "s": st.one_of(st.none(), st.sampled_from([0, -1, 1, 951_782_400, -62_135_596_800]),
                   st.integers(-62_135_596_800, 253_402_300_799)),
    "m": st.one_of(st.none(), st.sampled_from([0, -1, 999, -1001]),
                   st.integers(-62_135_596_800_000, 253_402_300_799_999)),
    "u": st.one_of(st.none(), st.sampled_from([0, -1, 1, -999_999]),
                   st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999)),
    "i": st.one_of(st.none(), st.sampled_from([0, 1, -1, 366, -366]),
                   st.integers(-100_000, 100_000)),
    "w": st.one_of(st.sampled_from([1, 7, 60, 300, -300, 3600]), st.integers(1, 10**6)),
    "x": st.one_of(st.none(), st.sampled_from(["2024-02-29 23:59:59", "1000-01-01 00:00:00",
                                               "9999-12-31 23:59:59"]),
                   _texts.map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S"))),
    "y": st.one_of(st.none(), st.sampled_from(["2024-02-29", "2000-02-29", "1582-10-10"]),
                   _texts.map(lambda d: d.strftime("%Y-%m-%d"))),
})
rows_st = st.lists(row_st, min_size=20, max_size=40)

FIELDS = [
    "hour(t)", "minute(t)", "second(t)", "day(t)", "dayofmonth(t)", "month(t)", "year(t)",
    "quarter(t)", "dayofweek(t)", "dayofyear(t)", "weekofyear(t)", "to_date(t)",
    "year(to_date(t))", "dayofweek(DATE '2024-02-29')", "weekofyear(DATE '2021-01-03')",
    "date_add(t, 3)", "date_sub(t, i)", "date_add(to_date(t), i)", "date_sub(DATE '2024-03-01', 1)",
    "datediff(t, DATE '2024-02-29')", "datediff(DATE '2000-01-01', t)",
    "datediff(t, date_add(t, i))",
]
EPOCHS = [
    "unix_micros(t)", "unix_millis(t)", "unix_seconds(t)", "timestamp_micros(u)",
    "timestamp_millis(m)", "timestamp_seconds(s)", "timestamp_seconds(i)",
    "unix_micros(timestamp_micros(u))", "unix_seconds(timestamp_seconds(s))",
    "pmod(u, w)", "pmod(i, 7)", "pmod(s, -w)", "pmod(i, w)",
]
INTERVALS = [
    "t - INTERVAL 1 HOUR", "t + INTERVAL 5 MINUTES", "INTERVAL '15' MINUTE + t",
    "t - INTERVAL 2 DAYS", "t + INTERVAL 1 WEEK", "t - INTERVAL 250 MILLISECONDS",
    "t + INTERVAL 7 MICROSECONDS", "t + INTERVAL -3 SECONDS", "hour(t + INTERVAL 30 MINUTES)",
    "t > TIMESTAMP '2021-01-01 00:00:00' - INTERVAL 1 HOUR",
    "t BETWEEN TIMESTAMP '2000-01-01' - INTERVAL 36500 DAYS AND TIMESTAMP '2030-01-01'",
]
# Spark's datetime patterns, written and read.
PATTERNS = [
    "date_format(t, 'yyyy-MM-dd HH:mm:ss')", "date_format(t, 'y/M/d H:m:s')",
    "date_format(t, 'yy.MM.dd hh:mm a')", "date_format(t, 'EEE, d MMM yyyy')",
    "date_format(t, 'EEEE MMMM')", "date_format(t, 'E')", "date_format(t, 'DDD D')",
    "date_format(t, 'h:mm:ss.SSS')", "date_format(t, 'HH:mm:ss.SSSSSS')",
    "from_unixtime(unix_seconds(t))", "from_unixtime(i, 'yyyy-MM-dd')", "unix_timestamp(t)",
    "unix_timestamp(x, 'yyyy-MM-dd HH:mm:ss')", "to_timestamp(x, 'yyyy-MM-dd HH:mm:ss')",
    "to_date(y)", "to_date(x, 'yyyy-MM-dd HH:mm:ss')", "day(y)", "dayofweek(y)",
    "to_date(date_format(t, 'dd/MM/yyyy'), 'dd/MM/yyyy')",
    "to_timestamp(date_format(t, 'yyyy-MM-dd HH:mm:ss.SSSSSS'), 'yyyy-MM-dd HH:mm:ss.SSSSSS')",
    "to_timestamp(date_format(t, 'yyyy-MM-dd_HH:mm:ss.SSS'), 'yyyy-MM-dd_HH:mm:ss.SSS')",
    "unix_timestamp(date_format(t, 'yyyyMMddHHmmss'), 'yyyyMMddHHmmss')",
]
# Time buckets of any width, as users and the KQL translator write them.
BUCKETS = [
    "date_trunc('minute', t)", "date_trunc('hour', t)",
    "timestamp_seconds(floor(unix_seconds(t) / 300) * 300)",
    "timestamp_micros(unix_micros(t) - pmod(unix_micros(t), 300000000))",
    "timestamp_micros(unix_micros(t) - pmod(unix_micros(t), w))",
    "timestamp_seconds(unix_seconds(t) - pmod(unix_seconds(t), 3600))",
    "timestamp_millis(unix_millis(t) - pmod(unix_millis(t), 86400000))",
]

# Each function of this family on the embedded engine's list and a statement exercising it.
COVERED = {
    "hour": "hour(t)", "minute": "minute(t)", "second": "second(t)", "day": "day(t)",
    "dayofmonth": "dayofmonth(t)", "month": "month(t)", "year": "year(t)",
    "quarter": "quarter(t)", "dayofweek": "dayofweek(t)", "dayofyear": "dayofyear(t)",
    "weekofyear": "weekofyear(t)", "to_date": "to_date(t)", "unix_micros": "unix_micros(t)",
    "unix_millis": "unix_millis(t)", "unix_seconds": "unix_seconds(t)",
    "timestamp_micros": "timestamp_micros(u)", "timestamp_millis": "timestamp_millis(m)",
    "timestamp_seconds": "timestamp_seconds(s)", "date_add": "date_sub(t, i)",
    "datediff": "datediff(t, DATE '2024-02-29')", "pmod": "pmod(u, w)",
    "interval": "t - INTERVAL 1 HOUR", "date_format": "date_format(t, 'y/M/d H:m:s')",
    "from_unixtime": "from_unixtime(unix_seconds(t))",
    "unix_timestamp": "unix_timestamp(x, 'yyyy-MM-dd HH:mm:ss')",
    "to_timestamp": "to_timestamp(x, 'yyyy-MM-dd HH:mm:ss')",
    "(timestamp argument of date_format)": "date_format(t, 'E')",
}


@pytest.fixture(scope="module")
def tdb(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("time_functions")),
                           spark_master=SPARK_MASTER)
    yield client
    client.close()


_names = itertools.count()
SCHEMA = [Column("k", LONG), Column("t", TIMESTAMP), Column("s", LONG), Column("m", LONG),
          Column("u", LONG), Column("i", INT), Column("w", LONG), Column("x", STRING),
          Column("y", STRING)]


def _table(db, rows: list[dict]) -> str:
    name = f"tm{next(_names)}"
    db.create_table(name, SCHEMA)
    db.ingest_ndjson(name, ndjson(rows_at(0, len(rows), k=lambda n: n,
                                          **{c: (lambda n, c=c: rows[n][c])
                                             for c in rows[0]})))
    return name


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_time_functions_answer_as_spark_does(tdb, rows):
    name = _table(tdb, rows)
    both(tdb, _select(FIELDS + EPOCHS, name))
    both(tdb, _select(INTERVALS + BUCKETS, name))
    both(tdb, _select(PATTERNS, name))


def test_edge_instants_answer_as_spark_does(tdb):
    rows = [{"t": t, "s": k - 8, "m": -k * 999, "u": -k * 999_999, "i": 366 * (k - 8),
             "w": [1, 7, 300, 86_400_000_000][k % 4], "x": "2024-02-29 00:00:00",
             "y": "1970-01-01"} for k, t in enumerate(EDGE_TS + [None])]
    name = _table(tdb, rows)
    both(tdb, _select(FIELDS + EPOCHS, name))
    both(tdb, _select(INTERVALS + BUCKETS, name))
    both(tdb, _select(PATTERNS, name))


@pytest.fixture(scope="module")
def events(tdb):
    rows = [{"t": EDGE_TS[3] + k * 97 * NS + k * 1000, "s": k, "m": k, "u": k, "i": k % 5,
             "w": 300, "x": None, "y": None} for k in range(60)]
    return _table(tdb, rows)


@pytest.mark.parametrize("sql", [
    "SELECT timestamp_seconds(floor(unix_seconds(t) / 300) * 300) AS b, count(*) AS c "
    "FROM {t} GROUP BY 1 ORDER BY 1",
    "SELECT timestamp_micros(unix_micros(t) - pmod(unix_micros(t), 600000000)) AS b, "
    "max(i) AS m FROM {t} GROUP BY 1 ORDER BY b",
    "SELECT hour(t) AS h, minute(t) AS mi, count(*) AS c FROM {t} "
    "WHERE t >= TIMESTAMP '2024-02-29 12:40:00' - INTERVAL 5 MINUTES GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT to_date(t) AS d, min(t) AS lo FROM {t} GROUP BY to_date(t) ORDER BY d DESC",
    "SELECT k FROM {t} WHERE t + INTERVAL 1 HOUR > TIMESTAMP '2024-02-29 14:00:00' ORDER BY k",
])
def test_buckets_in_grouping_filters_and_order_answer_as_spark_does(tdb, events, sql):
    both(tdb, sql.format(t=events))


NOW = _ns("2024-02-29 23:59:59.999999")


def test_current_timestamp_is_one_instant_the_same_on_both_engines(tdb, events):
    sql = (f"SELECT k, current_timestamp() AS a, now() AS b, current_date() AS c, "
           f"unix_micros(current_timestamp()) - unix_micros(t) AS age, "
           f"t > current_timestamp() - INTERVAL 1 HOUR AS recent FROM {events} ORDER BY k")
    engine = tdb.query_engine
    spark = engine.execute(sql, engine="spark", now_ns=NOW)
    local = engine.execute(sql, engine="local", now_ns=NOW)
    assert (spark.stats.engine, local.stats.engine) == ("spark", "local")
    _same(spark.table, local.table, sql)
    row = local.table.to_pylist()[0]
    assert row["a"] == row["b"] == datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    assert str(row["c"]) == "2024-02-29"
    # Without a given instant: each statement reads the clock once.
    for mode in ("spark", "local"):
        got = engine.execute(sql, engine=mode).table.to_pylist()
        assert len({(r["a"], r["b"], r["c"]) for r in got}) == 1
        assert got[0]["a"] == got[0]["b"] and got[0]["c"] == got[0]["a"].date()


def test_unaliased_current_timestamp_is_spark_s_to_name(tdb, events):
    sql = f"SELECT current_timestamp() FROM {events} LIMIT 1"
    result = tdb.sql(sql)
    assert result.stats.engine == "spark"
    assert result.table.schema.names == ["current_timestamp()"]


@pytest.fixture(scope="module")
def edge(tdb):
    tdb.create_table("tedge", SCHEMA)
    tdb.ingest_ndjson("tedge", ndjson(rows_at(0, 1, k=0, t=EDGE_TS[0], s=10**12, m=0,
                                              u=-(2**62), i=3_000_000, w=0,
                                              x="2023-02-29 00:00:00", y="2024-2-9")))
    return tdb


EDGES = [  # (statement over one row of `tedge`, why the embedded engine hands it to Spark)
    ("SELECT unix_micros(timestamp_seconds(s)) AS v FROM tedge",
     "timestamp_seconds() of a year outside 1..9999"),
    ("SELECT unix_micros(timestamp_micros(u)) AS v FROM tedge",
     "timestamp_micros() of a year outside 1..9999"),
    ("SELECT year(date_add(t, i)) AS v FROM tedge", "date_add() of a year outside 1..9999"),
    ("SELECT pmod(s, w) AS v FROM tedge", "pmod() by zero"),
    ("SELECT to_date(y) AS v FROM tedge", "to_date() of a text its pattern may read"),
    ("SELECT to_timestamp(x, 'yyyy-MM-dd HH:mm:ss') AS v FROM tedge",
     "to_timestamp() of a text its pattern may read"),
    ("SELECT from_unixtime(-40000000000) AS v FROM tedge",
     "from_unixtime() of a year outside 1000..9999"),
]


@pytest.mark.parametrize("sql,why", EDGES)
def test_rows_the_embedded_engine_would_answer_differently_go_to_spark(edge, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        edge.sql(sql, engine="local")
    try:
        spark_answer = edge.sql(sql, engine="spark").table
    except Exception as e:          # Spark's ANSI mode raises on a zero divisor
        with pytest.raises(type(e)):
            edge.sql(sql)
        return
    auto = edge.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    _same(spark_answer, auto.table, sql)


@pytest.mark.parametrize("sql", [
    "SELECT t - t AS v FROM tedge", "SELECT add_months(to_date(t), 1) AS v FROM tedge",
    "SELECT t + INTERVAL 1 MONTH AS v FROM tedge",
    "SELECT window(t, '5 minutes') AS v FROM tedge",
    "SELECT window(t, '5 minutes').start AS v FROM tedge",
    "SELECT hour(t) FROM tedge", "SELECT date_format(t, 'y') AS a, date_format(t, 'yyyy') AS b "
    "FROM tedge", "SELECT date_format(t, 'MMM dd, yyyy z') AS v FROM tedge",
    "SELECT to_timestamp(y) AS v FROM tedge",
])
def test_time_expressions_left_to_spark_still_answer(edge, sql):
    result = edge.sql(sql)
    assert result.stats.engine == "spark", result.stats.engine_reason
    assert result.table.num_rows == 1


def test_every_time_function_has_a_differential_case():
    from shoal.query.embedded.functions import time as family
    from shoal.query.embedded.vetting import FUNCTIONS

    mine = {f.names.split(",")[0].strip() for f in FUNCTIONS.values()
            if f.rewrite is not None and f.rewrite.__module__ == family.__name__}
    assert mine <= set(COVERED), mine - set(COVERED)
    statements = FIELDS + EPOCHS + INTERVALS + BUCKETS + PATTERNS
    for fn, expr in COVERED.items():
        assert expr in statements, fn
