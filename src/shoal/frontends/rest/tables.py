"""Table management over HTTP: create, list, describe, add/widen columns (docs/http-api.md).

Bodies are validated *after* authentication (a refused caller learns nothing about its
body) and every problem with a table definition — missing fields, unknown types, bad
names, header rules — is a 400 `invalid_schema` whose details name the field. Responses are
the describe document of `shoal.catalog.describe`.

Catalog work runs in worker threads, never on the event loop. The body is read by hand
(capped at `MAX_DEFINITION_BYTES`) rather than by FastAPI, which would buffer and decode it
before the auth dependency runs; the OpenAPI document describes it (`shoal.server.openapi`).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, ValidationError

from shoal.errors import BadJsonError, InvalidSchemaError
from shoal.maintenance.policy import parse_duration
from shoal.http.auth import require_scope
from shoal.http.body import read_body
from shoal.http.errors import BadRequestError
from shoal.http.state import server_state
from shoal.types import Column, parse_type
from shoal.types.jsonlimits import loads as json_loads

# Table definitions are small; no reason to buffer megabytes before authentication.
MAX_DEFINITION_BYTES = 1 << 20

router = APIRouter(prefix="/v1/tables", tags=["tables"])
M = TypeVar("M", bound=BaseModel)


class ColumnSpec(BaseModel):
    """One column as the wire spells it; `header`: "*" binds all Kafka headers, else a key."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    header: str | None = None
    nullable: bool = True
    default: Any = None

    def to_column(self) -> Column:
        return Column(self.name, parse_type(self.type), nullable=self.nullable,
                      default=self.default, header=self.header)


class CreateTableRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    columns: list[ColumnSpec] = []
    mode: str = "evolve"            # validated by the catalog, so errors read the same
    retention: str | None = None


class AddColumnsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    columns: list[ColumnSpec]


def _parse(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as e:
        details = [{"line": None, "field": ".".join(str(p) for p in err["loc"]) or None,
                    "message": err["msg"]} for err in e.errors()]
        head = details[0]
        where = f"{head['field']}: " if head["field"] else ""
        raise BadRequestError(f"invalid table definition: {where}{head['message']}",
                              code="invalid_schema", details=details) from None


def _columns(specs: list[ColumnSpec]) -> list[Column]:
    out: list[Column] = []
    for i, spec in enumerate(specs):
        try:
            out.append(spec.to_column())
        except InvalidSchemaError as e:
            raise BadRequestError(str(e), code=e.code, details=[
                {"line": None, "field": f"columns.{i}.type", "message": str(e)}]) from None
    return out


async def _definition(request: Request, model: type[M]) -> M:
    raw = await read_body(request, limit=MAX_DEFINITION_BYTES)
    try:  # under the JSON depth and number-length limits (shoal.types.jsonlimits)
        doc = json_loads(raw, what="body")
    except BadJsonError as e:
        raise BadRequestError(str(e), code="invalid_schema", details=[
            {"line": None, "field": e.field, "message": str(e)}]) from None
    return _parse(model, doc)


@router.post("", status_code=201, dependencies=[Depends(require_scope("admin"))])
async def create_table(request: Request) -> dict[str, Any]:
    """Create a table; 201 with its describe document."""
    req = await _definition(request, CreateTableRequest)
    db = server_state(request).db
    properties: dict[str, Any] = {}
    if req.retention is not None:
        if not req.retention.strip():
            raise BadRequestError("retention must not be empty", code="invalid_schema",
                                  details=[{"line": None, "field": "retention",
                                            "message": "must not be empty"}])
        try:
            parse_duration(req.retention)
        except InvalidSchemaError as e:
            raise BadRequestError(str(e), code=e.code, details=[
                {"line": None, "field": "retention", "message": str(e)}]) from None
        properties["retention"] = req.retention.strip()
    columns = _columns(req.columns)

    def work() -> dict[str, Any]:
        db.create_table(req.name, columns, mode=req.mode,  # type: ignore[arg-type]
                        properties=properties)
        return db.describe(req.name)

    return await anyio.to_thread.run_sync(work)


@router.get("", dependencies=[Depends(require_scope("query"))])
def list_tables(request: Request) -> dict[str, Any]:
    return {"tables": server_state(request).db.tables()}


@router.get("/{table}", dependencies=[Depends(require_scope("query"))])
def describe_table(request: Request, table: str) -> dict[str, Any]:
    return server_state(request).db.describe(table)


@router.post("/{table}/columns", dependencies=[Depends(require_scope("admin"))])
async def add_columns(request: Request, table: str) -> dict[str, Any]:
    """Add nullable columns or widen existing ones; 200 with the new describe document."""
    req = await _definition(request, AddColumnsRequest)
    if not req.columns:
        raise BadRequestError("columns must not be empty", code="invalid_schema",
                              details=[{"line": None, "field": "columns",
                                        "message": "must not be empty"}])
    columns = _columns(req.columns)
    db = server_state(request).db

    def work() -> dict[str, Any]:
        db.add_columns(table, columns)
        return db.describe(table)

    return await anyio.to_thread.run_sync(work)


# ---- history and storage: what the console's table page shows ----------------------------

SNAPSHOT_LIMIT = 1000


@router.get("/{table}/snapshots", dependencies=[Depends(require_scope("query"))])
def table_snapshots(request: Request, table: str,
                    limit: Annotated[int, Query(ge=1, le=SNAPSHOT_LIMIT)] = 100
                    ) -> dict[str, Any]:
    """The table's snapshot timeline, newest first: at most `limit` snapshots (expired ones
    are gone), each with its operation, schema version, time and the commit's summary
    (`added_rows`, `added_extents`, ... as the operation records them)."""
    snapshots = server_state(request).db.catalog.snapshots(table)
    newest = sorted(snapshots, key=lambda s: s.snapshot_id, reverse=True)[:limit]
    return {"table": table, "total": len(snapshots), "snapshots": [
        {"snapshot_id": s.snapshot_id, "parent_id": s.parent_id, "operation": s.operation,
         "schema_version": s.schema_version, "created_at": s.created_at,
         "summary": s.summary} for s in newest]}


@router.get("/{table}/schemas", dependencies=[Depends(require_scope("query"))])
def table_schemas(request: Request, table: str) -> dict[str, Any]:
    """Every schema version of the table, oldest first, with the columns each one added or
    widened relative to the one before."""
    versions: list[dict[str, Any]] = []
    before: dict[str, str] = {}
    for schema in server_state(request).db.catalog.schema_history(table):
        columns = [_column_doc(c) for c in schema.columns]
        now = {c["name"]: c["type"] for c in columns}
        versions.append({
            "version": schema.version, "columns": columns,
            "added": [n for n in now if n not in before],
            "widened": [n for n, t in now.items() if n in before and before[n] != t]})
        before = now
    return {"table": table, "versions": versions}


@router.get("/{table}/storage", dependencies=[Depends(require_scope("query"))])
def table_storage(request: Request, table: str) -> dict[str, Any]:
    """What the table's current snapshot holds: rows, extents, blocks, bytes in the object
    store and the event-time range (`min_ts`/`max_ts`, ns since the epoch, or null)."""
    catalog = server_state(request).db.catalog
    info = catalog.load_table(table)
    entries = catalog.manifests(table, info.current_snapshot_id)
    times = [e.min_ts for e in entries if e.min_ts is not None]
    ends = [e.max_ts for e in entries if e.max_ts is not None]
    return {"table": table, "snapshot_id": info.current_snapshot_id,
            "rows": sum(e.row_count for e in entries), "extents": len(entries),
            "blocks": sum(e.block_count for e in entries),
            "bytes": sum(e.byte_size for e in entries),
            "min_ts": min(times) if times else None, "max_ts": max(ends) if ends else None}


def _column_doc(c: Column) -> dict[str, Any]:
    doc = {"name": c.name, "type": str(c.type), "nullable": c.nullable, "header": c.header}
    if c.default is not None:
        doc["default"] = c.default
    return doc
