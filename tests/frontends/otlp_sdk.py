"""The real OpenTelemetry Python SDK exporters pointed at a test server (HTTP or gRPC)."""

from __future__ import annotations

from typing import Any, Literal

from opentelemetry.sdk.resources import Resource

Transport = Literal["http", "grpc"]
TRANSPORTS: tuple[Transport, ...] = ("http", "grpc")


def resource(service: str, **attrs: Any) -> Resource:
    return Resource.create({"service.name": service, **attrs})


def span_exporter(live: Any, transport: Transport, **kw: Any) -> Any:
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=f"{live.url}/v1/traces", **kw)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as G

    return G(endpoint=live.grpc, insecure=True, **kw)


def log_exporter(live: Any, transport: Transport, **kw: Any) -> Any:
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=f"{live.url}/v1/logs", **kw)
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as G

    return G(endpoint=live.grpc, insecure=True, **kw)


def metric_exporter(live: Any, transport: Transport, **kw: Any) -> Any:
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(endpoint=f"{live.url}/v1/metrics", **kw)
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as G

    return G(endpoint=live.grpc, insecure=True, **kw)
