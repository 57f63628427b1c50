"""The Sentry SDK endpoints: `POST /api/{project_id}/envelope/` and `/api/{project_id}/store/`.

An application points its SDK at shoal with `dsn="http://<key>@<shoal host>:8720/<project>"`
and its errors and transactions land in the Sentry events table (`sentry_table`, default
`sentry_events`; docs/sentry.md). The project id is the DSN's path: digits, else 400.

Authentication: the DSN's public key is the SDK's credential, so it is looked up as a shoal
token and must carry the `ingest` scope (401/403 otherwise) whenever tokens are configured.
The SDK sends it in `X-Sentry-Auth: Sentry sentry_key=<key>, ...`; the `sentry_key` query
parameter (what browser SDKs use) and `Authorization: Bearer <token>` are accepted too.
With authentication off, any key is taken.

Bodies are capped like every ingest body (before and after decoding). Answers: 200
`{"id": "<event id>"}` (the first event's; an envelope of only skipped items answers `{}`);
errors are the server's shared error document and statuses (`shoal.http.errors`): 400
malformed (nothing written), 401/403, 413, 415 (encoding), 429/503 with `Retry-After`,
which the SDKs honour.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from shoal.frontends.sentry.envelope import (EnvelopeItem, decode_body, parse_envelope,
                                             parse_store)
from shoal.frontends.sentry.events import SentryPayloadError
from shoal.frontends.sentry.sink import SentrySink, SentryWrite
from shoal.http.auth import bearer_token
from shoal.http.body import read_body
from shoal.http.state import server_state

log = logging.getLogger("shoal.sentry")
router = APIRouter(tags=["sentry"])


def sentry_key(request: Request) -> str | None:
    """The DSN public key the SDK sent (`X-Sentry-Auth`, `?sentry_key=`), or a bearer
    token."""
    for header in (request.headers.get("x-sentry-auth"), request.headers.get("authorization")):
        if header and header.strip().lower().startswith("sentry "):
            for part in header.strip()[7:].split(","):
                name, _, value = part.strip().partition("=")
                if name.strip() == "sentry_key" and value.strip():
                    return value.strip()
    key = request.query_params.get("sentry_key")
    return key if key else bearer_token(request)


def _project(project_id: str) -> int:
    if not project_id.isdigit() or len(project_id) > 18:
        raise SentryPayloadError(f"project id {project_id[:40]!r} in the URL must be digits "
                                 "(the last path segment of the DSN)")
    return int(project_id)


async def _receive(request: Request, project_id: str, kind: str) -> JSONResponse:
    """Errors raised here are rendered by the app's handlers (the shared error document)."""
    state = server_state(request)
    if state.tokens.enabled:
        state.tokens.allows(sentry_key(request), "ingest")
    project = _project(project_id)
    state.check_accepting()
    wire = await read_body(request, limit=state.max_body_bytes)
    sink: SentrySink = request.app.state.sentry_sink
    encoding = request.headers.get("content-encoding")

    def work() -> tuple[int, SentryWrite, dict[str, int]]:
        data = decode_body(wire, encoding, limit=state.max_body_bytes)
        if kind == "store":
            items, skipped, eid = [EnvelopeItem("event", parse_store(data))], {}, None
        else:
            env = parse_envelope(data)
            items, skipped = env.events, env.skipped
            eid = env.header.get("event_id")
        return len(data), sink.write(project, items, envelope_event_id=eid), skipped

    nbytes, result, skipped = await anyio.to_thread.run_sync(work)
    if skipped:
        log.debug("Sentry envelope for project %s: skipped items %s", project, skipped)
    if result.rows or result.replayed:
        state.metrics.observe_ingest(result.table, rows=result.rows, nbytes=nbytes,
                                     wire_bytes=len(wire), rejected=0,
                                     replayed=result.rows == 0, path="sentry")
    body: dict[str, Any] = {"id": result.event_ids[0]} if result.event_ids else {}
    return JSONResponse(body)


@router.post("/api/{project_id}/envelope/")
async def sentry_envelope(request: Request, project_id: str) -> JSONResponse:
    """A Sentry SDK envelope: its events and transactions are written; other items skipped."""
    return await _receive(request, project_id, "envelope")


@router.post("/api/{project_id}/store/")
async def sentry_store(request: Request, project_id: str) -> JSONResponse:
    """One event as JSON, the way older Sentry SDKs send it."""
    return await _receive(request, project_id, "store")
