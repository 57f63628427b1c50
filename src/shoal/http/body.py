"""Reading request bodies under a byte cap, and gzip decoding under the same cap.

- `read_body()` refuses a declared `Content-Length` over the cap before reading a byte, and
  counts while streaming (chunked bodies declare nothing), so at most `limit` bytes are
  ever buffered.
- `gunzip()` decompresses incrementally, never producing more than `limit + 1` bytes: a
  gzip bomb costs the server `limit` bytes of memory and a 413, nothing more.
  Concatenated gzip members (what `cat a.gz b.gz` gives, or bgzip) are decoded in sequence,
  in time linear in the body, and at most `max_gzip_members()` of them (a few, plus one per
  KiB of compressed body): a body of thousands of empty members is a 400, not a busy core.
  Callers run it in a worker thread: it is CPU work and must not hold the event loop.

Both raise `PayloadTooLargeError` (413); bad gzip is a `BadRequestError` (400 `bad_payload`);
a body not received within the app's `body_timeout_s` is a `RequestTimeoutError` (408).
"""

from __future__ import annotations

import zlib
from typing import Literal

import anyio
from fastapi import Request

from shoal.errors import PayloadTooLargeError
from shoal.http.errors import BadRequestError, RequestTimeoutError, UnsupportedEncodingError

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


# The member bound: a few members whatever the size (`cat a.gz b.gz`), then one more per
# KiB of compressed body. bgzip-style files (blocks of at most 64 KiB, compressed to a few
# KiB or more) stay far below it; a body of empty 20-byte members goes over it at once.
MEMBERS_BASE = 64
MEMBER_BYTES = 1024
# Input handed to zlib per call. A member's first window is small, so a body of tiny
# members costs little each (zlib copies what is left of the window as `unused_data`);
# it doubles while the member goes on, up to the largest, so big members go at full speed.
_FIRST_WINDOW = 4 << 10
_MAX_WINDOW = 256 << 10


def max_gzip_members(compressed_bytes: int) -> int:
    """How many gzip members a body of `compressed_bytes` may hold."""
    return MEMBERS_BASE + compressed_bytes // MEMBER_BYTES


def gunzip(data: bytes, *, limit: int) -> bytes:
    """Decode gzip `data` (one or more members); raise if the result exceeds `limit` bytes
    (413) or the body holds more members than `max_gzip_members(len(data))` (400).

    Linear in the body: zlib reads bounded windows of a view over `data`, so no member
    copies the rest of the body, and output is produced at most `limit + 1` bytes."""
    view = memoryview(data)
    total = len(view)
    bound = max_gzip_members(total)
    parts: list[bytes] = []     # joined once at the end: one copy of the output
    size = pos = members = 0
    if not total:
        raise BadRequestError("gzip body is empty", code="bad_payload")
    try:
        while pos < total:
            members += 1
            if members > bound:
                raise BadRequestError(
                    f"gzip body has more than {bound} members (at most {MEMBERS_BASE} plus "
                    f"one per {MEMBER_BYTES} bytes of compressed body)", code="bad_payload")
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            window = _FIRST_WINDOW
            while True:
                chunk = view[pos:pos + window]
                piece = d.decompress(chunk, limit - size + 1)
                pos += len(chunk) - len(d.unconsumed_tail) - len(d.unused_data)
                if not piece and pos >= total and not d.eof:
                    # All input consumed, the member unfinished, and zlib has nothing held
                    # back (the cap could have stopped it): the body was cut short.
                    raise BadRequestError("gzip body is truncated", code="bad_payload")
                size += len(piece)
                if size > limit:
                    raise PayloadTooLargeError(size, limit)
                parts.append(piece)
                if d.eof:
                    break
                window = min(window * 2, _MAX_WINDOW)
    except zlib.error as e:
        raise BadRequestError(f"body is not valid gzip: {e}", code="bad_payload") from None
    return b"".join(parts)
