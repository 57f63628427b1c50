"""`POST /v1/query` with `{"kql": ...}`: the answer as for SQL plus the SQL it ran
as and the render hint, over JSON and Arrow; a syntax error is a 400 naming line and column.
The server runs queries on the embedded engine (no Spark)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.query.conftest import ndjson
from tests.query.kql_corpus import log_rows
from tests.query.test_kql_corpus import LOG_COLUMNS
from tests.server.conftest import _live

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def kql_server(tmp_path_factory):
    for live in _live(tmp_path_factory, "kql-http", query_engine="local"):
        live.db.create_table("logs", LOG_COLUMNS)
        for batch in log_rows():
            live.db.ingest_ndjson("logs", ndjson(batch))
        yield live


def test_kql_over_http_json_and_arrow(kql_server):
    kql = ("logs | where message has 'deadlock' | summarize c = count() by service "
           "| sort by service asc | render columnchart")
    with kql_server.client() as http:
        r = http.post("/v1/query", json={"kql": kql})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert [c["name"] for c in doc["columns"]] == ["service", "c"]
        assert sum(row[1] for row in doc["rows"]) == 6
        assert doc["stats"]["extents_pruned"] == 3 and doc["stats"]["engine"] == "local"
        assert doc["render"] == {"visualization": "columnchart"}
        assert "has(message, 'deadlock')" in doc["sql"]
        assert [row[0] for row in doc["rows"]] == sorted(row[0] for row in doc["rows"])

        a = http.post("/v1/query", json={"kql": kql}, headers={"Accept": ARROW})
        assert a.status_code == 200
        table = pa.ipc.open_stream(a.content).read_all()
        assert table.to_pylist() == [dict(zip(["service", "c"], row, strict=True))
                                     for row in doc["rows"]]
        assert json.loads(a.headers["X-Shoal-Render"]) == {"visualization": "columnchart"}
        assert json.loads(a.headers["X-Shoal-Stats"])["extents_pruned"] == 3


def test_kql_syntax_error_is_a_positioned_400(kql_server):
    with kql_server.client() as http:
        r = http.post("/v1/query", json={"kql": "logs\n| where level === 'x'"})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["code"] == "kql_syntax"
        assert err["details"][0]["line"] == 2
        assert "on line [2,17]" in err["message"]
        both = http.post("/v1/query", json={"kql": "logs", "sql": "SELECT 1"})
        assert both.status_code == 400


def test_ago_reads_the_server_clock(kql_server):
    # the generated rows are from March 2026 (T0): nothing is newer than now - 1h
    with kql_server.client() as http:
        r = http.post("/v1/query", json={"kql": "logs | where _timestamp > ago(1h) | count"})
        assert r.status_code == 200
        assert r.json()["rows"] == [[0]]
        old = http.post("/v1/query", json={"kql": "logs | where _timestamp > "
                                                  "datetime(2026-03-01 05:00) | count"})
        assert old.json()["rows"] == [[199]]
