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
body has its own deadline (`body_timeout_s`, `shoal.server.body`).

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


def _timeout_response(timeout_s: float) -> bytes:
    body = json.dumps({"error": {
        "code": "request_timeout",
        "message": f"the request headers did not arrive within {timeout_s:g} s",
        "details": []}}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
            + body)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers
    (`header_timeout_s`, set by `header_timeout_protocol`)."""

    header_timeout_s: float = 20.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_begun = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        self._request_begun = False
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
        peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
        log.info("closing a connection from %s: request headers not received within %g s",
                 peer, self.header_timeout_s)
        if self._request_begun:
            self.transport.write(_timeout_response(self.header_timeout_s))
        self.transport.close()


def header_timeout_protocol(timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """A `HeaderTimeoutProtocol` class whose connections allow `timeout_s` for headers."""
    if not timeout_s > 0:
        raise ValueError(f"header timeout must be positive, got {timeout_s!r}")
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout_s": float(timeout_s)})
