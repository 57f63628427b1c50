"""`shoal serve`'s extra listeners (Flight SQL, OTLP/gRPC) as a real process: on their
default ports they are best effort (a port another process holds is a warning in the log and
in `/readyz`, and the server serves the rest); a port the user set is required (taken, the
server exits with the reason). The default ports are settings, so the tests occupy an
ephemeral "default" instead of 8815 and 4317, which other software on the machine may
hold."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import adbc_driver_flightsql.dbapi as flight_sql
import httpx
import pytest

from tests.support.server import free_port, start_server

pytestmark = pytest.mark.services


def _held() -> socket.socket:
    """A listening socket on an ephemeral port: another process's listener."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_taken_default_port_is_a_warning_and_the_rest_is_served(tmp_path):
    flight_default = free_port()
    with _held() as otlp_holder:
        otlp_default = otlp_holder.getsockname()[1]
        # "" = unset (start_server turns both listeners off otherwise)
        server = start_server(tmp_path / "data", extra_args=["--lazy-spark"], env={
            "SHOAL_FLIGHT_PORT": "", "SHOAL_OTLP_GRPC_PORT": "",
            "SHOAL_FLIGHT_DEFAULT_PORT": str(flight_default),
            "SHOAL_OTLP_GRPC_DEFAULT_PORT": str(otlp_default),
            "SHOAL_QUERY_ENGINE": "local"})
        try:
            ready = httpx.get(f"{server.url}/readyz", timeout=30)
            assert ready.status_code == 200, ready.text
            body = ready.json()
            assert body["status"] == "ready"
            otlp = body["listeners"]["otlp_grpc"]
            assert otlp["serving"] is False and otlp["required"] is False
            assert f"127.0.0.1:{otlp_default} is taken" in otlp["reason"]
            assert "--otlp-grpc-port" in otlp["reason"]
            assert body["warnings"] == [otlp["reason"]]
            assert body["listeners"]["flight_sql"] == {
                "port": flight_default, "serving": True, "required": False}
            assert otlp["reason"] in server.log()          # and in the log, as a warning
            # the rest serves: HTTP ingest, and Flight SQL on its default port
            r = httpx.post(f"{server.url}/v1/tables", timeout=30, json={
                "name": "logs", "columns": [{"name": "msg", "type": "string"}]})
            assert r.status_code == 201, r.text
            r = httpx.post(f"{server.url}/v1/ingest/logs", content=b'{"msg": "hi"}\n',
                           timeout=30)
            assert r.status_code == 200, r.text
            with flight_sql.connect(f"grpc://127.0.0.1:{flight_default}") as conn, \
                    conn.cursor() as cur:
                cur.execute("SELECT msg FROM logs WHERE msg = ?", parameters=("hi",))
                assert cur.fetchall() == [("hi",)]
        finally:
            server.stop()


def test_a_taken_port_the_user_set_stops_the_server(tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    with _held() as holder:
        port = holder.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "shoal", "--data-dir", str(tmp_path), "serve",
             "--lazy-spark", "--port", str(free_port())],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            env={**base, "SHOAL_FLIGHT_PORT": str(port), "SHOAL_OTLP_GRPC_PORT": "0"})
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == (f"error: cannot bind Flight SQL to 127.0.0.1:{port}: "
                                  "Address already in use; choose another port with "
                                  "--flight-port N, or 0 to turn it off")
