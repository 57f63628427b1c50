"""OTLP/HTTP: `POST /v1/logs`, `/v1/traces`, `/v1/metrics` (docs/otlp.md, docs/http-api.md).

The server's edge of the OTLP frontend: auth, body limits and server state here; decoding,
mapping and the write (`shoal.frontends.otlp`: codec, mapping, `OtlpSink`) there.

Bodies are `application/x-protobuf` or `application/json` (OTLP/JSON), optionally
`Content-Encoding: gzip`, capped like REST ingest bodies (before and after decoding).
`X-Idempotency-Key` is honoured as on `/v1/ingest/{table}`. The `ingest` scope is required
when tokens are configured.

Responses follow the OTLP spec, in the request's encoding: 200 with an
`Export*ServiceResponse` (with `partial_success` when records were refused); errors carry a
`google.rpc.Status` body (code = the matching gRPC code) with the message: 400 malformed body
(nothing written), 401/403 auth, 413 too large, 415 unsupported `Content-Type` /
`Content-Encoding`, 429 + `Retry-After` when the staging buffer is full and 503 +
`Retry-After` when the server is starting or stopping, both of which OTLP exporters retry.
HTTP statuses come from the server's one mapping (`shoal.http.errors.status_for`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from shoal.errors import BackpressureError, ShoalError
from shoal.frontends.otlp.codec import (JSON_TYPE, PROTOBUF_TYPE, WireFormat, decode_request,
                                        encode_response, encode_status, wire_format)
from shoal.frontends.otlp.schemas import Signal
from shoal.frontends.otlp.sink import ExportResult, OtlpSink, check_idempotency_key
from shoal.http.auth import bearer_token
from shoal.http.body import content_encoding, gunzip, read_body
from shoal.http.errors import (NotReadyError, UnsupportedMediaTypeError, headers_for,
                                 status_for)
from shoal.http.state import server_state

log = logging.getLogger("shoal.server")

ROUTES: tuple[tuple[Signal, str], ...] = (("logs", "/v1/logs"), ("traces", "/v1/traces"),
                                          ("metrics", "/v1/metrics"))


class UnsupportedContentTypeError(UnsupportedMediaTypeError):
    code = "unsupported_media_type"

    def __init__(self, content_type: str | None) -> None:
        self.content_type = content_type
        super().__init__(f"unsupported Content-Type {content_type or '(none)'!r}: OTLP/HTTP "
                         f"takes {PROTOBUF_TYPE} or {JSON_TYPE}")


def otlp_sink(request: Request) -> OtlpSink:
    sink: OtlpSink = request.app.state.otlp_sink
    return sink


def _media(fmt: WireFormat) -> str:
    return PROTOBUF_TYPE if fmt == "protobuf" else JSON_TYPE


def error_response(exc: ShoalError, fmt: WireFormat) -> Response:
    status = status_for(exc)
    if status >= 500 and not isinstance(exc, (NotReadyError, BackpressureError)):
        log.error("OTLP export failed: %s", exc, exc_info=exc)
    return Response(encode_status(status, str(exc), fmt), status_code=status,
                    media_type=_media(fmt), headers=headers_for(exc))


async def export(request: Request, signal: Signal) -> Response:
    state = server_state(request)
    fmt = wire_format(request.headers.get("content-type"))
    try:
        if state.tokens.enabled:
            state.tokens.allows(bearer_token(request), "ingest")
        if fmt is None:
            raise UnsupportedContentTypeError(request.headers.get("content-type"))
        state.check_accepting()
        key = check_idempotency_key(request.headers.get("x-idempotency-key"))
        encoding = content_encoding(request.headers.get("content-encoding"))
        wire = await read_body(request, limit=state.max_body_bytes)
        sink = otlp_sink(request)
        wire_fmt: WireFormat = fmt

        def work() -> tuple[int, ExportResult]:
            body = gunzip(wire, limit=state.max_body_bytes) if encoding == "gzip" else wire
            msg = decode_request(signal, body, wire_fmt)
            return len(body), sink.export(signal, msg, idempotency_key=key)

        nbytes, result = await anyio.to_thread.run_sync(work)
    except ShoalError as e:
        return error_response(e, fmt or "json")
    if result.rows or result.rejected:
        state.metrics.observe_ingest(result.table, rows=result.rows, nbytes=nbytes,
                                     wire_bytes=len(wire), rejected=result.rejected,
                                     replayed=result.replayed, path="otlp")
    return Response(encode_response(signal, fmt, rejected=result.rejected,
                                    message=result.message),
                    media_type=_media(fmt))


def _route(signal: Signal) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        return await export(request, signal)

    handler.__name__ = f"otlp_export_{signal}"
    handler.__doc__ = f"OTLP/HTTP export of {signal} (protobuf or JSON)."
    return handler


router = APIRouter(tags=["otlp"])
for _signal, _path in ROUTES:
    router.add_api_route(_path, _route(_signal), methods=["POST"])
