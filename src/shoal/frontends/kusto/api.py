"""The Kusto query REST API over shoal's KQL, so Kusto clients (`azure-kusto-data`, the
Kusto CLI, notebooks) work against a shoal server.

- `POST /v2/rest/query` `{"db": ..., "csl": "<KQL>", "properties": ...}`: the query runs as
  `POST /v1/query` with `{"kql": ...}` runs it (same engine, slots, limits, pruning). The
  answer is Kusto's v2 frame array: `DataSetHeader`, a `QueryProperties` table
  (`@ExtendedProperties`: the render hint as Kusto reports a `render`), the `PrimaryResult`
  table with Kusto column types, a `QueryCompletionInformation` table holding shoal's
  pruning stats (one `Stats` row, JSON payload), and `DataSetCompletion`.
- `POST /v1/rest/mgmt` `{"csl": ".show tables" | ".show table T schema [as json]" |
  ".show table T cslschema"}`: Kusto's v1 answer (`{"Tables": [...]}`); the commands on
  one table (`.drop table`, `.rename table`, `.alter table T policy retention`, `.show
  table T details`) are `shoal.frontends.kusto.table_commands`', the discovery commands
  tools run first (`.show databases`, `.show version`, `.show database X schema as json`,
  `.show table T`, `.show tables details`, `.show functions`)
  `shoal.frontends.kusto.discovery`'.

`db` is accepted and ignored: a shoal server holds one database (named `shoal` in the
answers). Both routes take `Content-Type: application/json` only (with any parameters, as
Kusto clients send `application/json; charset=utf-8`): anything else is 415 before the
body is read, so a browser form or `text/plain` request, which needs no preflight, is never
run. Column types: `datetime` (ISO 8601, UTC), `long`, `int`, `real`, `bool`, `string`,
`dynamic` (a KQL dynamic value or an array/struct column: JSON values), `decimal`. Errors
are shoal's error document, which carries the `code` and `message` of Kusto's OneApiError
shape. Scope: `query`, as for `POST /v1/query`; the management commands that change a table
need `admin`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pyarrow as pa
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from shoal.errors import (BadJsonError, JsonLimitError, ShoalError, TableNotFoundError,
                          UnavailableError)
from shoal.query.routing import engine_mode
from shoal.frontends.kusto.discovery import DOTNET, KIND_TYPES, run_discovery_command
from shoal.frontends.kusto.table_commands import is_changing, run_table_command
from shoal.http.auth import bearer_token, require_scope
from shoal.http.body import read_body
from shoal.http.errors import (BadRequestError, UnsupportedMediaTypeError, details_for,
                                 error_document, headers_for, status_for)
from shoal.http.statements import MAX_QUERY_BYTES, run_on_engine
from shoal.http.state import request_client, server_state
from shoal.types.jsonlimits import loads as json_loads

router = APIRouter(tags=["kusto"])
DATABASE = "shoal"
_KIND_TYPES, _DOTNET = KIND_TYPES, DOTNET
_SHOW_SCHEMA = re.compile(r"^\.show\s+table\s+(\[?['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1\]?\s+"
                          r"(schema(?:\s+as\s+json)?|cslschema)\s*;?$", re.IGNORECASE)


async def _command(request: Request) -> str:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise UnsupportedMediaTypeError(
            f"{request.url.path} takes Content-Type: application/json, got "
            f"{content_type[:100] or '(none)'!r}")
    raw = await read_body(request, limit=MAX_QUERY_BYTES)
    try:
        doc = json_loads(raw or b"null", what="the body")
    except JsonLimitError:
        raise
    except BadJsonError as e:
        raise BadRequestError(str(e)) from None
    csl = doc.get("csl") if isinstance(doc, dict) else None
    if not isinstance(csl, str) or not csl.strip():
        raise BadRequestError('expected a JSON object {"db": "...", "csl": "<query>"}',
                              details=[{"line": None, "field": "csl",
                                        "message": "missing or empty"}])
    return csl


def _headers(request: Request) -> dict[str, str]:
    return {"x-ms-client-request-id": request.headers.get("x-ms-client-request-id",
                                                          uuid.uuid4().hex),
            "x-ms-activity-id": str(uuid.uuid4())}


def kusto_error(exc: ShoalError, request: Request) -> JSONResponse:
    """shoal's error document plus Kusto's OneApiError fields (`@type`, `@message`), which
    Kusto clients show as the error's description."""
    doc = error_document(exc.code, str(exc), details_for(exc))
    doc["error"].update({"@type": f"shoal.{type(exc).__name__}", "@message": str(exc),
                         "@permanent": not isinstance(exc, UnavailableError)})
    return JSONResponse(doc, status_code=status_for(exc),
                        headers={**headers_for(exc), **_headers(request)})


async def _answer(handler: Callable[[Request], Awaitable[JSONResponse]],
                  request: Request) -> JSONResponse:
    """`handler`'s answer, or a shoal error in the shape Kusto clients read."""
    try:
        return await handler(request)
    except ShoalError as e:
        return kusto_error(e, request)


@router.post("/v2/rest/query", dependencies=[Depends(require_scope("query"))])
async def kusto_query(request: Request) -> JSONResponse:
    return await _answer(_query, request)


async def _query(request: Request) -> JSONResponse:
    state = server_state(request)
    state.check_accepting()
    csl = await _command(request)
    engine = engine_mode(None, state.db.config.query_engine)
    result = await run_on_engine(state, csl, prune=True, engine=engine, kql=True,
                                 client=request_client(request))
    stats = result.stats.to_json()
    stats["truncated"] = result.truncated is not None
    columns, rows = primary_result(result.table, result.kinds)
    properties: list[list[Any]] = []
    if result.render is not None:
        viz = {"Visualization": result.render["visualization"],
               **{k: v for k, v in (result.render.get("properties") or {}).items()}}
        properties.append([1, "Visualization", json.dumps(viz)])
    frames = [
        {"FrameType": "DataSetHeader", "IsProgressive": False, "Version": "v2.0",
         "IsFragmented": False, "ErrorReportingPlacement": "EndOfTable"},
        {"FrameType": "DataTable", "TableId": 0, "TableKind": "QueryProperties",
         "TableName": "@ExtendedProperties",
         "Columns": [{"ColumnName": "TableId", "ColumnType": "int"},
                     {"ColumnName": "Key", "ColumnType": "string"},
                     {"ColumnName": "Value", "ColumnType": "dynamic"}],
         "Rows": properties},
        {"FrameType": "DataTable", "TableId": 1, "TableKind": "PrimaryResult",
         "TableName": "PrimaryResult", "Columns": columns, "Rows": rows},
        {"FrameType": "DataTable", "TableId": 2, "TableKind": "QueryCompletionInformation",
         "TableName": "QueryCompletionInformation",
         "Columns": [{"ColumnName": "Timestamp", "ColumnType": "datetime"},
                     {"ColumnName": "ClientRequestId", "ColumnType": "string"},
                     {"ColumnName": "ActivityId", "ColumnType": "guid"},
                     {"ColumnName": "SubActivityId", "ColumnType": "guid"},
                     {"ColumnName": "ParentActivityId", "ColumnType": "guid"},
                     {"ColumnName": "Level", "ColumnType": "int"},
                     {"ColumnName": "LevelName", "ColumnType": "string"},
                     {"ColumnName": "StatusCode", "ColumnType": "int"},
                     {"ColumnName": "StatusCodeName", "ColumnType": "string"},
                     {"ColumnName": "EventType", "ColumnType": "int"},
                     {"ColumnName": "EventTypeName", "ColumnType": "string"},
                     {"ColumnName": "Payload", "ColumnType": "string"}],
         "Rows": [[_now_iso(), request.headers.get("x-ms-client-request-id", ""),
                   str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4()), 4, "Info", 0,
                   "S_OK (0)", 4, "QueryInfo", json.dumps({"shoal_stats": stats,
                                                           "sql": result.translated_sql})]]},
        {"FrameType": "DataSetCompletion", "HasErrors": False, "Cancelled": False},
    ]
    return JSONResponse(frames, headers=_headers(request))


def primary_result(table: pa.Table, kinds: list[str | None] | None
                   ) -> tuple[list[dict[str, str]], list[list[Any]]]:
    """Kusto columns and rows of an answer; `kinds`: the KQL translation's column kinds."""
    from shoal.query.results import json_rows

    types = [kusto_type(f.type, kinds[i] if kinds is not None and i < len(kinds) else None)
             for i, f in enumerate(table.schema)]
    rows = json_rows(table)
    dynamic = [i for i, t in enumerate(types) if t == "dynamic"]
    for row in rows:
        for i in dynamic:
            row[i] = _dynamic_value(row[i])
    columns = [{"ColumnName": f.name, "ColumnType": t}
               for f, t in zip(table.schema, types, strict=True)]
    return columns, rows


def kusto_type(arrow: pa.DataType, kind: str | None) -> str:
    if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow):
        return "datetime"
    if pa.types.is_boolean(arrow):
        return "bool"
    if pa.types.is_int64(arrow) or pa.types.is_uint32(arrow):
        return "long"
    if pa.types.is_integer(arrow):
        return "int" if arrow.bit_width <= 32 else "long"
    if pa.types.is_floating(arrow):
        return "real"
    if pa.types.is_decimal(arrow):
        return "decimal"
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow) or pa.types.is_struct(
            arrow) or pa.types.is_map(arrow):
        return "dynamic"
    if kind == "dynamic":
        return "dynamic"
    return "string"


def _dynamic_value(value: Any) -> Any:
    """A dynamic cell: JSON text becomes its value; a path's plain string stays a string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


# ---- management commands ----------------------------------------------------------------------
@router.post("/v1/rest/mgmt", dependencies=[Depends(require_scope("query"))])
async def kusto_mgmt(request: Request) -> JSONResponse:
    return await _answer(_mgmt, request)


async def _mgmt(request: Request) -> JSONResponse:
    import anyio

    state = server_state(request)
    csl = (await _command(request)).strip()
    if is_changing(csl) and state.tokens.enabled:
        state.tokens.allows(bearer_token(request), "admin")
    answer = await anyio.to_thread.run_sync(lambda: run_table_command(csl, state.db, DATABASE)
                                            or run_discovery_command(csl, state.db, DATABASE))
    if answer is not None:
        return JSONResponse({"Tables": [_v1_table(*answer)]}, headers=_headers(request))
    tables = await anyio.to_thread.run_sync(state.db.catalog.list_tables)
    if re.fullmatch(r"\.show\s+tables\s*;?", csl, re.IGNORECASE):
        table = _v1_table(["TableName", "DatabaseName", "Folder", "DocString"],
                          ["string"] * 4, [[t.name, DATABASE, "", ""] for t in tables])
        return JSONResponse({"Tables": [table]}, headers=_headers(request))
    m = _SHOW_SCHEMA.match(csl)
    if m is None:
        raise BadRequestError(f"unsupported management command {csl[:80]!r}: shoal answers "
                              ".show databases, .show version, .show database X schema as "
                              "json, .show tables [details], .show table T [schema|cslschema|"
                              "details], .show functions, .drop table, .rename table and "
                              ".alter table T policy retention",
                              code="unsupported_command")
    name, form = m.group(2).lower(), m.group(3).lower()
    info = next((t for t in tables if t.name == name), None)
    if info is None:
        raise TableNotFoundError(name)
    cols = [(c.name, _KIND_TYPES.get(c.type.kind, "string")) for c in info.schema.columns]
    if form == "cslschema":
        table = _v1_table(["TableName", "Schema", "DatabaseName", "Folder", "DocString"],
                          ["string"] * 5, [[name, ", ".join(f"{n}:{t}" for n, t in cols),
                                            DATABASE, "", ""]])
    else:
        schema = {"Name": name, "OrderedColumns": [
            {"Name": n, "Type": _DOTNET[t], "CslType": t} for n, t in cols]}
        table = _v1_table(["TableName", "Schema", "DatabaseName", "Folder", "DocString"],
                          ["string"] * 5, [[name, json.dumps(schema), DATABASE, "", ""]])
    return JSONResponse({"Tables": [table]}, headers=_headers(request))


def _v1_table(names: list[str], types: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"TableName": "Table_0",
            "Columns": [{"ColumnName": n, "DataType": _DOTNET[t].split(".")[-1],
                         "ColumnType": t} for n, t in zip(names, types, strict=True)],
            "Rows": rows}
