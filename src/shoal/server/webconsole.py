"""The web console (`GET /`, docs/console.md): static files packaged with shoal, served as they are.

`install_console(app)` serves `index.html` at `/` and the rest of the folder
`shoal/server/console/` (ES modules, CSS, the vendored uPlot under `vendor/`) under
`/console/`. Nothing is built at install time. The files hold no data: every table, row
and metric the console shows comes from the JSON API, which it calls with the user's
bearer token (kept in the browser's sessionStorage). So the pages need no authentication
of their own, and the API's scopes apply unchanged.

`/docs` is the API reference: the vendored Swagger UI (`vendor/swagger-ui/`, started by
`docs.js`) over `/openapi.json`, under the same headers as the console. FastAPI's own
`/docs` and `/redoc`, which load their scripts from a CDN, are not served.

Console responses carry a Content-Security-Policy that allows scripts, styles and
connections to this origin only (no inline script; inline style attributes are allowed,
uPlot sizes its elements with them), and may not be framed by another page. The routes are
left out of the OpenAPI document: they are pages, not API.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

CONSOLE_DIR = Path(__file__).resolve().parent / "console"   # data only, no Python
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


class _ConsoleFiles(StaticFiles):
    """StaticFiles with the console's security headers on every answer."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.lower().encode(), v.encode())
                                        for k, v in SECURITY_HEADERS.items())]
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


def install_console(app: FastAPI) -> None:
    """Serve the console: `/` (the page), `/docs` (the API reference) and `/console/...`
    (their modules, styles and vendored libraries)."""

    async def console_page() -> FileResponse:
        return FileResponse(CONSOLE_DIR / "index.html", media_type="text/html",
                            headers=SECURITY_HEADERS)

    async def api_docs() -> FileResponse:
        return FileResponse(CONSOLE_DIR / "docs.html", media_type="text/html",
                            headers=SECURITY_HEADERS)

    app.add_api_route("/", console_page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/docs", api_docs, methods=["GET"], include_in_schema=False)
    app.mount("/console", _ConsoleFiles(directory=CONSOLE_DIR, check_dir=True),
              name="console")
