"""Health, readiness, metrics, backpressure (429) and not-ready (503) over HTTP."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import shoal
from shoal.ingest.buffer import StagingBuffer
from shoal.ingest.write_path import WritePath
from shoal.server import create_app
from tests.server.conftest import create
from tests.support.server import serve_app
from tests.support.waiting import eventually


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text `text` (0 if absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = ",".join(sorted((m.group(2) or "").split(","))) if m.group(2) else ""
        if got == want:
            return float(m.group(3))
    return 0.0


def test_health_and_ready(http):
    r = http.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = http.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready"}


def test_metrics_count_requests_and_ingest(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    before = http.get("/metrics").text
    for _ in range(3):
        assert http.get(f"/v1/tables/{table_name}").status_code == 200
    assert http.get("/v1/tables/nope_nope").status_code == 404
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"n": 1}\n{"n": 2}\n')
    assert r.status_code == 200, r.text
    r = http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    route = "/v1/tables/{table}"
    assert metric(text, "shoal_http_requests_total", method="GET", route=route,
                  status="200") - metric(before, "shoal_http_requests_total", method="GET",
                                         route=route, status="200") == 3
    assert metric(text, "shoal_http_requests_total", method="GET", route=route,
                  status="404") >= 1
    assert metric(text, "shoal_http_requests_total", method="POST",
                  route="/v1/ingest/{table}", status="200") >= 1
    assert metric(text, "shoal_http_request_duration_seconds_count", method="GET",
                  route=route) >= 3
    assert metric(text, "shoal_ingest_rows_total", table=table_name) == 2
    assert metric(text, "shoal_ingest_bytes_total", table=table_name) == 18
    assert metric(text, "shoal_staging_flushes_total") >= 1
    assert metric(text, "shoal_staging_extents_total") >= 1
    assert "shoal_staging_pending_bytes 0.0" in text
    assert "shoal_staging_replays_total" in text
    # Raw paths never become labels.
    assert "nope_nope" not in text


def test_not_accepting_is_503_with_retry_after(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path))
    db.create_table("t", [shoal.Column("n", shoal.LONG)])
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url, httpx.Client(base_url=url) as c:
            app.state.shoal.accepting = False        # what shutdown does first
            r = c.post("/v1/ingest/t", content=b'{"n": 1}\n')
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "not_ready"
            assert c.get("/readyz").status_code == 503
            assert c.get("/healthz").status_code == 200
            app.state.shoal.accepting = True
            assert c.get("/readyz").status_code == 200
        assert db.describe("t")["row_count"] == 0
    finally:
        db.close()


def test_readyz_is_503_when_the_catalog_fails(tmp_path, monkeypatch):
    db = shoal.connect(data_dir=str(tmp_path))
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url, httpx.Client(base_url=url) as c:
            def down(_key):
                raise ConnectionError("catalog is down")
            monkeypatch.setattr(db.catalog, "ledger_get", down)
            r = c.get("/readyz")
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            err = r.json()["error"]
            assert err["code"] == "not_ready" and "catalog is down" in err["message"]
            monkeypatch.undo()
            assert c.get("/readyz").status_code == 200
    finally:
        db.close()


def test_full_staging_buffer_is_429_with_retry_after(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path))
    db.create_table("t", [shoal.Column("n", shoal.LONG)])
    # Test-only wiring: a buffer that holds one request at a time, until the test flushes it
    # (a plain debounce timer, not ended early when no other request is arriving; the
    # debounce is only a hang guard).
    buffer = StagingBuffer(db.catalog, db.coordinator, max_pending_bytes=1, debounce_s=120,
                           retry_after_s=2.5, early_flush=False)
    db._write_path = WritePath(db.catalog, db.coordinator, buffer=buffer)
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            first: list[httpx.Response] = []

            def slow() -> None:
                with httpx.Client(base_url=url, timeout=30) as c:
                    first.append(c.post("/v1/ingest/t", content=b'{"n": 1}\n{"n": 2}\n'))

            t = threading.Thread(target=slow)
            t.start()
            eventually(lambda: buffer.pending_bytes, "the first request to be buffered")
            with httpx.Client(base_url=url, timeout=30) as c:
                r = c.post("/v1/ingest/t", content=b'{"n": 3}\n',
                           headers={"X-Idempotency-Key": "k-429"})
                assert r.status_code == 429, r.text
                assert r.headers["retry-after"] == "3"
                assert r.json()["error"]["code"] == "backpressure"
                buffer.flush("t")             # the first request commits now...
                buffer.debounce_s = 0.0       # ...and later ones at once
                t.join(timeout=30)
                eventually(lambda: buffer.pending_bytes, "the buffer to drain",
                           until=lambda n: n == 0)
                assert first[0].status_code == 200 and first[0].json()["rows"] == 2
                assert "shoal_staging_backpressure_rejections_total 1.0" in c.get(
                    "/metrics").text
                # The refused request wrote nothing, not even its key: a retry goes through.
                r = c.post("/v1/ingest/t", content=b'{"n": 3}\n',
                           headers={"X-Idempotency-Key": "k-429"})
                assert r.status_code == 200 and r.json()["replayed"] is False
        assert db.describe("t")["row_count"] == 3
    finally:
        db.close()


@pytest.mark.slow
def test_64_concurrent_clients(open_server, http, table_name):
    """64 writers at once (more than anyio's default 40 threads): all acked, none lost."""
    create(http, table_name, [{"name": "w", "type": "long"}, {"name": "i", "type": "long"}])
    body = [b"".join(b'{"w": %d, "i": %d}\n' % (w, i) for i in range(50)) for w in range(64)]
    barrier = threading.Barrier(64)

    def write(w: int) -> httpx.Response:
        with open_server.client() as c:
            barrier.wait()
            return c.post(f"/v1/ingest/{table_name}", content=body[w],
                          headers={"X-Idempotency-Key": f"{table_name}-{w}"})

    with ThreadPoolExecutor(64) as pool:
        futures = [pool.submit(write, w) for w in range(64)]
        # The server still answers probes while every ingest thread is busy.
        assert http.get("/readyz").status_code == 200
        results = [f.result(timeout=300) for f in futures]  # hang guard; the wall time of
        # this run is bench/bench_timings.py's figure
    assert [r.status_code for r in results] == [200] * 64, [r.text for r in results][:3]
    assert all(r.json()["rows"] == 50 for r in results)
    doc = http.get(f"/v1/tables/{table_name}").json()
    assert doc["row_count"] == 64 * 50
    assert doc["extent_count"] < 64          # group commit merged concurrent requests


def test_openapi_lists_the_contract(http):
    doc = http.get("/openapi.json").json()
    assert {"/v1/tables", "/v1/tables/{table}", "/v1/tables/{table}/columns",
            "/v1/ingest/{table}", "/healthz", "/readyz", "/metrics"} <= set(doc["paths"])
    body = doc["paths"]["/v1/tables"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/CreateTableRequest"}
    assert "columns" in doc["components"]["schemas"]["CreateTableRequest"]["properties"]
