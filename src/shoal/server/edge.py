"""The browser boundary: what a web page the user visits can make the server do (nothing).

A server without tokens trusts whoever reaches the loopback interface, and a browser on
the same machine is such a someone, driven by any page it shows. This ASGI middleware
closes the three ways in, before routing and authentication:

- **Cross-origin requests.** A request carrying an `Origin` that is neither the server's
  own (same scheme-less host and port as `Host`) nor one of `cors_origins` is refused with
  403 `forbidden_origin`. Browsers send `Origin` on every cross-origin POST, including the
  "simple" ones (`text/plain`, forms) that need no preflight, so a page elsewhere cannot
  ingest, query or create tables. Configured origins get CORS grants (preflight answered);
  no origin gets one by default.
- **DNS rebinding.** When authentication is off, or `http_hosts` is configured, the `Host`
  header must name loopback (`localhost`, 127.0.0.0/8, `[::1]`) or a configured name: a
  page whose own name was re-pointed at 127.0.0.1 sends its own name as `Host` and gets
  403 `forbidden_host`.
- **JSON endpoints need a JSON body.** `POST /v1/query` and the table definition routes
  accept only `Content-Type: application/json`, so no form or `text/plain` request a page
  may send without a preflight is ever read (415 `unsupported_media_type`).

Refusals use the server's one error document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, MutableMapping
from typing import Any, TypedDict

from starlette.types import ASGIApp, Receive, Scope, Send

from shoal.http.auth import is_loopback

JSON_ROUTES = (re.compile(r"^/v1/query\Z"), re.compile(r"^/v1/tables(/[^/]+/columns)?\Z"))
_CORS_HEADERS = "Authorization, Content-Type, Content-Encoding, X-Idempotency-Key, Accept"
_CORS_METHODS = "GET, POST, OPTIONS"


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _host_name(host: str) -> str:
    """`Host` without its port: `[::1]:8720` -> `::1`, `a.b:1` -> `a.b`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_authority(origin: str) -> str | None:
    """`http://127.0.0.1:8720` -> `127.0.0.1:8720`; None for `null` and non-URLs."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest:
        return None
    return rest.rstrip("/")


class EdgeOptions(TypedDict):
    """The keyword arguments of `EdgeMiddleware` that a server's settings decide."""

    check_host: bool
    hosts: list[str]
    cors_origins: list[str]


class EdgeMiddleware:
    """Refuses foreign origins, rebinding `Host` names and non-JSON bodies on JSON routes."""

    def __init__(self, app: ASGIApp, *, check_host: bool, hosts: Iterable[str] = (),
                 cors_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.check_host = check_host
        self.hosts = frozenset(h.lower() for h in hosts)
        self.cors = frozenset(o.rstrip("/").lower() for o in cors_origins)

    @classmethod
    def options(cls, *, auth_enabled: bool, http_hosts: str | None,
                cors_origins: str | None) -> EdgeOptions:
        hosts = _split(http_hosts)
        return {"check_host": not auth_enabled or bool(hosts), "hosts": hosts,
                "cors_origins": _split(cors_origins)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        host = headers.get("host", "")
        if self.check_host and not self._host_allowed(host):
            await _refuse(send, 403, "forbidden_host",
                          f"Host {host[:100]!r} is not a name this server answers to "
                          "(loopback, or SHOAL_HTTP_HOSTS)")
            return
        origin = headers.get("origin")
        granted = None
        if origin is not None:
            normalized = origin.strip().rstrip("/").lower()
            if normalized in self.cors:
                granted = origin.strip()
            elif _origin_authority(origin) != host.strip().lower():
                await _refuse(send, 403, "forbidden_origin",
                              f"cross-origin request from {origin[:100]!r} refused "
                              "(allow it with SHOAL_CORS_ORIGINS)")
                return
        if granted is not None and scope["method"] == "OPTIONS":
            await _preflight(send, granted)
            return
        if scope["method"] == "POST" and any(r.match(scope["path"]) for r in JSON_ROUTES):
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                await _refuse(send, 415, "unsupported_media_type",
                              f"{scope['path']} takes Content-Type: application/json, got "
                              f"{media[:100] or '(none)'!r}")
                return
        if granted is None:
            await self.app(scope, receive, send)
            return

        async def send_with_grant(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      (b"access-control-allow-origin", granted.encode()),
                                      (b"vary", b"Origin"),
                                      (b"access-control-expose-headers",
                                       b"X-Shoal-Stats, Retry-After")]
            await send(message)

        await self.app(scope, receive, send_with_grant)

    def _host_allowed(self, host: str) -> bool:
        name = _host_name(host)
        return bool(name) and (is_loopback(name) or name in self.hosts
                               or host.strip().lower() in self.hosts)


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "details": []}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _preflight(send: Send, origin: str) -> None:
    await send({"type": "http.response.start", "status": 204,
                "headers": [(b"access-control-allow-origin", origin.encode()),
                            (b"access-control-allow-methods", _CORS_METHODS.encode()),
                            (b"access-control-allow-headers", _CORS_HEADERS.encode()),
                            (b"access-control-max-age", b"600"), (b"vary", b"Origin")]})
    await send({"type": "http.response.body", "body": b""})
