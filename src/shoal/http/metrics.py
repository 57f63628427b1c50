"""Prometheus metrics of one server app, on a registry of its own (no global state).

- `shoal_http_requests_total{method,route,status}` and
  `shoal_http_request_duration_seconds{method,route}`: every HTTP request, labelled by the
  route *template* (`/v1/ingest/{table}`), never the raw path, so label cardinality stays
  bounded; unmatched paths are `<unmatched>`.
- `shoal_ingest_*`: rows, decoded NDJSON bytes, bytes on the wire, rejected lines and
  idempotent replays of successful ingest requests, by table; and
  `shoal_ingest_path_rows_total{table,path}`, the same rows by the path that brought them
  (`rest`: `/v1/ingest`, `otlp`: OTLP/HTTP and OTLP/gRPC). The Kafka and file-drop
  pipelines count theirs in `shoal_kafka_rows_total` / `shoal_filedrop_rows_total`.
- `shoal_staging_*`: read from the write path's `StagingBuffer` at scrape time (pending
  bytes, flushes, extents, rows, commit time, replays, backpressure rejections).

`MetricsMiddleware` is a plain ASGI middleware (no response buffering); it sees the status
of error responses too, including unhandled exceptions (counted as 500).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shoal.ingest.buffer import StagingBuffer

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0)


class ServerMetrics:
    def __init__(self, buffer: Callable[[], StagingBuffer | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("shoal_http_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("shoal_http_request_duration_seconds",
                                 "HTTP request latency by route", ["method", "route"],
                                 buckets=_LATENCY_BUCKETS, registry=r)
        self.ingest_rows = Counter("shoal_ingest_rows", "Rows committed by ingest requests",
                                   ["table"], registry=r)
        self.ingest_path_rows = Counter("shoal_ingest_path_rows",
                                        "Rows committed by ingest requests, by path "
                                        "(rest, otlp)", ["table", "path"], registry=r)
        self.ingest_bytes = Counter("shoal_ingest_bytes",
                                    "NDJSON bytes (after decompression) of ingest requests",
                                    ["table"], registry=r)
        self.ingest_wire_bytes = Counter("shoal_ingest_wire_bytes",
                                         "Request body bytes of ingest requests as received",
                                         ["table"], registry=r)
        self.ingest_rejected_lines = Counter("shoal_ingest_rejected_lines",
                                             "Lines skipped by partial ingest requests",
                                             ["table"], registry=r)
        self.ingest_replays = Counter("shoal_ingest_replays",
                                      "Ingest requests answered from the idempotency ledger",
                                      ["table"], registry=r)
        r.register(_StagingCollector(buffer))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def observe_ingest(self, table: str, *, rows: int, nbytes: int, wire_bytes: int,
                       rejected: int, replayed: bool, path: str) -> None:
        if replayed:
            self.ingest_replays.labels(table).inc()
            return
        self.ingest_rows.labels(table).inc(rows)
        self.ingest_path_rows.labels(table, path).inc(rows)
        self.ingest_bytes.labels(table).inc(nbytes)
        self.ingest_wire_bytes.labels(table).inc(wire_bytes)
        if rejected:
            self.ingest_rejected_lines.labels(table).inc(rejected)


class _StagingCollector(Collector):
    def __init__(self, buffer: Callable[[], StagingBuffer | None]) -> None:
        self._buffer = buffer

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        buf = self._buffer()
        if buf is None:
            return
        s = buf.stats
        yield GaugeMetricFamily("shoal_staging_pending_bytes",
                                "Bytes of coerced rows waiting in the staging buffer",
                                value=buf.pending_bytes)
        for name, doc, value in (
                ("flushes", "Group commits of the staging buffer", s.flushes),
                ("extents", "Extents written by the staging buffer", s.extents),
                ("requests", "Requests committed by the staging buffer", s.requests),
                ("rows", "Rows committed by the staging buffer", s.rows),
                ("written_bytes", "Extent bytes written by the staging buffer", s.bytes),
                ("replays", "Requests answered as idempotent replays at commit", s.replays),
                ("backpressure_rejections", "Submits refused because the buffer was full",
                 s.rejected_backpressure),
                ("commit_seconds", "Seconds spent writing and committing groups",
                 s.commit_seconds)):
            yield CounterMetricFamily(f"shoal_staging_{name}", doc, value=value)


class MetricsMiddleware:
    """Counts and times every HTTP request by route template and final status."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = getattr(scope.get("route"), "path", None) or "<unmatched>"
            self.metrics.observe_request(scope["method"], route, status,
                                         time.perf_counter() - start)
