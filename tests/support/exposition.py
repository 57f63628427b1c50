"""A scrape target for tests: a real HTTP server on a free loopback port serving whatever
exposition the test sets, and recording the requests it got.

    with exposition_server() as target:        # target.address is host:port
        target.set(TEXT_BODY)                  # text format 0.0.4
        target.set(OM_BODY, openmetrics=True)  # or OpenMetrics 1.0.0
        target.status = 500                    # fail the next scrapes
        target.hold.clear()                    # hang every request until hold is set again
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass
class ExpositionTarget:
    address: str
    body: bytes = b""
    content_type: str = TEXT_TYPE
    status: int = 200
    hold: threading.Event = field(default_factory=threading.Event)
    requests: list[dict[str, str]] = field(default_factory=list)

    def set(self, text: str | bytes, *, openmetrics: bool = False) -> None:
        self.body = text.encode() if isinstance(text, str) else text
        self.content_type = OPENMETRICS_TYPE if openmetrics else TEXT_TYPE


@contextmanager
def exposition_server() -> Iterator[ExpositionTarget]:
    target = ExpositionTarget(address="")
    target.hold.set()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target.requests.append({k.lower(): v for k, v in self.headers.items()})
            target.hold.wait(120)
            body = target.body
            self.send_response(target.status)
            self.send_header("Content-Type", target.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    target.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        target.hold.set()
        server.shutdown()
        server.server_close()
