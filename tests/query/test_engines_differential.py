"""Two engines, one answer: every query shape of the correctness tests
answered by Spark (`engine=spark`) and by the embedded engine (`engine=local`) gives the same
column names, the same Arrow types and the same values; statements the embedded engine must
not answer are listed with the reason `auto` gives for handing them to Spark.

Doubles from aggregates (sum/avg) are compared to 1e-12 relative: their summation order is
an engine's (Spark's own answers vary with its partitioning); everything else exactly.
"""

from __future__ import annotations

import math
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.query.routing import LocalEngineRefusedError
from shoal.types import BYTES, DYNAMIC, HEADERS, INT, LONG, REAL, STRING, Column, vector
from tests.query.conftest import SPARK_MASTER, T0, ndjson, ns, rows_at
from tests.query.test_correctness import _write, predicate, table_st


@pytest.fixture(scope="module")
def ddb(tmp_path_factory, spark):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("differential")),
                       spark_master=SPARK_MASTER)
    # logs: 4 extents, one per service, 50 rows each; status = 200 + i % 5; some nulls
    db.create_table("logs", [Column("service", STRING), Column("status", LONG),
                             Column("msg", STRING), Column("code", INT),
                             Column("dur", REAL)])
    for k, svc in enumerate(["api", "web", "db", "auth"]):
        db.ingest_ndjson("logs", ndjson(rows_at(
            10 * k, 50, service=svc, status=lambda i: 200 + i % 5,
            msg=lambda i, s=svc: None if i % 7 == 0 else f"{s} request {i}",
            code=lambda i: None if i % 9 == 0 else i % 4 - 1,
            dur=lambda i: i * 0.25 + 0.1)))
    # ev: three schema versions (added column, then widened int -> long)
    db.create_table("ev", [Column("code", STRING)])
    db.ingest_ndjson("ev", ndjson(rows_at(0, 3, code="a")))
    db.sql("ALTER TABLE ev ADD COLUMN n int")
    db.ingest_ndjson("ev", ndjson(rows_at(1, 3, code="b", n=lambda i: i + 1)))
    db.sql("ALTER TABLE ev ALTER COLUMN n TYPE long")
    db.ingest_ndjson("ev", ndjson(rows_at(2, 3, code="c", n=lambda i: 2**40 + i)))
    # spans: vectors, dynamic values of every JSON kind, ns timestamps
    db.create_table("spans", [Column("name", STRING), Column("emb", vector(3)),
                              Column("attrs", DYNAMIC)])
    t = ns(T0) + 123_456_789
    db.ingest_ndjson("spans", ndjson([
        {"_timestamp": t, "name": "GET /a", "emb": [1.0, 2.0, 3.5],
         "attrs": {"http": {"method": "GET", "status": 200}, "ok": True, "tag": "x"}},
        {"_timestamp": t + 1, "name": "POST /b", "emb": [0.5, 0, -1],
         "attrs": {"http": {"method": "POST"}, "ok": False, "n": None, "big": 10**15}},
        {"_timestamp": t + 1001, "name": "PUT /c", "emb": None,
         "attrs": {"http": {"method": "PUT", "ratio": 1.5e7}, "list": [1, 2]}},
        {"_timestamp": t + 2_000_000, "name": "DEL /d", "emb": [0, 0, 0], "attrs": None},
    ]))
    # kb: byte payloads and Kafka headers for the byte functions
    db.create_table("kb", [Column("raw", BYTES), Column("hs", HEADERS, header="*"),
                           Column("i", LONG)])
    info = db.catalog.load_table("kb")
    n = 12
    raw = [None if i == 3 else (i * 1000003).to_bytes(8, "big") if i % 2 else
           i.to_bytes(4, "little") if i % 4 == 0 else b"\x01\x02" for i in range(n)]
    hs = [None if i == 5 else [{"key": "k", "value": i.to_bytes(4, "big")}] for i in range(n)]
    table = pa.table({
        "_timestamp": pa.array([ns(T0) + i * 10**9 for i in range(n)], pa.int64()).cast(
            pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(n, pa.binary()), "raw": pa.array(raw, pa.binary()),
        "hs": pa.array(hs, info.schema.column("hs").type.arrow()),
        "i": pa.array(range(n), pa.int64())}).cast(info.schema.arrow())
    db.coordinator.append("kb", [db.coordinator.write_extent(info, table.to_batches())])
    yield db
    db.close()


def _canon(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def _rows(t: pa.Table) -> list[tuple]:
    cols = [[_canon(v) for v in t.column(i).to_pylist()] for i in range(t.num_columns)]
    return list(zip(*cols, strict=True)) if cols else []


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    return a == b


def assert_identical(spark: pa.Table, local: pa.Table, *, ordered: bool, sql: str) -> None:
    assert local.schema.names == spark.schema.names, sql
    for f, g in zip(spark.schema, local.schema, strict=True):
        assert g.type.equals(f.type), f"{sql}: {f.name} is {g.type} locally, {f.type} in Spark"
    a, b = _rows(spark), _rows(local)
    if not ordered:
        a, b = sorted(a, key=repr), sorted(b, key=repr)
    assert len(a) == len(b), f"{sql}: {len(b)} rows locally, {len(a)} in Spark"
    for ra, rb in zip(a, b, strict=True):
        assert all(_close(x, y) for x, y in zip(ra, rb, strict=True)), f"{sql}: {rb} != {ra}"


def both(db, sql: str, *, ordered: bool = False, prune: bool = True):
    s = db.sql(sql, engine="spark", prune=prune)
    loc = db.sql(sql, engine="local", prune=prune)
    assert s.stats.engine == "spark" and loc.stats.engine == "local"
    assert_identical(s.table, loc.table, ordered=ordered, sql=sql)
    return s, loc


# (statement, answer ordered?) -- each answered identically by both engines
IDENTICAL = [
    # self-joins, subqueries, UNION ALL, repeated scans (test_queries)
    ("SELECT count(*) AS n FROM logs a JOIN logs b ON a.status = b.status "
     "WHERE a.service = 'api' AND b.service = 'web'", True),
    ("SELECT count(*) AS total, (SELECT count(*) FROM logs WHERE service = 'db') AS db "
     "FROM logs", True),
    ("SELECT service, count(*) AS n FROM logs WHERE status = (SELECT max(status) FROM logs "
     "WHERE service = 'api') GROUP BY service ORDER BY service", True),
    ("SELECT o.service, count(*) AS n FROM logs o WHERE o.status > (SELECT min(i.status) "
     "FROM logs i WHERE i.service = o.service AND i.msg LIKE '% request 3') "
     "GROUP BY o.service ORDER BY o.service", True),
    ("SELECT count(*) AS n FROM logs WHERE service IN (SELECT service FROM logs "
     "WHERE msg = 'web request 8')", True),
    ("SELECT service FROM logs WHERE service = 'api' UNION ALL "
     "SELECT service FROM logs WHERE service = 'db' AND status = 201", False),
    ("SELECT service, status FROM logs WHERE service = 'api' UNION "
     "SELECT service, status FROM logs WHERE status = 203", False),
    ("SELECT * FROM logs a JOIN logs b ON a.msg = b.msg WHERE a.service = 'api'", False),
    ("SELECT a.service, b.msg FROM logs a LEFT JOIN logs b ON a.msg = b.msg "
     "AND b.service = 'web' WHERE a.status = 204", False),
    ("SELECT a.msg FROM logs a LEFT ANTI JOIN logs b ON a.code = b.code AND b.service = 'db'",
     False),
    ("SELECT a.msg FROM logs a LEFT SEMI JOIN logs b ON a.msg = b.msg AND b.status = 202",
     False),
    ("WITH w AS (SELECT service, status FROM logs WHERE code IS NOT NULL) "
     "SELECT service, count(*) AS n, sum(status) AS s FROM w GROUP BY service", False),
    ("SELECT count(*) AS n FROM logs WHERE EXISTS (SELECT 1 AS one FROM logs i "
     "WHERE i.code = 2)", True),
    # aggregates, names Spark generates, nulls, ordering with nulls
    ("SELECT service, count(*), count(code), sum(code), avg(code), min(msg), max(status), "
     "count(DISTINCT status) FROM logs GROUP BY service", False),
    ("SELECT code, count(*) AS n FROM logs GROUP BY code ORDER BY code", True),
    ("SELECT code, msg FROM logs ORDER BY code DESC, msg LIMIT 500", True),
    ("SELECT DISTINCT code FROM logs ORDER BY code ASC NULLS LAST", True),
    ("SELECT service, sum(dur) AS d, avg(dur) AS a, sum(status * 2 + code) AS x "
     "FROM logs GROUP BY service HAVING count(*) > 10", False),
    ("SELECT coalesce(code, -1) AS c, CASE WHEN status > 202 THEN 'hi' ELSE 'lo' END AS k, "
     "IF(code IS NULL, 1, 0) AS z FROM logs WHERE msg IS NULL OR code <=> NULL", False),
    ("SELECT service FROM logs WHERE NOT (status BETWEEN 201 AND 203) AND code IN (0, 2)",
     False),
    ("SELECT count(*) AS n FROM logs WHERE msg LIKE 'a_i %' OR msg RLIKE '^(db|auth) "
     "request [0-9]+[13]'", True),
    # has(), timestamps (µs truncation, literals), date_trunc
    ("SELECT count(*) AS n FROM logs WHERE has(msg, 'REQUEST') AND has(msg, 'api')", True),
    ("SELECT count(*) AS n FROM logs WHERE has(msg, 'requests')", True),
    ("SELECT date_trunc('minute', _timestamp) AS m, count(*) AS n FROM logs "
     "GROUP BY 1 ORDER BY 1", True),
    ("SELECT date_trunc('HOUR', _timestamp) AS h, min(_timestamp) AS lo FROM logs GROUP BY 1",
     False),
    ("SELECT service, _timestamp FROM logs WHERE _timestamp >= '2026-03-01 00:20:10' "
     "AND _timestamp < '2026-03-01T00:30:00Z'", False),
    ("SELECT count(*) AS n FROM logs WHERE _timestamp BETWEEN '2026-03-01' AND "
     "CAST('2026-03-01 00:11:00' AS TIMESTAMP)", True),
    # schema versions
    ("SELECT code, n FROM ev ORDER BY _timestamp", True),
    ("SELECT count(*) AS c FROM ev WHERE n >= 2", True),
    # dynamic paths, vectors, nanoseconds
    ("SELECT name, get_json_object(attrs, '$.http.method') AS m, get_json_object(attrs, "
     "'$.tag') AS tag, get_json_object(attrs, '$.ok') AS ok, get_json_object(attrs, '$.n') "
     "AS nul, emb, _timestamp_ns, _timestamp FROM spans ORDER BY _timestamp_ns", True),
    ("SELECT name FROM spans WHERE get_json_object(attrs, '$.http.status') = '200'", False),
    ("SELECT count(*) AS n FROM spans WHERE get_json_object(attrs, '$.nope.x') IS NOT NULL",
     True),
    ("SELECT name, get_json_object(attrs, '$.big') AS big FROM spans WHERE name = 'POST /b'",
     False),
    ("SELECT * FROM spans ORDER BY _timestamp_ns DESC", True),
    # byte functions and headers
    ("SELECT i, int_from_bytes(raw, 'LITTLE_ENDIAN') AS le, bigint_from_bytes(raw) AS be, "
     "double_from_bytes(raw, 'BIG_ENDIAN') AS d FROM kb ORDER BY i", True),
    ("SELECT count(*) AS n FROM kb WHERE bigint_from_bytes(raw) > 1000003", True),
    ("SELECT i, hs, raw FROM kb WHERE i > 2 ORDER BY i", True),
    # windows, QUALIFY, conditionals and Spark's names (test_functions_agg_differential.py)
    ("SELECT service, status + 1 AS s1, nvl(code, 0) AS c0, rank() OVER (PARTITION BY service "
     "ORDER BY status) AS r FROM logs QUALIFY dense_rank() OVER (ORDER BY status) <= 2", False),
    ("SELECT service, status + 1, nvl(code, 0) FROM logs", False),
    ("SELECT service, count_if(code IS NULL), max(status) FROM logs GROUP BY service",
     False),
    # string and math functions (tests/query/test_functions_differential.py for each)
    ("SELECT upper(service) AS u, length(msg) AS n, status / 2 AS half, status DIV 2 AS d, "
     "status % 3 AS m, ceil(dur) AS c, substr(msg, -2) AS tail FROM logs", False),
    # regular expressions and LIKE escapes (tests/query/test_functions_strings_differential.py)
    ("SELECT count(*) AS n FROM logs WHERE msg RLIKE 'req.est$' OR msg LIKE 'a\\_i%'", True),
]

# (statement, what the reason names) -- routed to Spark by `auto`, refused by `local`
TO_SPARK = [
    ("SELECT initcap(service) AS u FROM logs", "function initcap()"),
    ("SELECT service, rank() OVER (ORDER BY status) FROM logs", "unaliased expression"),
    ("SELECT service / 2 AS half FROM logs", "only on numbers"),
    ("SELECT service, status + 1 FROM logs QUALIFY rank() OVER (ORDER BY status) <= 2",
     "beside QUALIFY"),
    ("SELECT percentile(dur, array(0.5, 0.9)) AS p FROM logs", "array of percentages"),
    ("SELECT try_cast(code AS STRING) AS s FROM logs", "try_cast"),
    ("SELECT service, ntile(4) OVER (ORDER BY status) AS r FROM logs", "window function"),
    ("SELECT count(*) AS n FROM logs WHERE service = 1", "compares string with number"),
    ("SELECT count(*) AS n FROM logs WHERE msg RLIKE '(?i)REQ'", "regular expression"),
    ("SELECT count(*) AS n FROM logs WHERE msg LIKE 'a\\ti%'", "backslash"),
    ("SELECT service FROM logs INTERSECT SELECT service FROM logs", "INTERSECT"),
    ("SELECT emb FROM spans ORDER BY emb", "ORDER BY emb"),
    ("SELECT get_json_object(attrs, '$.list[0]') AS x FROM spans", "JSON path"),
    ("SELECT date_trunc('MILLISECOND', _timestamp) AS t FROM logs", "date_trunc unit"),
    ("SELECT int_from_bytes(element_at(hs, 1).value) AS x FROM kb", "element_at"),
]


@pytest.mark.parametrize("sql, ordered", IDENTICAL, ids=[f"q{i}" for i in range(len(IDENTICAL))])
def test_both_engines_answer_identically(ddb, sql, ordered):
    s, loc = both(ddb, sql, ordered=ordered)
    assert s.table.num_rows > 0 or "nope" in sql
    # the embedded engine reports the same scans, and its reads
    sj, lj = s.stats.to_json(), loc.stats.to_json()
    for key in ("extents_considered", "extents_pruned", "extents_read", "blocks_considered",
                "blocks_pruned", "blocks_read"):
        assert sj[key] == lj[key], key
    assert lj["bytes_read"] > 0 or lj["extents_read"] == 0


def test_both_engines_agree_without_pruning(ddb):
    both(ddb, "SELECT service, status, msg FROM logs WHERE code = 2 AND has(msg, 'web')",
         prune=False)


def test_json_numbers_spark_renders_its_own_way_go_to_spark(ddb):
    """Spark renders JSON numbers (1.5E7) and objects with Jackson; the embedded engine
    refuses at run time rather than answer them in its own form, and `auto` hands off."""
    sql = "SELECT get_json_object(attrs, '$.http') AS h FROM spans ORDER BY _timestamp"
    with pytest.raises(Exception, match="would not render"):
        ddb.sql(sql, engine="local")
    auto = ddb.sql(sql)
    assert auto.stats.engine == "spark" and "local engine failed" in auto.stats.engine_reason
    assert auto.table.equals(ddb.sql(sql, engine="spark").table)
    ratio = "SELECT get_json_object(attrs, '$.http.ratio') AS r FROM spans WHERE name = 'PUT /c'"
    assert ddb.query(ratio).to_pylist() == ddb.query(ratio, engine="spark").to_pylist()


@pytest.mark.parametrize("sql, reason", TO_SPARK, ids=[f"s{i}" for i in range(len(TO_SPARK))])
def test_statements_the_local_engine_must_not_answer_go_to_spark(ddb, sql, reason):
    explained = ddb.sql("EXPLAIN " + sql)
    assert explained.stats.engine == "spark"
    assert reason.lower() in explained.stats.engine_reason.lower(), explained.stats.engine_reason
    assert explained.table.column("engine").to_pylist()[0] == "spark"
    with pytest.raises(LocalEngineRefusedError, match="cannot answer"):
        ddb.sql(sql, engine="local")


def test_time_travel_on_both_engines(ddb):
    snaps = ddb.catalog.snapshots("logs")
    first = min(s.snapshot_id for s in snaps if s.operation != "create")
    both(ddb, f"SELECT service, count(*) AS n FROM logs VERSION AS OF {first} GROUP BY service")
    cut = time.time()
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cut)) + "Z"
    s, loc = both(ddb, f"SELECT count(*) AS n FROM logs TIMESTAMP AS OF '{when}'")
    assert loc.table.to_pylist() == [{"n": 200}]


@pytest.fixture(scope="module")
def rdb(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("differential-random")),
                           spark_master=SPARK_MASTER)
    yield client
    client.close()


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(extents=table_st, preds=st.lists(predicate(), min_size=2, max_size=2))
def test_random_tables_and_predicates_identical_on_both_engines(rdb, extents, preds):
    name, _ = _write(rdb, extents)
    for spark_where, _duck in preds:
        both(rdb, f"SELECT svc, code, big, flag, msg, _timestamp_ns, _timestamp FROM {name} "
                  f"WHERE {spark_where}")
        both(rdb, f"SELECT svc, count(*) AS n, max(big) AS b, min(_timestamp) AS t FROM {name} "
                  f"WHERE {spark_where} GROUP BY svc ORDER BY svc", ordered=True)
