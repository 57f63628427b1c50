"""`POST /v1/query` over a real socket: DDL and SELECT, the JSON answer with its pruning
stats, the Arrow IPC stream, errors, and scopes (query for reading, admin for DDL)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.server.conftest import ADMIN, INGEST, QUERY

pytestmark = pytest.mark.services

ARROW = "application/vnd.apache.arrow.stream"


def _ndjson(rows):
    return "\n".join(json.dumps(r) for r in rows).encode()


@pytest.fixture(scope="module", autouse=True)
def warm_spark(open_server, auth_server):
    """Spark starts once per process (seconds); no request below should pay for it."""
    open_server.db.query_engine.warm_up()
    auth_server.db.query_engine.warm_up()


@pytest.fixture(scope="module")
def hits(open_server):
    with open_server.client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "CREATE TABLE hits (service string, status int, "
                                              "raw bytes, emb vector(2)) "
                                              "WITH (retention='7d', owner='web-team')"})
        assert r.status_code == 200, r.text
        for k, svc in enumerate(["api", "web", "db"]):
            body = _ndjson([{"_timestamp": f"2026-03-01T0{k}:00:0{i}.5Z", "service": svc,
                             "status": 200 + i, "emb": [i, -i]} for i in range(4)])
            assert c.post("/v1/ingest/hits", content=body).status_code == 200
    return "hits"


def test_select_answers_json_with_columns_rows_and_stats(open_server, hits):
    with open_server.client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "SELECT service, status, _timestamp, emb FROM hits "
                                             "WHERE service = 'web' ORDER BY status"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["columns"] == [{"name": "service", "type": "string"},
                              {"name": "status", "type": "int"},
                              {"name": "_timestamp", "type": "timestamp"},
                              {"name": "emb", "type": "array<float>"}]
    assert doc["rows"][0] == ["web", 200, "2026-03-01T01:00:00.500000Z", [0.0, 0.0]]
    assert len(doc["rows"]) == 4
    stats = doc["stats"]
    assert (stats["extents_considered"], stats["extents_pruned"], stats["extents_read"]) == (
        3, 2, 1)
    assert stats["bytes_read"] > 0 and stats["scans"][0]["table"] == "hits"


def test_arrow_stream_answer(open_server, hits):
    with open_server.client(timeout=120, headers={"Accept": ARROW}) as c:
        r = c.post("/v1/query", json={"sql": "SELECT service, count(*) AS n FROM hits "
                                             "GROUP BY service ORDER BY service"})
    assert r.status_code == 200 and r.headers["content-type"] == ARROW
    table = pa.ipc.open_stream(r.content).read_all()
    assert table.to_pylist() == [{"service": s, "n": 4} for s in ("api", "db", "web")]
    assert json.loads(r.headers["x-shoal-stats"])["extents_read"] == 3


def test_ddl_over_http_describe_and_show(open_server, hits):
    with open_server.client(timeout=120) as c:
        d = c.post("/v1/query", json={"sql": "DESCRIBE hits"}).json()
        names = [row[0] for row in d["rows"]]
        assert names[:2] == ["_timestamp", "props"] and "emb" in names
        t = c.get("/v1/tables/hits").json()
        assert t["retention"] == "7d" and t["properties"]["owner"] == "web-team"
        shown = c.post("/v1/query", json={"sql": "SHOW TABLES"}).json()
        assert "hits" in [row[0] for row in shown["rows"]]


def test_errors_are_json_with_status(open_server, hits):
    with open_server.client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "SELECT * FROM missing_table"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "table_not_found"
        r = c.post("/v1/query", json={"sql": "SELEC nope"})
        assert r.status_code == 400 and "syntax" in r.json()["error"]["message"].lower()
        r = c.post("/v1/query", json={"sql": "SELECT nope FROM hits"})
        assert r.status_code == 400 and "nope" in r.json()["error"]["message"]
        r = c.post("/v1/query", json={"kql": "hits | take 1 |"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "kql_syntax"
        r = c.post("/v1/query", json={"sql": "SELECT 1", "kql": "hits | take 1"})
        assert r.status_code == 400
        r = c.post("/v1/query", content=b"not json",
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        r = c.post("/v1/query", json={"sql": "CREATE TABLE h2 (a bytes HEADERS)"})
        assert r.status_code == 400 and "HEADERS" in r.json()["error"]["message"]


def test_header_columns_are_refused_on_rest_ingest(open_server):
    with open_server.client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "CREATE TABLE kt (n int, tenant bytes "
                                              "HEADER('tenant'))"})
        assert r.status_code == 200, r.text
        r = c.post("/v1/ingest/kt", content=b'{"n": 1, "tenant": "x"}\n')
        assert r.status_code == 400
        assert "Kafka header column" in r.json()["error"]["details"][0]["message"]
        assert c.get("/v1/tables/kt").json()["row_count"] == 0


def test_query_and_admin_scopes(auth_server):
    create = {"sql": "CREATE TABLE scoped (n int)"}
    with auth_server.client(timeout=120) as c:
        assert c.post("/v1/query", json={"sql": "SELECT 1"}).status_code == 401
    with auth_server.client(timeout=120, token=QUERY) as c:
        assert c.post("/v1/query", json=create).status_code == 403
    with auth_server.client(timeout=120, token=INGEST) as c:
        assert c.post("/v1/query", json={"sql": "SELECT 1"}).status_code == 403
    with auth_server.client(timeout=120, token=ADMIN) as c:
        assert c.post("/v1/query", json=create).status_code == 200
    with auth_server.client(timeout=120, token=QUERY) as c:
        r = c.post("/v1/query", json={"sql": "SELECT count(*) AS n FROM scoped"})
        assert r.status_code == 200 and r.json()["rows"] == [[0]]
