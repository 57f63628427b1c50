"""`shoal serve` as a real process: the loopback rule, serving, graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import httpx

import shoal
from tests.support.server import start_server
from tests.support.waiting import eventually
import pytest

pytestmark = pytest.mark.services

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    return subprocess.run([*SHOAL, *args], capture_output=True, text=True, timeout=60,
                          env={**base, **(env or {})})


def test_refuses_non_loopback_without_tokens(tmp_path):
    for host in ("0.0.0.0", "::"):
        out = run("--data-dir", str(tmp_path), "serve", "--host", host, "--port", "1")
        assert out.returncode == 1, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"error: refusing to bind to {host} without authentication"), out.stderr
    out = run("--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0",
              env={"SHOAL_TOKENS": "t=superuser"})
    assert out.returncode == 1
    assert out.stderr.strip() == ("error: SHOAL_TOKENS entry 1: unknown scope 'superuser' "
                                  "(expected ingest, query, metrics, admin)")


def test_serve_round_trip_and_graceful_stop(tmp_path):
    data = tmp_path / "data"
    srv = start_server(data, tokens={"tok": ["admin"]})
    try:
        with httpx.Client(base_url=srv.url, timeout=60,
                          headers={"Authorization": "Bearer tok"}) as c:
            assert c.get("/healthz").json() == {"status": "ok"}
            r = c.post("/v1/tables", json={"name": "logs",
                                           "columns": [{"name": "n", "type": "long"}]})
            assert r.status_code == 201, r.text
            assert httpx.get(f"{srv.url}/v1/tables").status_code == 401
            r = c.post("/v1/ingest/logs", content=b'{"n": 1}\n{"n": 2}\n')
            assert r.status_code == 200, r.text
            # A request in flight when SIGTERM arrives (half its body sent) still completes,
            # and its rows are durable once the process has exited.
            big = b"".join(b'{"n": %d}\n' % i for i in range(100_000))
            half_sent, resume = threading.Event(), threading.Event()

            def body():
                yield big[: len(big) // 2]
                half_sent.set()
                resume.wait(30)
                yield big[len(big) // 2:]

            result: list[httpx.Response] = []
            t = threading.Thread(target=lambda: result.append(
                c.post("/v1/ingest/logs", content=body())))
            t.start()
            assert half_sent.wait(30)
            srv.proc.send_signal(signal.SIGTERM)
            eventually(lambda: "Shutting down" in srv.log(), "the server to start shutting down")
            resume.set()
            t.join(timeout=60)
            code = srv.proc.wait(timeout=60)
    finally:
        srv.kill()
    assert code in (0, -signal.SIGTERM), srv.log()
    assert result and result[0].status_code == 200, (result, srv.log())
    assert result[0].json()["rows"] == 100_000
    log = srv.log()
    assert log.index("Shutting down") < log.rindex('"POST /v1/ingest/logs HTTP/1.1" 200')
    assert "Application shutdown complete" in log
    db = shoal.connect(data_dir=str(data))
    try:
        assert db.describe("logs")["row_count"] == 100_002
    finally:
        db.close()
