"""The server's HTTP/1.1 connection protocol: uvicorn's, plus a deadline for request headers.

uvicorn bounds the idle time between keep-alive requests, but not the time a client takes
to send a request line and headers: a client that opens a connection and trickles a byte
a second (or sends nothing) holds it, and its memory, for as long as it likes. Fifty such
clients cost the attacker nothing.

`header_timeout_protocol(timeout_s)` returns a protocol class for `uvicorn.Config(http=...)`
that arms a timer when a connection opens and when a request's first byte arrives, and
cancels it once the headers are complete. When it fires before that, the connection is
closed: with a `408` (the server's JSON error document, `Connection: close`) when part of
a request had arrived, silently when nothing had. A request already being answered on the
connection (a slow pipelined successor) finishes first; then the connection closes. The
body has its own deadline (`body_timeout_s`, `shoal.http.body`).

The request line and headers are also capped at `MAX_HEADER_BYTES` (64 KiB): uvicorn's
httptools protocol would keep however many a client sends within the deadline (a URL of
gigabytes, grown by concatenation); past the cap the answer is `431` and the connection
is closed.

`shoal serve` uses it with `header_timeout_s` (SHOAL_HEADER_TIMEOUT_S); tests pass it to
`tests.support.server.serve_app`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("shoal.server")


MAX_HEADER_BYTES = 64 << 10


def _error_response(status: bytes, code: str, message: str) -> bytes:
    """A complete `Connection: close` answer carrying the server's error document."""
    body = json.dumps({"error": {"code": code, "message": message, "details": []}}).encode()
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
            + body)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline (`header_timeout_s`, set by
    `header_timeout_protocol`) and a size cap (`max_header_bytes`) on each request's line
    and headers."""

    header_timeout_s: float = 20.0
    max_header_bytes: int = MAX_HEADER_BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._in_headers = True         # what arrives next belongs to a request's head
        self._header_bytes = 0
        self._heads_completed = 0       # in the chunk being parsed

    def data_received(self, data: bytes) -> None:
        began_in_head = self._in_headers
        self._heads_completed = 0
        super().data_received(data)
        if (not (began_in_head and self._in_headers) or self._heads_completed
                or self.transport.is_closing()):
            return
        # The chunk began and ended within one request's line and headers, which the parser
        # keeps in memory: all of it was head.
        self._header_bytes += len(data)
        if self._header_bytes > self.max_header_bytes:
            self._cancel_header_timer()
            log.info("closing a connection from %s: request line and headers over %d bytes",
                     self._peer(), self.max_header_bytes)
            self.transport.write(_error_response(
                b"431 Request Header Fields Too Large", "headers_too_large",
                f"the request line and headers exceed {self.max_header_bytes} bytes"))
            self.transport.close()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True
        self._header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        self._in_headers = True
        self._header_bytes = 0
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        self._request_begun = False
        self._in_headers = False
        self._heads_completed += 1
        super().on_headers_complete()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s,
                                                      self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # The previous request is still being answered: let it finish, then close.
            self.cycle.keep_alive = False
            return
        log.info("closing a connection from %s: request headers not received within %g s",
                 self._peer(), self.header_timeout_s)
        if self._request_begun:
            self.transport.write(_error_response(
                b"408 Request Timeout", "request_timeout",
                f"the request headers did not arrive within {self.header_timeout_s:g} s"))
        self.transport.close()

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "?"


def header_timeout_protocol(timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """A `HeaderTimeoutProtocol` class whose connections allow `timeout_s` for headers."""
    if not timeout_s > 0:
        raise ValueError(f"header timeout must be positive, got {timeout_s!r}")
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout_s": float(timeout_s)})
