"""OTLP/gRPC: the standard `LogsService`, `TraceService` and `MetricsService` `Export` calls.

A grpcio server on its own port (default 4317) with a thread pool; each call blocks its
thread until the rows are committed, like an HTTP request. Requests arrive as raw bytes and
are parsed by `codec.decode_request`, so a malformed message is `INVALID_ARGUMENT` with a
precise message (not grpcio's generic deserialization failure), and both frontends share
one decoding path. gzip compression is handled by gRPC itself. Like OTLP/HTTP
(`http.py`) this edge takes the tokens and the status table from `shoal.http`; decoding,
mapping and the write are the frontend's (`shoal.frontends.otlp`).

Metadata: `authorization: Bearer <token>` (the `ingest` scope, when tokens are configured)
and `x-idempotency-key`. Errors map through the server's one status table and
`codec.GRPC_CODE_BY_STATUS`: malformed -> `INVALID_ARGUMENT`, auth -> `UNAUTHENTICATED` /
`PERMISSION_DENIED`, staging buffer full -> `RESOURCE_EXHAUSTED` with a
`google.rpc.RetryInfo` delay (what makes exporters retry it), starting/stopping ->
`UNAVAILABLE` (always retried).

`start()` binds (a port in use is a `ConfigError`, never a silent shared port: SO_REUSEPORT
is off) and returns the bound port; `stop()` refuses new calls and lets running ones finish
within the grace period.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from shoal.errors import BackpressureError, ConfigError, ShoalError
from shoal.frontends.otlp.codec import (GRPC_CODE_BY_STATUS, GRPC_INTERNAL, decode_request,
                                        encode_response)
from shoal.frontends.otlp.schemas import Signal
from shoal.frontends.otlp.sink import ExportResult, OtlpSink, check_idempotency_key
from shoal.http.auth import TokenTable, bearer_of
from shoal.http.errors import NotReadyError, status_for

log = logging.getLogger("shoal.server")

SERVICES: dict[Signal, str] = {
    "logs": logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
    "traces": trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    "metrics": metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name,
}
_STATUS_CODES = {c.value[0]: c for c in grpc.StatusCode}

Observer = Callable[[ExportResult, int], None]   # (result, request bytes)


class OtlpGrpcServer:
    def __init__(self, sink: OtlpSink, *, host: str = "127.0.0.1", port: int = 4317,
                 tokens: TokenTable | None = None, max_workers: int = 64,
                 max_message_bytes: int = 64 << 20,
                 accepting: Callable[[], bool] = lambda: True,
                 observe: Observer | None = None) -> None:
        self.sink = sink
        self.host = host
        self.port = port
        self.tokens = tokens or TokenTable()
        self.max_workers = max_workers
        self.max_message_bytes = max_message_bytes
        self.accepting = accepting
        self.observe = observe
        self._server: grpc.Server | None = None
        self.bound_port: int | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def start(self) -> int:
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self.max_workers,
                               thread_name_prefix="shoal-otlp-grpc"),
            handlers=[self._service(signal) for signal in SERVICES],
            options=[("grpc.so_reuseport", 0),
                     ("grpc.max_receive_message_length", self.max_message_bytes)])
        try:
            port = server.add_insecure_port(self.address)
        except RuntimeError:
            port = 0
        if not port:
            server.stop(None)
            raise ConfigError(f"cannot bind OTLP/gRPC to {self.address} (port in use?); "
                              "choose another with --otlp-grpc-port N, or 0 to turn it off")
        server.start()
        self._server = server
        self.bound_port = port
        return port

    def stop(self, grace_s: float = 5.0) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace_s).wait(grace_s + 1)

    # ---- calls ---------------------------------------------------------------------------
    def _service(self, signal: Signal) -> grpc.GenericRpcHandler:
        def export(request: bytes, context: grpc.ServicerContext) -> bytes:
            return self._export(signal, request, context)

        handler = grpc.unary_unary_rpc_method_handler(export)  # raw bytes in and out
        return grpc.method_handlers_generic_handler(SERVICES[signal], {"Export": handler})

    def _export(self, signal: Signal, request: bytes, context: grpc.ServicerContext) -> bytes:
        metadata = {k.lower(): v for k, v in context.invocation_metadata()}
        try:
            if self.tokens.enabled:
                self.tokens.allows(_bearer(metadata.get("authorization")), "ingest")
            if not self.accepting():
                raise NotReadyError("the server is starting or shutting down; retry shortly")
            key = check_idempotency_key(_text(metadata.get("x-idempotency-key")))
            msg = decode_request(signal, request, "protobuf")
            result = self.sink.export(signal, msg, idempotency_key=key)
        except ShoalError as e:
            self._abort(context, e)
        if self.observe is not None and (result.rows or result.rejected):
            self.observe(result, len(request))
        return encode_response(signal, "protobuf", rejected=result.rejected,
                               message=result.message)

    def _abort(self, context: grpc.ServicerContext, exc: ShoalError) -> NoReturn:
        status = status_for(exc)
        code = _STATUS_CODES[GRPC_CODE_BY_STATUS.get(status, GRPC_INTERNAL)]
        if isinstance(exc, (BackpressureError, NotReadyError)):
            delay = Duration()
            delay.FromNanoseconds(int(exc.retry_after_s * 1e9))
            context.set_trailing_metadata(
                (("google.rpc.retryinfo-bin", RetryInfo(retry_delay=delay).SerializeToString()),))
        elif status >= 500:
            log.error("OTLP/gRPC export failed: %s", exc, exc_info=exc)
        context.abort(code, str(exc))
        raise AssertionError("unreachable: ServicerContext.abort raises")


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "replace")


def _bearer(value: Any) -> str | None:
    return bearer_of(_text(value))
