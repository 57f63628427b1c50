"""SQL through the planner and Spark on real extents: the query shapes that break naive
Python-DataSource pushdown, schema versions, time travel, dynamic paths, vectors, ns time."""

from __future__ import annotations

import math
import time

import pyarrow as pa
import pytest

from shoal.errors import QueryError, SnapshotNotFoundError, TableNotFoundError
from shoal.types import DYNAMIC, LONG, STRING, Column, vector
from tests.query.conftest import T0, ndjson, ns, rows_at, sorted_rows


@pytest.fixture
def logs(db):
    """4 extents, one per service, 50 rows each; status = 200 + i % 5."""
    db.create_table("logs", [Column("service", STRING), Column("status", LONG),
                             Column("msg", STRING)])
    for k, svc in enumerate(["api", "web", "db", "auth"]):
        db.ingest_ndjson("logs", ndjson(rows_at(10 * k, 50, service=svc,
                                                status=lambda i: 200 + i % 5,
                                                msg=lambda i, s=svc: f"{s} request {i}")))
    return db


def one(db, sql, **kw):
    return db.sql(sql, **kw)


def test_self_join_sees_each_side_with_its_own_filter(logs):
    r = one(logs, "SELECT count(*) AS n FROM logs a JOIN logs b ON a.status = b.status "
                  "WHERE a.service = 'api' AND b.service = 'web'")
    assert r.table.to_pylist() == [{"n": 5 * 10 * 10}]      # 5 statuses x 10 x 10 rows
    scans = r.stats.to_json()["scans"]
    assert [s["extents_read"] for s in scans] == [1, 1]


def test_count_star_beside_a_filtered_count(logs):
    r = one(logs, "SELECT count(*) AS total, "
                  "(SELECT count(*) FROM logs WHERE service = 'db') AS db FROM logs")
    assert r.table.to_pylist() == [{"total": 200, "db": 50}]


def test_uncorrelated_and_correlated_subqueries(logs):
    r = one(logs, "SELECT service, count(*) AS n FROM logs WHERE status = "
                  "(SELECT max(status) FROM logs WHERE service = 'api') GROUP BY service "
                  "ORDER BY service")
    assert r.table.to_pylist() == [{"service": s, "n": 10} for s in
                                   ["api", "auth", "db", "web"]]
    r = one(logs, "SELECT o.service, count(*) AS n FROM logs o WHERE o.status > "
                  "(SELECT min(i.status) FROM logs i WHERE i.service = o.service "
                  "AND i.msg LIKE '% request 3') GROUP BY o.service ORDER BY o.service")
    # per service the inner min is 203 (rows 3, 13, 23...: 200 + 3): statuses 204 only
    assert r.table.to_pylist() == [{"service": s, "n": 10} for s in
                                   ["api", "auth", "db", "web"]]
    r = one(logs, "SELECT count(*) AS n FROM logs WHERE service IN "
                  "(SELECT service FROM logs WHERE msg = 'web request 7')")
    assert r.table.to_pylist() == [{"n": 50}]


def test_union_all_of_two_filtered_scans_of_one_table(logs):
    r = one(logs, "SELECT service FROM logs WHERE service = 'api' UNION ALL "
                  "SELECT service FROM logs WHERE service = 'db' AND status = 201")
    got = r.table.column("service").to_pylist()
    assert got.count("api") == 50 and got.count("db") == 10 and len(got) == 60


def test_pruning_never_changes_answers_and_is_reported(logs):
    sql = ("SELECT service, status, count(*) AS n FROM logs WHERE service IN ('web', 'auth') "
           "AND status >= 203 GROUP BY service, status")
    cold = one(logs, sql)          # stage 2 reads candidate footers once, then caches them
    pruned, full = one(logs, sql), one(logs, sql, prune=False)
    assert cold.stats.to_json()["bytes_read"] > pruned.stats.to_json()["bytes_read"]
    assert sorted_rows(pruned.table) == sorted_rows(full.table) != []
    p, f = pruned.stats.to_json(), full.stats.to_json()
    assert (p["extents_considered"], p["extents_read"]) == (4, 2)
    assert (f["extents_considered"], f["extents_read"]) == (4, 4)
    assert 0 < p["bytes_read"] < f["bytes_read"]


def test_schema_versions_read_with_nulls_and_widened_values(db):
    db.create_table("ev", [Column("code", STRING)])
    db.ingest_ndjson("ev", ndjson(rows_at(0, 3, code="a")))                       # v1
    db.sql("ALTER TABLE ev ADD COLUMN n int")
    db.ingest_ndjson("ev", ndjson(rows_at(1, 3, code="b", n=lambda i: i + 1)))   # v2
    db.sql("ALTER TABLE ev ALTER COLUMN n TYPE long")                             # widen
    db.ingest_ndjson("ev", ndjson(rows_at(2, 3, code="c", n=lambda i: 2**40 + i)))
    assert db.describe("ev")["schema_version"] >= 3
    r = db.query("SELECT code, n FROM ev ORDER BY _timestamp")
    assert r.schema.field("n").type == pa.int64()
    assert r.to_pylist() == (
        [{"code": "a", "n": None}] * 3 + [{"code": "b", "n": i + 1} for i in range(3)]
        + [{"code": "c", "n": 2**40 + i} for i in range(3)])
    # a pushed filter on the widened column still finds old (int) and new (long) rows
    assert db.query("SELECT count(*) AS c FROM ev WHERE n >= 2").to_pylist() == [{"c": 5}]


def test_time_travel_by_version_and_timestamp(logs):
    snaps = logs.catalog.snapshots("logs")
    first_data = min(s.snapshot_id for s in snaps if s.operation != "create")
    r = one(logs, f"SELECT count(*) AS n FROM logs VERSION AS OF {first_data}")
    assert r.table.to_pylist() == [{"n": 50}]
    # The cut: the commit time of the newest snapshot (rounded up to the microsecond that
    # TIMESTAMP AS OF takes); the late rows commit after it.
    cut_us = math.ceil(max(s.created_at for s in logs.catalog.snapshots("logs")) * 1e6)
    logs.ingest_ndjson("logs", ndjson(rows_at(99, 7, service="late", status=1, msg="x")))
    assert max(s.created_at for s in logs.catalog.snapshots("logs")) * 1e6 > cut_us
    when = (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cut_us // 1_000_000))
            + f".{cut_us % 1_000_000:06d}Z")
    r = one(logs, f"SELECT count(*) AS n FROM logs TIMESTAMP AS OF '{when}'")
    assert r.table.to_pylist() == [{"n": 200}]
    assert one(logs, "SELECT count(*) AS n FROM logs").table.to_pylist() == [{"n": 207}]
    df = logs.spark_table("logs", version=first_data)
    assert df.count() == 50
    with pytest.raises(SnapshotNotFoundError):
        one(logs, "SELECT * FROM logs VERSION AS OF 999")


def test_dynamic_paths_vectors_and_nanosecond_time(db):
    db.create_table("spans", [Column("name", STRING), Column("emb", vector(3)),
                              Column("attrs", DYNAMIC)])
    t = ns(T0) + 123_456_789
    body = ndjson([
        {"_timestamp": t, "name": "GET /a", "emb": [1.0, 2.0, 3.5],
         "attrs": {"http": {"method": "GET", "status": 200}}},
        {"_timestamp": t + 1, "name": "POST /b", "emb": [0.5, 0, -1],
         "attrs": {"http": {"method": "POST"}}},
    ])
    db.ingest_ndjson("spans", body)
    r = db.query("SELECT name, get_json_object(attrs, '$.http.method') AS m, "
                 "get_json_object(attrs, '$.http.status') AS s, emb, _timestamp_ns, "
                 "_timestamp FROM spans ORDER BY _timestamp_ns")
    rows = r.to_pylist()
    assert [(x["name"], x["m"], x["s"]) for x in rows] == [("GET /a", "GET", "200"),
                                                          ("POST /b", "POST", None)]
    assert rows[0]["emb"] == [1.0, 2.0, 3.5]
    assert [x["_timestamp_ns"] for x in rows] == [t, t + 1]     # ns survive Spark's µs
    assert rows[0]["_timestamp"].microsecond == 123_456
    r = db.sql("SELECT name FROM spans WHERE get_json_object(attrs, '$.http.status') = '200'")
    assert r.table.to_pylist() == [{"name": "GET /a"}]
    r = db.sql("SELECT count(*) AS n FROM spans WHERE get_json_object(attrs, '$.nope.x') "
               "IS NOT NULL")
    assert r.table.to_pylist() == [{"n": 0}]
    assert r.stats.to_json()["extents_read"] == 0      # no extent has that path


def test_has_matches_whole_tokens_only(logs):
    r = one(logs, "SELECT count(*) AS n FROM logs WHERE has(msg, 'REQUEST') AND "
                  "has(msg, 'api')")
    assert r.table.to_pylist() == [{"n": 50}]
    r = one(logs, "SELECT count(*) AS n FROM logs WHERE has(msg, 'requests')")
    assert r.table.to_pylist() == [{"n": 0}]


def test_explain_reports_scans_without_running(logs):
    r = one(logs, "EXPLAIN SELECT * FROM logs a JOIN logs b ON a.msg = b.msg "
                  "WHERE a.service = 'api'")
    assert r.kind == "explain"
    rows = r.table.to_pylist()
    assert [(x["alias"], x["extents_read"]) for x in rows] == [("a", 1), ("b", 4)]


def test_errors_are_precise(logs):
    with pytest.raises(TableNotFoundError, match='"nope"'):
        one(logs, "SELECT * FROM nope")
    with pytest.raises(QueryError, match="syntax"):
        one(logs, "SELEC 1")
    with pytest.raises(QueryError, match="no_such_col|UNRESOLVED_COLUMN"):
        one(logs, "SELECT no_such_col FROM logs")


def test_spark_dataframe_api(logs):
    df = logs.spark_sql("SELECT service, status FROM logs WHERE service = 'auth'")
    assert df.count() == 50
    assert {r.service for r in df.collect()} == {"auth"}
    assert logs.spark_table("logs").count() == 200
