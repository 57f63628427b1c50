"""`POST /v1/query`: SQL (DDL included) in, an answer with its pruning stats out (SPEC §11).

Body `{"sql": "..."}` (`{"kql": ...}` is a later wave and answers 400). `Accept:
application/vnd.apache.arrow.stream` gives the rows as an Arrow IPC stream, with the stats
JSON in the `X-Shoal-Stats` header; anything else gives the JSON document
`{"columns": [{"name", "type"}], "rows": [[...]], "stats": {...}}`. `?prune=false` reads
every extent (for checking that pruning never changes an answer). `?engine=auto|local|spark`
picks the engine of a SELECT (default `SHOAL_QUERY_ENGINE`); the stats say which ran and why.

Scopes: SELECT/EXPLAIN/DESCRIBE/SHOW need `query`; CREATE/ALTER need `admin`, decided on the
statement's tokens (`shoal.query.guard.classify`), so a leading comment hides nothing.
Anything but those statements is refused by the guard (400 `forbidden_query`). The
statement runs in a worker thread on the server's one warm Spark session.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from shoal.query.guard import classify
from shoal.query.routing import engine_mode
from shoal.server.auth import bearer_token, require_scope
from shoal.server.body import read_body
from shoal.server.errors import BadRequestError
from shoal.server.state import server_state

ARROW_STREAM = "application/vnd.apache.arrow.stream"
MAX_QUERY_BYTES = 1 << 20

router = APIRouter(tags=["query"])


def _statement(raw: bytes) -> str:
    try:
        doc = json.loads(raw or b"null")
    except ValueError as e:
        raise BadRequestError(f"the body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise BadRequestError('expected a JSON object {"sql": "..."}')
    if "kql" in doc and "sql" not in doc:
        raise BadRequestError("KQL is not available yet; send {\"sql\": ...}",
                              code="not_implemented")
    sql = doc.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise BadRequestError('"sql" must be a non-empty string',
                              details=[{"line": None, "field": "sql",
                                        "message": "missing or empty"}])
    return sql


@router.post("/v1/query", dependencies=[Depends(require_scope("query"))])
async def query(request: Request,
                prune: Annotated[bool, Query()] = True,
                engine: Annotated[str | None, Query()] = None) -> Response:
    state = server_state(request)
    state.check_accepting()
    engine = engine_mode(engine, state.db.config.query_engine)
    sql = _statement(await read_body(request, limit=MAX_QUERY_BYTES))
    # Decided on the tokens of the statement, so no comment or white space can hide DDL.
    if classify(sql).kind == "admin_ddl" and state.tokens.enabled:
        state.tokens.allows(bearer_token(request), "admin")

    from shoal.query.results import answer_document, arrow_stream

    result = await anyio.to_thread.run_sync(lambda: state.db.sql(sql, prune=prune,
                                                                    engine=engine))
    stats: dict[str, Any] = result.stats.to_json()
    if ARROW_STREAM in request.headers.get("accept", ""):
        return Response(arrow_stream(result.table), media_type=ARROW_STREAM,
                        headers={"X-Shoal-Stats": json.dumps(
                            {k: v for k, v in stats.items() if k != "scans"})})
    doc = await anyio.to_thread.run_sync(answer_document, result.table, stats)
    return JSONResponse(doc)
