"""The real OpenTelemetry SDK exporters (OTLP/HTTP and OTLP/gRPC) against a running server.

Each test sends logs, spans or metrics with the SDK and reads the standard tables back
through the catalog (pyarrow, no Spark): ids as lowercase hex, times in ns, attributes as
nested JSON reachable by path. One test (marked slow) asks Spark for
`get_json_object(attributes, '$.http.method')`.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.metrics import Observation
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tests.frontends.otlp_sdk import (TRANSPORTS, log_exporter, metric_exporter, resource,
                                      span_exporter)

T0 = 1_767_225_600_123_456_789          # 2026-01-01T00:00:00.123456789Z, in ns


def ns(table: pa.Table, column: str) -> list[int | None]:
    return table.column(column).cast(pa.int64()).to_pylist()


def by(rows: list[dict], key: str) -> dict:
    return {r[key]: r for r in rows}


def doc(raw: bytes | None):
    return None if raw is None else json.loads(raw)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sdk_spans(otlp_server, transport):
    provider = TracerProvider(resource=resource("checkout", **{"deployment.environment": "t"}))
    provider.add_span_processor(SimpleSpanProcessor(span_exporter(otlp_server, transport)))
    tracer = provider.get_tracer("shop.cart", "2.1")
    other = trace.SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7,
                              is_remote=True)
    parent = tracer.start_span("GET /cart", kind=SpanKind.SERVER, start_time=T0, attributes={
        "http.method": "GET", "http.status_code": 200, "http.route": "/cart",
        "sample.ratio": 0.25, "cache.hit": True, "tags": ["a", "b"]})
    parent.add_event("retry", {"attempt": 2}, timestamp=T0 + 1_000)
    child = tracer.start_span("SELECT cart", kind=SpanKind.CLIENT, start_time=T0 + 5_000,
                              context=trace.set_span_in_context(parent),
                              links=[Link(other, {"link.kind": "follows"})])
    child.set_status(Status(StatusCode.ERROR, "boom"))
    child.end(end_time=T0 + 2_000_005_000)
    parent.end(end_time=T0 + 3_000_000_000)
    assert provider.force_flush(10_000)
    provider.shutdown()

    data = otlp_server.rows("otel_spans")
    assert data.num_rows == 2
    rows = by(data.to_pylist(), "name")
    p, c = rows["GET /cart"], rows["SELECT cart"]
    pctx, cctx = parent.get_span_context(), child.get_span_context()
    assert p["trace_id"] == c["trace_id"] == format(pctx.trace_id, "032x")
    assert p["span_id"] == format(pctx.span_id, "016x")
    assert c["span_id"] == format(cctx.span_id, "016x")
    assert c["parent_span_id"] == p["span_id"] and p["parent_span_id"] is None
    starts = dict(zip(data.column("name").to_pylist(), ns(data, "_timestamp")))
    ends = dict(zip(data.column("name").to_pylist(), ns(data, "end_timestamp")))
    assert starts == {"GET /cart": T0, "SELECT cart": T0 + 5_000}
    assert ends == {"GET /cart": T0 + 3_000_000_000, "SELECT cart": T0 + 2_000_005_000}
    assert p["duration_ns"] == 3_000_000_000 and c["duration_ns"] == 2_000_000_000
    assert (p["kind"], c["kind"]) == ("SERVER", "CLIENT")
    assert (p["status_code"], c["status_code"], c["status_message"]) == ("UNSET", "ERROR",
                                                                        "boom")
    assert p["service_name"] == "checkout"
    assert (p["scope_name"], p["scope_version"]) == ("shop.cart", "2.1")
    assert doc(p["attributes"]) == {"http": {"method": "GET", "status_code": 200,
                                             "route": "/cart"},
                                    "sample": {"ratio": 0.25}, "cache": {"hit": True},
                                    "tags": ["a", "b"]}
    res = doc(p["resource"])
    assert res["service"]["name"] == "checkout"
    assert res["deployment"]["environment"] == "t"
    assert res["telemetry"]["sdk"]["language"] == "python"
    assert doc(p["events"]) == [{"timestamp": T0 + 1_000, "name": "retry",
                                 "attributes": {"attempt": 2}}]
    assert p["links"] is None and c["events"] is None
    (link,) = doc(c["links"])
    assert link["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert link["span_id"] == "00f067aa0ba902b7"
    assert link["attributes"] == {"link": {"kind": "follows"}}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sdk_logs(otlp_server, transport):
    provider = LoggerProvider(resource=resource("billing"))
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(log_exporter(otlp_server, transport)))
    logger = provider.get_logger("billing.jobs", "0.3")
    span_ctx = trace.SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7,
                                 is_remote=False, trace_flags=trace.TraceFlags(1))
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(span_ctx))
    logger.emit(timestamp=T0, observed_timestamp=T0 + 7, context=ctx,
                severity_number=SeverityNumber.WARN, severity_text="WARN",
                body="disk almost full",
                attributes={"host.name": "db1", "disk.free_bytes": 1024})
    logger.emit(timestamp=T0 + 1, severity_number=SeverityNumber.INFO, severity_text="INFO",
                body={"order": 17, "items": [1, 2]}, event_name="order.placed")
    assert provider.force_flush(10_000)
    provider.shutdown()

    data = otlp_server.rows("otel_logs")
    assert data.num_rows == 2
    assert sorted(ns(data, "_timestamp")) == [T0, T0 + 1]
    rows = sorted(data.to_pylist(), key=lambda r: r["severity_number"])
    info, warn = rows
    assert warn["body"] == "disk almost full"
    assert (warn["severity_number"], warn["severity_text"]) == (13, "WARN")
    assert warn["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert warn["span_id"] == "00f067aa0ba902b7"
    assert warn["flags"] == 1
    assert doc(warn["attributes"]) == {"host": {"name": "db1"},
                                       "disk": {"free_bytes": 1024}}
    assert warn["service_name"] == "billing"
    assert (warn["scope_name"], warn["scope_version"]) == ("billing.jobs", "0.3")
    observed = dict(zip(data.column("severity_number").to_pylist(),
                        ns(data, "observed_timestamp")))
    assert observed[13] == T0 + 7
    assert json.loads(info["body"]) == {"order": 17, "items": [1, 2]}
    assert info["event_name"] == "order.placed"
    assert info["trace_id"] is None and info["span_id"] is None
    assert info["severity_number"] == 9


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sdk_metrics(otlp_server, transport):
    reader = PeriodicExportingMetricReader(metric_exporter(otlp_server, transport),
                                           export_interval_millis=3_600_000)
    provider = MeterProvider(
        metric_readers=[reader], resource=resource("api"),
        views=[View(instrument_name="payload.size",
                    aggregation=ExponentialBucketHistogramAggregation(max_size=20))])
    meter = provider.get_meter("api.metrics", "1.0")
    requests = meter.create_counter("http.requests", unit="1", description="requests served")
    requests.add(5, {"http.route": "/a"})
    requests.add(3, {"http.route": "/a"})
    requests.add(1, {"http.route": "/b"})
    inflight = meter.create_up_down_counter("http.inflight")
    inflight.add(4)
    inflight.add(-1)
    latency = meter.create_histogram("http.latency", unit="ms")
    for v in (3.0, 7.0, 120.0):
        latency.record(v, {"http.route": "/a"})
    size = meter.create_histogram("payload.size", unit="By")
    for v in (1.0, 2.0, 4.0, 1000.0):
        size.record(v)
    meter.create_observable_gauge("cpu.temp", callbacks=[
        lambda _options: [Observation(42.5, {"cpu": 0})]])
    provider.shutdown()          # one final collection, exported once

    data = otlp_server.rows("otel_metrics")
    rows = data.to_pylist()
    assert all(r["service_name"] == "api" for r in rows)
    assert all(r["scope_name"] == "api.metrics" for r in rows)
    assert all(t is not None and t > T0 for t in ns(data, "_timestamp"))
    counter = {doc(r["attributes"])["http"]["route"]: r for r in rows
               if r["name"] == "http.requests"}
    assert set(counter) == {"/a", "/b"}
    a = counter["/a"]
    assert (a["metric_type"], a["aggregation_temporality"], a["is_monotonic"]) == \
        ("sum", "CUMULATIVE", True)
    assert (a["value"], counter["/b"]["value"]) == (8.0, 1.0)
    assert (a["unit"], a["description"]) == ("1", "requests served")
    (ud,) = [r for r in rows if r["name"] == "http.inflight"]
    assert (ud["metric_type"], ud["is_monotonic"], ud["value"]) == ("sum", False, 3.0)
    (h,) = [r for r in rows if r["name"] == "http.latency"]
    assert h["metric_type"] == "histogram" and h["value"] is None
    assert (h["count"], h["sum"], h["min"], h["max"]) == (3, 130.0, 3.0, 120.0)
    bounds, counts = doc(h["explicit_bounds"]), doc(h["bucket_counts"])
    assert len(counts) == len(bounds) + 1 and sum(counts) == 3
    assert counts[bounds.index(5.0)] == 1          # 3.0 is in (0, 5]
    (e,) = [r for r in rows if r["name"] == "payload.size"]
    assert e["metric_type"] == "exponential_histogram"
    assert (e["count"], e["sum"], e["min"], e["max"]) == (4, 1007.0, 1.0, 1000.0)
    exp = doc(e["exponential"])
    assert sum(exp["positive"]["bucket_counts"]) + exp["zero_count"] == 4
    assert isinstance(exp["scale"], int)
    (g,) = [r for r in rows if r["name"] == "cpu.temp"]
    assert (g["metric_type"], g["value"], g["aggregation_temporality"]) == ("gauge", 42.5,
                                                                           None)
    assert doc(g["attributes"]) == {"cpu": 0}


@pytest.mark.slow
def test_attributes_reachable_by_path_in_spark(make_otlp_server):
    """Spark SQL reaches nested attributes by path, and ids/times come back as stored."""
    with make_otlp_server(spark_master="local[2]") as live:
        provider = TracerProvider(resource=resource("web"))
        provider.add_span_processor(SimpleSpanProcessor(span_exporter(live, "http")))
        tracer = provider.get_tracer("web")
        for method in ("GET", "POST", "GET"):
            tracer.start_span(f"{method} /x", start_time=T0,
                              attributes={"http.method": method}).end(end_time=T0 + 10)
        provider.shutdown()
        got = live.db.query(
            "SELECT name, trace_id, duration_ns, get_json_object(resource, '$.service.name') "
            "AS svc FROM otel_spans WHERE get_json_object(attributes, '$.http.method') = 'GET'")
    assert got.num_rows == 2
    assert set(got.column("name").to_pylist()) == {"GET /x"}
    assert set(got.column("svc").to_pylist()) == {"web"}
    assert set(got.column("duration_ns").to_pylist()) == {10}
    assert all(len(t) == 32 and int(t, 16) for t in got.column("trace_id").to_pylist())
