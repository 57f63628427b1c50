"""`shoal serve` as a real process with OTLP/gRPC on `--otlp-grpc-port`: SDK exporters over
both transports, custom table names from the environment, SIGTERM stops the gRPC server
gracefully, and a port in use fails the startup with a clear error."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import shoal
from tests.frontends.otlp_sdk import resource, span_exporter
from tests.support.server import free_port, start_server


@dataclass
class Endpoints:
    url: str
    grpc: str


@pytest.mark.slow
def test_serve_with_otlp_grpc(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    srv = start_server(data, extra_args=["--lazy-spark", "--otlp-grpc-port", str(port)],
                       env={"SHOAL_OTLP_SPANS_TABLE": "traces_v1"})
    try:
        live = Endpoints(srv.url, f"127.0.0.1:{port}")
        for transport in ("http", "grpc"):
            provider = TracerProvider(resource=resource(f"via-{transport}"))
            provider.add_span_processor(SimpleSpanProcessor(span_exporter(live, transport)))
            provider.get_tracer("t").start_span("hello").end()
            provider.shutdown()
        code = srv.stop()
    finally:
        srv.kill()
    assert code in (0, -signal.SIGTERM), srv.log()
    db = shoal.connect(data_dir=str(data))
    try:
        rows, _ = db.read("traces_v1")
        assert sorted(rows.column("service_name").to_pylist()) == ["via-grpc", "via-http"]
        assert db.describe("traces_v1")["mode"] == "drop"
    finally:
        db.close()


@pytest.mark.services
def test_grpc_port_in_use_fails_startup(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "shoal", "--data-dir", str(tmp_path), "serve",
             "--lazy-spark", "--port", str(free_port()), "--otlp-grpc-port", str(port)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == (f"error: cannot bind OTLP/gRPC to 127.0.0.1:{port}: "
                                  "Address already in use; choose another port with "
                                  "--otlp-grpc-port N, or 0 to turn it off")
