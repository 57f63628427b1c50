"""A local HTTP server (a real socket) that answers like Sentry's web API for one project:
`GET /api/0/projects/{org}/{project}/issues/` and `.../events/`, newest first, with Sentry's
cursor pagination in the `Link` header and the documented object shapes.

Cursors are Sentry's `<value>:<offset>:<is_prev>`. Issues page by time, as Sentry's date
paginator does: the next page starts at the listed objects with time `value` (ms), after
skipping `offset` of them, so issues that arrive at the head during a walk do not shift later
pages. Events page by offset (`0:<offset>:0`), as Sentry's event list does, so an event that
arrives at the head shifts them unless the walk holds `end` still. Issues honour
`query=lastSeen:>ISO`, events `start=ISO` and `end=ISO`; `limit` is the page size. Faults a
test sets: `rate_limit_next(n, retry_after)` answers the next n list requests with 429,
`fail_next(n)` with 500, `hold_at = k` keeps the k-th list request unanswered (`holding`
is set) until `release` is set; `token` (when set) must be the bearer token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


def _ms(text: str) -> int:
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _z(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def issue(n: int, last_ms: int, *, count: int = 1, first_ms: int | None = None) -> dict:
    """An issue as Sentry's issue list documents it."""
    return {"id": str(1000 + n), "shortId": f"WEB-{n}", "title": f"ValueError: order {n}",
            "culprit": f"app.orders in handle_{n}", "level": "error", "status": "unresolved",
            "substatus": "ongoing", "platform": "python", "issueType": "error",
            "project": {"id": "42", "name": "web", "slug": "web"}, "logger": None,
            "isUnhandled": n % 2 == 0, "count": str(count), "userCount": n % 5,
            "firstSeen": _z(first_ms or last_ms), "lastSeen": _z(last_ms),
            "permalink": f"https://sentry.example/organizations/acme/issues/{1000 + n}/",
            "metadata": {"type": "ValueError", "value": f"order {n}"},
            "assignedTo": None, "shareId": None, "numComments": 0}


def event(n: int, ms: int) -> dict:
    """An event as Sentry's project event list (`full=true`) documents it."""
    return {"id": f"{n:032x}", "eventID": f"{n:032x}", "groupID": str(1000 + n % 7),
            "title": f"ValueError: order {n}", "message": "", "platform": "python",
            "dateCreated": _z(ms), "culprit": "app.orders", "location": "app/orders.py",
            "event.type": "error", "tags": [{"key": "level", "value": "error"},
                                            {"key": "customer", "value": f"c{n % 3}"}],
            "user": {"id": str(n)}, "contexts": {"trace": {"trace_id": f"{n:032x}"}},
            "entries": [{"type": "exception", "data": {"values": [
                {"type": "ValueError", "value": f"order {n}", "stacktrace": {"frames": [
                    {"function": "handle", "filename": "app/orders.py", "lineNo": n}]}}]}}]}


class FakeSentry:
    def __init__(self, org: str = "acme", project: str = "web") -> None:
        self.org, self.project = org, project
        self.issues: dict[str, dict] = {}
        self.events: dict[str, dict] = {}
        self.token: str | None = None
        self.requests: list[str] = []
        self.auth_seen: list[str | None] = []
        self._faults: list[tuple[int, str]] = []    # (status, retry-after)
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.hold_at: int | None = None         # list request number to hold unanswered
        self.holding = threading.Event()        # set once that request is being held
        self.release = threading.Event()        # set to let held requests go
        self._list_requests = 0

    def put_issue(self, obj: dict) -> None:
        with self._lock:
            self.issues[obj["id"]] = obj

    def put_event(self, obj: dict) -> None:
        with self._lock:
            self.events[obj["eventID"]] = obj

    def rate_limit_next(self, n: int = 1, retry_after: str = "7") -> None:
        with self._lock:
            self._faults += [(429, retry_after)] * n

    def fail_next(self, n: int = 1) -> None:
        with self._lock:
            self._faults += [(500, "")] * n

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def answer(self, path: str, query: dict[str, list[str]], auth: str | None
               ) -> tuple[int, dict[str, str], Any]:
        self.requests.append(path + "?" + urlencode(query, doseq=True))
        self.auth_seen.append(auth)
        base = f"/api/0/projects/{self.org}/{self.project}/"
        if path not in (base + "issues/", base + "events/"):
            return 404, {}, {"detail": "The requested resource does not exist"}
        if self.token is not None and auth != f"Bearer {self.token}":
            return 401, {}, {"detail": "Invalid token"}
        with self._lock:
            self._list_requests += 1
            hold = self._list_requests == self.hold_at
        if hold:                            # a client that dies now never gets an answer
            self.holding.set()
            self.release.wait()
        with self._lock:
            if self._faults:
                status, retry = self._faults.pop(0)
                return status, ({"Retry-After": retry} if retry else {}), {"detail": "x"}
            resource = "issues" if path.endswith("issues/") else "events"
            field = "lastSeen" if resource == "issues" else "dateCreated"
            objs = list((self.issues if resource == "issues" else self.events).values())
        q = (query.get("query") or [""])[0]
        if q.startswith("lastSeen:>"):
            after = _ms(q.removeprefix("lastSeen:>"))
            objs = [o for o in objs if _ms(o[field]) > after]
        if query.get("start"):
            after = _ms(query["start"][0])
            objs = [o for o in objs if _ms(o[field]) > after]
        if query.get("end"):
            until = _ms(query["end"][0])
            objs = [o for o in objs if _ms(o[field]) <= until]
        objs.sort(key=lambda o: (_ms(o[field]), o["id"]), reverse=True)
        limit = int((query.get("limit") or ["100"])[0])
        start = 0
        if query.get("cursor"):
            value, offset, _ = (int(p) for p in query["cursor"][0].split(":"))
            start = offset if resource == "events" else offset + next(
                (i for i, o in enumerate(objs) if _ms(o[field]) <= value), len(objs))
        page = objs[start:start + limit]
        more = start + limit < len(objs)
        cursor = f"0:{start + len(page)}:0"
        if page and resource == "issues":
            last = _ms(page[-1][field])
            same = sum(1 for o in objs[:start + len(page)] if _ms(o[field]) == last)
            cursor = f"{last}:{same}:0"
        link = (f'<{self.url}{path}?cursor=0:0:1>; rel="previous"; results="false"; '
                f'cursor="0:0:1", <{self.url}{path}?cursor={cursor}>; rel="next"; '
                f'results="{"true" if more else "false"}"; cursor="{cursor}"')
        return 200, {"Link": link}, page


@contextmanager
def fake_sentry() -> Iterator[FakeSentry]:
    """A `FakeSentry` serving on 127.0.0.1 and a kernel-chosen port until the block ends."""
    fake = FakeSentry()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            parts = urlsplit(self.path)
            status, headers, body = fake.answer(parts.path, parse_qs(parts.query),
                                                self.headers.get("Authorization"))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            try:
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass                    # the client was killed while its request was held

        def log_message(self, *args: Any) -> None:
            pass

    fake.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.release.set()
        fake.server.shutdown()
        fake.server.server_close()
        thread.join()
