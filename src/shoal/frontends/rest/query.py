"""`POST /v1/query`: SQL (DDL included) or KQL in, an answer with its pruning stats out
 (docs/http-api.md).

Body `{"sql": "..."}` or `{"kql": "..."}` (`shoal.frontends.kusto.kql`: translated to SQL
and run exactly as that SQL; the JSON answer then also holds `"sql"`, the statement it ran
as, and `"render"`, the query's render hint or null; an Arrow answer carries the hint in
`X-Shoal-Render`). KQL reads only (the `query` scope). `Accept:
application/vnd.apache.arrow.stream` gives the rows as an Arrow IPC stream, with the stats
JSON in the `X-Shoal-Stats` header (the per-scan list too with `?scans=true`, as
`shoal.connect(url=...)` asks); anything else gives the JSON document
`{"columns": [{"name", "type"}], "rows": [[...]], "stats": {...}}`. Both say what the
statement was in `X-Shoal-Kind` (`select`, `ddl` or `explain`); an Arrow answer to KQL
carries the SQL it ran as in `X-Shoal-Sql` (a JSON string). `?prune=false` reads
every extent (for checking that pruning never changes an answer). `?engine=auto|local|spark`
picks the engine of a SELECT (default `SHOAL_QUERY_ENGINE`); the stats say which ran and why.

Scopes and bounds are those of every statement (`shoal.http.statements`): SELECT, EXPLAIN,
DESCRIBE and SHOW need `query`, CREATE and ALTER `admin`; slots, the timeout and the result
caps apply. A client that goes away (closes its connection) has its statement cancelled
(`_cancel_when_gone`: Spark jobs cancelled, the embedded run interrupted, the slot freed).
"""

from __future__ import annotations

import json
import logging
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from shoal.errors import BadJsonError, JsonLimitError, ShoalError
from shoal.http.auth import bearer_token, require_scope
from shoal.http.body import read_body
from shoal.http.errors import BadRequestError
from shoal.http.state import request_client, server_state
from shoal.http.statements import MAX_QUERY_BYTES, answer_stats, run_statement
from shoal.query.cancel import CancelHandle
from shoal.query.routing import engine_mode
from shoal.types.jsonlimits import loads as json_loads

log = logging.getLogger("shoal.server")

ARROW_STREAM = "application/vnd.apache.arrow.stream"

router = APIRouter(tags=["query"])


def _statement(raw: bytes) -> tuple[str, str]:
    """("sql" | "kql", the text) of the body."""
    try:  # under the JSON depth and number-length limits (shoal.types.jsonlimits)
        doc = json_loads(raw or b"null", what="the body")
    except JsonLimitError:
        raise
    except BadJsonError as e:
        raise BadRequestError(str(e)) from None
    if not isinstance(doc, dict):
        raise BadRequestError('expected a JSON object {"sql": "..."} or {"kql": "..."}')
    if "kql" in doc and "sql" in doc:
        raise BadRequestError('send either "sql" or "kql", not both')
    language = "kql" if "kql" in doc else "sql"
    text = doc.get(language)
    if not isinstance(text, str) or not text.strip():
        raise BadRequestError(f'"{language}" must be a non-empty string',
                              details=[{"line": None, "field": language,
                                        "message": "missing or empty"}])
    return language, text


@router.post("/v1/query", dependencies=[Depends(require_scope("query"))])
async def query(request: Request,
                prune: Annotated[bool, Query()] = True,
                engine: Annotated[str | None, Query()] = None,
                scans: Annotated[bool, Query()] = False) -> Response:
    state = server_state(request)
    state.check_accepting()
    engine = engine_mode(engine, state.db.config.query_engine)
    language, sql = _statement(await read_body(request, limit=MAX_QUERY_BYTES))

    from shoal.query.results import answer_document, arrow_stream

    token = bearer_token(request)
    client = request_client(request)
    cancel = CancelHandle()
    failure: ShoalError | None = None
    async with anyio.create_task_group() as watchers:
        watchers.start_soon(_cancel_when_gone, request, cancel)
        try:
            result = await anyio.to_thread.run_sync(
                lambda: run_statement(state, sql, token=token, prune=prune, engine=engine,
                                      kql=language == "kql", cancel=cancel, client=client))
        except ShoalError as e:
            failure = e         # raised below, not inside the group (it would wrap it)
        finally:
            watchers.cancel_scope.cancel()
    if failure is not None:
        raise failure
    stats = answer_stats(result)
    kind = {"X-Shoal-Kind": result.kind}
    if ARROW_STREAM in request.headers.get("accept", ""):
        headers = {**kind, "X-Shoal-Stats": json.dumps({k: v for k, v in stats.items()
                                                        if scans or k != "scans"})}
        if result.render is not None:
            headers["X-Shoal-Render"] = json.dumps(result.render)
        if language == "kql" and result.translated_sql is not None:
            headers["X-Shoal-Sql"] = json.dumps(result.translated_sql)   # ASCII, one line
        return Response(arrow_stream(result.table), media_type=ARROW_STREAM, headers=headers)
    doc = await anyio.to_thread.run_sync(answer_document, result.table, stats)
    if language == "kql":
        doc["sql"] = result.translated_sql
        doc["render"] = result.render
    return JSONResponse(doc, headers=kind)


async def _cancel_when_gone(request: Request, cancel: CancelHandle) -> None:
    """Cancel the statement when its client disconnects: the body has been read, so the next
    ASGI message is the disconnect (the console's Cancel, a closed curl, a client timeout)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            if cancel.cancel():
                log.info("a /v1/query client went away: its statement was cancelled")
            return
