"""Reading request bodies under a byte cap, and gzip decoding under the same cap.

- `read_body()` refuses a declared `Content-Length` over the cap before reading a byte, and
  counts while streaming (chunked bodies declare nothing), so at most `limit` bytes are
  ever buffered.
- `gunzip()` decompresses incrementally, never producing more than `limit + 1` bytes: a
  gzip bomb costs the server `limit` bytes of memory and a 413, nothing more.
  Concatenated gzip members (what `cat a.gz b.gz` gives) are decoded in sequence.

Both raise `PayloadTooLargeError` (413); bad gzip is a `BadRequestError` (400 `bad_payload`);
a body not received within the app's `body_timeout_s` is a `RequestTimeoutError` (408).
"""

from __future__ import annotations

import zlib
from typing import Literal

import anyio
from fastapi import Request

from shoal.errors import PayloadTooLargeError
from shoal.server.errors import BadRequestError, RequestTimeoutError, UnsupportedEncodingError

Encoding = Literal["identity", "gzip"]


def content_encoding(header: str | None) -> Encoding:
    value = (header or "identity").strip().lower()
    if value in ("", "identity"):
        return "identity"
    if value in ("gzip", "x-gzip"):
        return "gzip"
    raise UnsupportedEncodingError(value)


async def read_body(request: Request, *, limit: int, timeout_s: float | None = None) -> bytes:
    """The body, at most `limit` bytes, received within `timeout_s` (default: the app's
    `body_timeout_s`); a client that sends slower gets 408 instead of holding a worker."""
    if timeout_s is None:
        state = getattr(request.app.state, "shoal", None)
        timeout_s = state.config.body_timeout_s if state is not None else 60.0
    with anyio.move_on_after(timeout_s) as scope:
        body = await _read(request, limit)
    if scope.cancelled_caught:
        raise RequestTimeoutError(timeout_s)
    return body


async def _read(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequestError(f"invalid Content-Length {declared!r}") from None
        if size > limit:
            raise PayloadTooLargeError(size, limit)
    # The pieces joined once at the end: one copy of the body (a growing bytearray and its
    # final bytes() cost the event loop two or more, 1 MB at a time).
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def gunzip(data: bytes, *, limit: int) -> bytes:
    """Decode gzip `data` (one or more members); raise if the result exceeds `limit`."""
    out = bytearray()
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    try:
        while True:
            out += d.decompress(pending, limit - len(out) + 1)
            if len(out) > limit:
                raise PayloadTooLargeError(len(out), limit)
            pending = d.unconsumed_tail
            if pending:
                continue
            if d.eof:
                rest = d.unused_data
                if not rest:
                    return bytes(out)
                d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                pending = rest
                continue
            # All input consumed but the stream is not finished: zlib may still hold output
            # back (the cap stopped it); ask once more, else the body was cut short.
            more = d.decompress(b"", limit - len(out) + 1)
            if not more:
                raise BadRequestError("gzip body is truncated", code="bad_payload")
            out += more
            if len(out) > limit:
                raise PayloadTooLargeError(len(out), limit)
            pending = d.unconsumed_tail
    except zlib.error as e:
        raise BadRequestError(f"body is not valid gzip: {e}", code="bad_payload") from None
