"""Prometheus remote write 1.0 receiver: `POST /api/v1/write`.

The server's edge of the remote write frontend: auth, body limits, server state and the
answers Prometheus acts on here; decoding, mapping and the write
(`shoal.frontends.prometheus`: `remote_write`, `PromWriteSink`) there.

The body is a protobuf `prometheus.WriteRequest`, snappy-compressed in the block format:
`Content-Type: application/x-protobuf` (a `proto=` parameter other than
`prometheus.WriteRequest`, i.e. remote write 2.0, is refused) and `Content-Encoding: snappy`
(senders must set it; a request without the header is read as snappy all the same, as
Prometheus's own receiver does, but any other encoding is refused).
The compressed body is capped at `max_body_bytes` while it is read, and the decoded one at
the same figure before it is decoded. The `ingest` scope is required when tokens are set.

Answers (Prometheus retries 5xx and 429, and drops a batch on any other 4xx):
- 204 once every sample and metadata entry of the body is committed (ack = committed);
- 400 a body that cannot be read (bad snappy, bad protobuf, a series without labels, ...),
  nothing written; 401/403 auth; 413 too large; 415 wrong Content-Type / Content-Encoding;
- 429 + `Retry-After` when the staging buffer is full, 503 + `Retry-After` while the server
  starts or stops: Prometheus keeps the batch and resends it.
Error bodies are one line of plain text (Prometheus logs the first line of the answer).
A resent body is written once (the idempotency key is the body's hash: `PromWriteSink`).
"""

from __future__ import annotations

import logging

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from shoal.errors import BackpressureError, ShoalError
from shoal.frontends.prometheus.sink import PromWriteSink, WriteResult
from shoal.http.auth import bearer_token
from shoal.http.body import read_body
from shoal.http.errors import (NotReadyError, UnsupportedMediaTypeError, headers_for,
                                 status_for)
from shoal.http.state import server_state

log = logging.getLogger("shoal.server")

PATH = "/api/v1/write"
PROTOBUF_TYPE = "application/x-protobuf"
PROTO_NAME = "prometheus.WriteRequest"
TEXT_TYPE = "text/plain; charset=utf-8"


class RemoteWriteMediaTypeError(UnsupportedMediaTypeError):
    code = "unsupported_media_type"

    def __init__(self, what: str, found: str | None, expected: str) -> None:
        self.found = found
        super().__init__(f"unsupported {what} {found or '(none)'!r}: Prometheus remote write "
                         f"1.0 takes {expected}")


def check_media(content_type: str | None, content_encoding: str | None) -> None:
    """Refuse (415) anything but a snappy-compressed protobuf `prometheus.WriteRequest`
    (no `Content-Encoding` at all is taken as snappy)."""
    media, *params = (content_type or "").split(";")
    proto = next((p.split("=", 1)[1].strip().strip('"') for p in params
                  if p.split("=", 1)[0].strip().lower() == "proto" and "=" in p), PROTO_NAME)
    if media.strip().lower() != PROTOBUF_TYPE or proto != PROTO_NAME:
        raise RemoteWriteMediaTypeError("Content-Type", content_type,
                                        f"{PROTOBUF_TYPE} (proto={PROTO_NAME})")
    if content_encoding is not None and content_encoding.strip().lower() != "snappy":
        raise RemoteWriteMediaTypeError("Content-Encoding", content_encoding, "snappy")


def prom_write_sink(request: Request) -> PromWriteSink:
    sink: PromWriteSink = request.app.state.prom_write_sink
    return sink


def error_response(exc: ShoalError) -> Response:
    status = status_for(exc)
    if status >= 500 and not isinstance(exc, (NotReadyError, BackpressureError)):
        log.error("remote write failed: %s", exc, exc_info=exc)
    message = " ".join(str(exc).split())        # one line: Prometheus logs the first
    return Response(message + "\n", status_code=status, media_type=TEXT_TYPE,
                    headers=headers_for(exc))


async def remote_write(request: Request) -> Response:
    """Prometheus remote write 1.0 (snappy-compressed protobuf WriteRequest)."""
    state = server_state(request)
    try:
        if state.tokens.enabled:
            state.tokens.allows(bearer_token(request), "ingest")
        check_media(request.headers.get("content-type"),
                    request.headers.get("content-encoding"))
        state.check_accepting()
        wire = await read_body(request, limit=state.max_body_bytes)
        sink = prom_write_sink(request)
        result: WriteResult = await anyio.to_thread.run_sync(
            lambda: sink.write(wire, max_bytes=state.max_body_bytes))
    except ShoalError as e:
        return error_response(e)
    for i, w in enumerate(result.writes):    # the body's bytes count once, on its first table
        state.metrics.observe_ingest(w.table, rows=w.rows,
                                     nbytes=result.decoded_bytes if i == 0 else 0,
                                     wire_bytes=len(wire) if i == 0 else 0, rejected=0,
                                     replayed=w.replayed, path="remote_write")
    return Response(status_code=204)


router = APIRouter(tags=["prometheus"])
router.add_api_route(PATH, remote_write, methods=["POST"], status_code=204,
                     response_class=Response)
