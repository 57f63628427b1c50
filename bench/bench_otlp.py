"""OTLP benchmark: spans/s over OTLP/HTTP and OTLP/gRPC, beside REST NDJSON, in one run.

    .venv/bin/python bench/bench_otlp.py [--spans 80000] [--exporters 8] [--batch 512]

One `shoal serve` process (embedded SQLite + local store, Spark lazy so it does not compete
for the 2 cores) serves all three paths. The bench process plays the clients:

1. OTLP/HTTP: `--exporters` threads, each with its own real SDK `OTLPSpanExporter`
   (opentelemetry-exporter-otlp-proto-http, protobuf), calling `export()` with batches of
   `--batch` spans (the SDK's default batch size) until all spans are sent;
2. OTLP/gRPC: the same with the gRPC exporter;
3. the same two transports with the requests encoded beforehand (protobuf bodies posted by
   httpx clients / sent on raw gRPC channels): the server's share alone, since the SDK's
   own encoding (pure Python, ~100 us a span) runs on the same 2 cores in 1-2;
4. REST: the same spans as the rows OTLP produces (same columns and values, `dynamic`
   columns as JSON objects), as NDJSON bodies of `--batch` rows posted to
   `/v1/ingest/spans_rest` by `--exporters` httpx clients (bodies encoded beforehand too).

Each call returns once its rows are committed, so spans/s is durable throughput. The spans
(realistic: HTTP server/client spans, 7 attributes, a resource of 6 attributes, 1 in 10 with
an event, 1 in 20 with an error status) are made once with the SDK before timing; the
exporters' own protobuf encoding is part of the measured client work, as it would be on a
2-core box running the exporters beside the server.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUTES = [f"/api/v1/{w}" for w in ("cart", "orders", "users", "search", "payments", "items")]


def make_spans(n: int) -> list[Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, Status, StatusCode

    rng = random.Random(7)
    spans: list[Any] = []
    services = [f"svc-{i}" for i in range(8)]
    per_service = -(-n // len(services))
    for svc in services:
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({
            "service.name": svc, "service.version": "1.4.2", "host.name": f"{svc}-host",
            "deployment.environment": "prod"}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("bench.http", "1.0")
        for i in range(per_service):
            route = rng.choice(ROUTES)
            server = i % 2 == 0
            s = tracer.start_span(f"{'GET' if server else 'POST'} {route}",
                                  kind=SpanKind.SERVER if server else SpanKind.CLIENT,
                                  attributes={
                                      "http.method": "GET" if server else "POST",
                                      "http.route": route,
                                      "http.status_code": rng.choice((200, 200, 201, 404)),
                                      "net.peer.name": f"10.0.{rng.randint(0, 255)}.1",
                                      "user.id": rng.randint(1, 100_000),
                                      "http.request_content_length": rng.randint(0, 4096),
                                      "cache.hit": rng.random() < 0.3})
            if i % 10 == 0:
                s.add_event("retry", {"attempt": 1})
            if i % 20 == 0:
                s.set_status(Status(StatusCode.ERROR, "upstream timeout"))
            s.end()
        provider.shutdown()
        spans.extend(memory.get_finished_spans())
    return spans[:n]


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def run_clients(work: list[Any], clients: int, make: Callable[[], Callable[[Any], None]]
                ) -> tuple[float, list[float]]:
    """`clients` threads, each with its own client from `make`, drain `work`."""
    queue = list(range(len(work)))
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[BaseException] = []
    ready = threading.Barrier(clients + 1)

    def client() -> None:
        try:
            send = make()
        finally:
            ready.wait()
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    i = queue.pop()
                t = time.perf_counter()
                send(work[i])
                with lock:
                    latencies.append(time.perf_counter() - t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return dt, sorted(latencies)


def otlp(exporter_cls: Callable[[], Any]) -> Callable[[], Callable[[Any], None]]:
    from opentelemetry.sdk.trace.export import SpanExportResult

    def make() -> Callable[[Any], None]:
        exporter = exporter_cls()

        def send(batch: Any) -> None:
            result = exporter.export(batch)
            if result is not SpanExportResult.SUCCESS:
                raise RuntimeError(f"export failed: {result}")
        return send
    return make


def ndjson_bodies(span_batches: list[Sequence[Any]]) -> list[bytes]:
    """The rows OTLP makes of each batch, as NDJSON (dynamic columns as JSON values)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from shoal.frontends.otlp.mapping import map_spans
    from shoal.frontends.otlp.schemas import SPANS_SCHEMA

    dynamic = {c.name for c in SPANS_SCHEMA.columns if c.type.kind == "dynamic"}
    stamps = {c.name for c in SPANS_SCHEMA.columns if c.type.kind == "timestamp"}
    bodies = []
    for batch in span_batches:
        rows = map_spans(encode_spans(batch)).batch
        ints = {n: rows.column(n).cast("int64").to_pylist() for n in stamps}
        lines = []
        for i, row in enumerate(rows.to_pylist()):
            doc = {k: (json.loads(v) if k in dynamic and v is not None
                       else ints[k][i] if k in stamps else v) for k, v in row.items()}
            lines.append(json.dumps(doc, separators=(",", ":")))
        bodies.append(("\n".join(lines) + "\n").encode())
    return bodies


def pct(latencies: list[float], q: float) -> float:
    return latencies[max(0, int(len(latencies) * q) - 1)] * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=80_000)
    ap.add_argument("--exporters", type=int, default=8)
    ap.add_argument("--batch", type=int, default=512)
    args = ap.parse_args()

    import grpc
    import httpx
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter)

    from shoal.frontends.otlp.schemas import SPANS_SCHEMA
    from tests.support.server import free_port, start_server

    t = time.perf_counter()
    spans = make_spans(args.spans)
    span_batches = batches(spans, args.batch)
    bodies = ndjson_bodies(span_batches)
    otlp_bodies = [encode_spans(b).SerializeToString() for b in span_batches]
    prep = time.perf_counter() - t
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-otlp-"))
    grpc_port = free_port()
    server = start_server(work / "data", extra_args=["--lazy-spark", "--otlp-grpc-port",
                                                     str(grpc_port)])
    results: list[tuple[str, float, list[float]]] = []
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            cols = [{"name": c.name, "type": str(c.type)} for c in SPANS_SCHEMA.user_columns]
            r = http.post("/v1/tables", json={"name": "spans_rest", "columns": cols,
                                              "mode": "drop"})
            assert r.status_code == 201, r.text
        dt, lat = run_clients(span_batches, args.exporters, otlp(
            lambda: HttpExporter(endpoint=f"{server.url}/v1/traces", timeout=120)))
        results.append(("OTLP/HTTP (protobuf), SDK exporters", dt, lat))
        dt, lat = run_clients(span_batches, args.exporters, otlp(
            lambda: GrpcExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True,
                                 timeout=120)))
        results.append(("OTLP/gRPC, SDK exporters", dt, lat))

        def http_client(path: str, headers: dict[str, str]
                        ) -> Callable[[], Callable[[bytes], None]]:
            def make() -> Callable[[bytes], None]:
                http = httpx.Client(base_url=server.url, timeout=120, headers=headers)

                def send(body: bytes) -> None:
                    r = http.post(path, content=body)
                    assert r.status_code == 200, r.text
                return send
            return make

        def grpc_client() -> Callable[[bytes], None]:
            channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
            call = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            return lambda body: call(body, timeout=120)

        dt, lat = run_clients(otlp_bodies, args.exporters, http_client(
            "/v1/traces", {"Content-Type": "application/x-protobuf"}))
        results.append(("OTLP/HTTP, pre-encoded protobuf (httpx)", dt, lat))
        dt, lat = run_clients(otlp_bodies, args.exporters, grpc_client)
        results.append(("OTLP/gRPC, pre-encoded protobuf (grpc channel)", dt, lat))

        dt, lat = run_clients(bodies, args.exporters, http_client(
            "/v1/ingest/spans_rest", {"Content-Type": "application/x-ndjson"}))
        results.append(("REST NDJSON, same rows, pre-encoded (httpx)", dt, lat))
        with httpx.Client(base_url=server.url, timeout=120) as http:
            counts = {t: http.get(f"/v1/tables/{t}").json()["row_count"]
                      for t in ("otel_spans", "spans_rest")}
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = len(spans)
    assert counts == {"otel_spans": 4 * n, "spans_rest": n}, counts
    ndjson_mb = sum(len(b) for b in bodies) / 1e6
    pb_mb = sum(len(b) for b in otlp_bodies) / 1e6
    print(f"## {n:,} spans, {args.exporters} concurrent clients, {len(span_batches)} requests "
          f"of {args.batch} spans per path ({sys.platform}, 2 cores, server and clients on "
          "the same machine)")
    print("| path | spans/s | vs REST | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    rest_rate = n / results[-1][1]
    for name, dt, lat in results:
        print(f"| {name} | {n / dt:,.0f} | {n / dt / rest_rate:.2f}x | "
              f"{statistics.median(lat) * 1000:.0f} | {pct(lat, 0.99):.0f} |")
    print(f"\nBodies: OTLP protobuf {pb_mb:,.1f} MB ({pb_mb * 1e6 / n:,.0f} B/span), REST "
          f"NDJSON {ndjson_mb:,.1f} MB ({ndjson_mb * 1e6 / n:,.0f} B/span); "
          f"spans prepared in {prep:.1f}s (not timed); rows checked: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
