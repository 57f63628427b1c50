"""`POST /v1/ingest/{table}`: NDJSON in, an ack out once the rows are committed (docs/http-api.md).

Order of work, so a refused request never costs more than it must and never writes:
authentication (dependency) -> readiness -> `Content-Encoding` -> announced to the staging
buffer (`WritePath.arrive`: a group waits for it) -> body read under the cap (on the event
loop, streaming) -> gzip decode under the same cap + `WritePath.ingest_ndjson` (in a worker
thread: both are CPU work and the write path blocks until the group commit).

The ack is `IngestAck.to_json()`: `{table, snapshot_id, rows, replayed, new_columns,
rejected, rejected_count, extent_ids}` (`rejected`: the first 100 line errors;
`rejected_count`: every rejected line). A retry with the same `X-Idempotency-Key` returns
the first ack with `replayed: true`. Errors are mapped by `shoal.http.errors` (400 bad
lines with per-line details, 404, 409 (also a key first used on another table), 413,
429/503 with `Retry-After`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse

from shoal.ingest.write_path import IngestAck
from shoal.ingest.keys import client_key_problem
from shoal.http.auth import require_scope
from shoal.http.body import content_encoding, gunzip, read_body
from shoal.http.errors import BadRequestError
from shoal.http.state import server_state

router = APIRouter(tags=["ingest"])


def _check_key(key: str | None) -> str | None:
    if key is None:
        return None
    problem = client_key_problem(key)
    if problem is not None:
        raise BadRequestError(problem, details=[{"line": None, "field": "X-Idempotency-Key",
                                                 "message": "invalid idempotency key"}])
    return key


@router.post("/v1/ingest/{table}", dependencies=[Depends(require_scope("ingest"))])
async def ingest(
    request: Request,
    table: str,
    mode: Annotated[Literal["evolve", "drop", "reject"] | None, Query()] = None,
    partial: Annotated[bool, Query()] = False,
    idempotency_key: Annotated[str | None, Header(alias="X-Idempotency-Key")] = None,
) -> JSONResponse:
    """Ingest an NDJSON body (optionally gzip) into `table`."""
    state = server_state(request)
    state.check_accepting()
    key = _check_key(idempotency_key)
    encoding = content_encoding(request.headers.get("content-encoding"))
    # Announced before the body is read: a group already waiting in the staging buffer
    # waits (up to its debounce) for this request instead of being written without it.
    with state.db.write_path.arrive(table) as arrival:
        wire = await read_body(request, limit=state.max_body_bytes)

        def work() -> tuple[int, IngestAck]:
            body = gunzip(wire, limit=state.max_body_bytes) if encoding == "gzip" else wire
            ack = state.db.ingest_ndjson(table, body, mode=mode, partial=partial,
                                         idempotency_key=key, arrival=arrival)
            return len(body), ack

        nbytes, ack = await anyio.to_thread.run_sync(work)
    state.metrics.observe_ingest(table, rows=ack.rows, nbytes=nbytes, wire_bytes=len(wire),
                                 rejected=ack.rejected_count or 0, replayed=ack.replayed,
                                 path="rest")
    doc: dict[str, Any] = ack.to_json()
    return JSONResponse(doc)
