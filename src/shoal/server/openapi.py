"""The server's OpenAPI document: what every route really takes, answers and refuses.

FastAPI's generated document cannot tell the truth about this server: most routes read
their bodies by hand (after authentication, under a byte cap), bad input is a 400 where
FastAPI would say 422, every error shares one document, and OTLP speaks protobuf. So the
document is written here and installed by `install_openapi(app)` (called by `create_app`):
`app.openapi()`, served at `GET /openapi.json`, returns `openapi_document(app)`.

Contract:
- Every route FastAPI lists for the app appears. A route described in `_operations()` gets
  its hand-written entry; any other keeps FastAPI's generated one, flagged
  `x-shoal-undocumented: true` (a test refuses the flag, so no route goes undocumented).
- Request bodies: JSON schemas of the wire models (`shoal.frontends.rest.tables`' pydantic models,
  hand-written schemas elsewhere); NDJSON (`application/x-ndjson`, one JSON object per line,
  gzip with `Content-Encoding`) for `/v1/ingest/{table}`; OTLP protobuf or OTLP/JSON;
  Prometheus remote write's snappy-compressed protobuf for `/api/v1/write`.
- Answers: every status a route can give, each with its media type and schema. Errors are
  the shared document `{"error": {"code", "message", "details": [{"line", "field",
  "message"}]}}` (OTLP routes: a `google.rpc.Status` in the request's encoding, or the shared
  document for refusals made before the OTLP handler runs; remote write: one line of plain
  text, or the shared document for refusals made before its handler runs). `Retry-After`
  (whole seconds) comes with every 429 and 503, `WWW-Authenticate` with every 401 and with
  the 403 of a token that lacks the route's scope.
- No operation documents a 500: a 500 is a bug, whatever the input. A method a path does
  not serve is a 405 with the shared error document.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from shoal.frontends.rest.tables import AddColumnsRequest, CreateTableRequest

Schema = dict[str, Any]
Operation = dict[str, Any]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TEXT = "text/plain"
IDENTIFIER = "^[a-z_][a-z0-9_]*$"
# Visible ASCII, no white space at either end (the server takes 1-256 printable characters,
# and HTTP strips white space around a header value).
IDEMPOTENCY_KEY = "^[!-~]([ -~]*[!-~])?$"
TYPE_NAMES = ("bool", "boolean", "int", "integer", "int32", "long", "bigint", "int64", "real",
              "double", "float64", "string", "text", "varchar", "timestamp", "datetime",
              "dynamic", "json", "bytes", "binary", "array<struct<key string, value bytes>>")


# ---- the document --------------------------------------------------------------------------

def install_openapi(app: FastAPI) -> None:
    """Serve `openapi_document(app)` at `/openapi.json` (built on first use, then kept)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def openapi_document(app: FastAPI) -> dict[str, Any]:
    generated = get_openapi(title=app.title, version=app.version, routes=app.routes)
    described = _operations()
    paths: dict[str, dict[str, Operation]] = {}
    for path, ops in generated["paths"].items():
        for method, op in ops.items():
            mine = described.get((method.upper(), path))
            if mine is None:
                op = {**op, "x-shoal-undocumented": True}
            paths.setdefault(path, {})[method] = mine or op
    paths["/openapi.json"] = {"get": _openapi_json()}
    return {
        "openapi": "3.1.0",
        "info": {"title": app.title, "version": app.version, "description": _INFO},
        "paths": paths,
        "components": {"schemas": _schemas(), "responses": _error_responses(),
                       "headers": _headers(),
                       "securitySchemes": {"bearer": {
                           "type": "http", "scheme": "bearer",
                           "description": "A token of SHOAL_TOKENS or the tokens file, with "
                                          "its scopes (ingest, query, metrics, admin; admin "
                                          "implies the others). Without configured tokens "
                                          "the server binds to loopback only and needs "
                                          "none."}}},
    }


_INFO = """\
shoal's HTTP API: table management, NDJSON ingest, SQL queries, OTLP/HTTP, maintenance
status and operational endpoints.

Every error is `{"error": {"code", "message", "details": [{"line", "field", "message"}]}}`
(OTLP routes answer a `google.rpc.Status` instead, in the request's encoding). Statuses:
400 bad input (the message and `details` name line and field), 401 missing or unknown
bearer token, 403 a token without the route's scope (`forbidden`), a browser `Origin` that
is not allowed (`forbidden_origin`) or a `Host` that is neither loopback nor configured
(`forbidden_host`), 404 unknown table or path, 405 a method the path does not serve, 408
a request body that arrives too slowly (`request_timeout`), 409 a schema conflict or an
idempotency key first used on another table, 413 a body over the cap, 415 an unsupported
`Content-Type` or `Content-Encoding`, 429 backpressure or too many queries and 503 not
ready or engine unavailable (both with `Retry-After`, in seconds).
"""


# ---- schemas -------------------------------------------------------------------------------

def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _obj(properties: dict[str, Schema], *, optional: tuple[str, ...] = (),
         closed: bool = True, **extra: Any) -> Schema:
    """An object with `properties`, all required but `optional`."""
    out: Schema = {"type": "object", "properties": properties,
                   "required": [k for k in properties if k not in optional]}
    if closed:
        out["additionalProperties"] = False
    return {**out, **extra}


INT: Schema = {"type": "integer"}
COUNT: Schema = {"type": "integer", "minimum": 0}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _wire_models() -> dict[str, Schema]:
    """The table-definition models of `shoal.frontends.rest.tables`, with the rules the server
    checks after pydantic (names, type names, modes, retention) written into the schema."""
    out: dict[str, Schema] = {}
    for model in (CreateTableRequest, AddColumnsRequest):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    column = out["ColumnSpec"]["properties"]
    column["name"] |= {"pattern": IDENTIFIER, "description": "not `_timestamp` nor `props`"}
    column["type"] = {"title": "Type", "description": "a type name (any case) or vector(N)",
                      "anyOf": [{"enum": list(TYPE_NAMES)},
                                {"type": "string", "pattern": "^vector\\([1-9][0-9]{0,3}\\)$"}]}
    create = out["CreateTableRequest"]["properties"]
    create["name"] |= {"pattern": IDENTIFIER}
    create["mode"] |= {"enum": ["evolve", "drop", "reject"]}
    create["retention"] = _nullable({"type": "string", "description": "e.g. 30s, 15m, 12h, 7d",
                                     "pattern": "^[1-9][0-9]{0,5}[smhdw]$"}) | {"default": None}
    out["AddColumnsRequest"]["properties"]["columns"] |= {"minItems": 1}
    return out


def _schemas() -> dict[str, Schema]:
    detail = _obj({"line": _nullable({"type": "integer", "minimum": 1}),
                   "column": {**_nullable({"type": "integer", "minimum": 1}),
                              "description": "query errors: the column of `line` where the "
                                             "statement went wrong"},
                   "field": _nullable(STR), "message": STR}, optional=("column",))
    column = _obj({"name": STR, "type": STR, "nullable": BOOL, "header": _nullable(STR),
                   "default": {}}, optional=("default",))
    scan = {"extents_considered": COUNT, "extents_pruned": COUNT, "extents_read": COUNT,
            "blocks_considered": COUNT, "blocks_pruned": COUNT, "blocks_read": COUNT,
            "bytes_read": COUNT}
    unit = _obj({"id": INT, "kind": STR, "table": _nullable(STR), "state": STR,
                 "attempts": COUNT, "worker": _nullable(STR),
                 "lease_expires_at": _nullable({"type": "number"}),
                 "created_at": {"type": "number"}, "updated_at": {"type": "number"},
                 "result": _nullable({"type": "object"})})
    int64 = {"anyOf": [COUNT, {"type": "string", "pattern": "^[0-9]+$"}]}
    return {
        **_wire_models(),
        "ErrorDetail": detail,
        # the Prometheus API's own documents (`shoal.frontends.prometheus.api`)
        "PromSuccess": _obj({"status": {"const": "success"}, "data": {},
                             "warnings": {"type": "array", "items": STR}},
                            optional=("warnings",)),
        "PromError": _obj({"status": {"const": "error"},
                           "errorType": {"enum": ["bad_data", "execution", "timeout",
                                                  "unavailable", "internal", "not_found"]},
                           "error": STR}),
        "Error": _obj({"error": _obj({
            "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                     "description": "snake_case, e.g. bad_request, invalid_schema, "
                                    "bad_payload, table_not_found, forbidden_origin"},
            "message": STR, "details": {"type": "array", "items": _ref("ErrorDetail")},
            # the Kusto routes add what Kusto clients read from an error
            "@type": STR, "@message": STR, "@permanent": BOOL},
            optional=("@type", "@message", "@permanent"))}),
        "Table": _obj({"name": STR, "schema_version": {"type": "integer", "minimum": 1},
                       "mode": {"enum": ["evolve", "drop", "reject"]},
                       "retention": _nullable(STR),
                       "columns": {"type": "array", "items": column},
                       "snapshot_id": INT, "row_count": COUNT, "extent_count": COUNT,
                       "properties": {"type": "object"}}),
        "TableList": _obj({"tables": {"type": "array", "items": _ref("Table")}}),
        "TableSnapshots": _obj({"table": STR, "total": COUNT, "snapshots": {
            "type": "array", "description": "newest first", "items": _obj({
                "snapshot_id": INT, "parent_id": _nullable(INT),
                "operation": {**STR, "description": "create, append, schema, compact, "
                                                    "retention, ..."},
                "schema_version": {"type": "integer", "minimum": 1},
                "created_at": {"type": "number", "description": "seconds since the epoch"},
                "summary": {"type": "object", "description": "what the commit recorded, "
                                                             "e.g. added_rows"}})}}),
        "TableSchemas": _obj({"table": STR, "versions": {
            "type": "array", "description": "oldest first", "items": _obj({
                "version": {"type": "integer", "minimum": 1},
                "columns": {"type": "array", "items": column},
                "added": {"type": "array", "items": STR},
                "widened": {"type": "array", "items": STR}})}}),
        "TableStorage": _obj({"table": STR, "snapshot_id": INT, "rows": COUNT,
                              "extents": COUNT, "blocks": COUNT, "bytes": COUNT,
                              "min_ts": _nullable(INT), "max_ts": _nullable(INT)}),
        "IngestAck": _obj({
            "table": STR, "snapshot_id": INT, "rows": COUNT, "replayed": BOOL,
            "new_columns": {"type": "array", "items": STR},
            "rejected": {"type": "array", "items": _ref("ErrorDetail"),
                         "description": "the refused lines (partial=true), capped"},
            "extent_ids": {"type": "array", "items": STR},
            "rejected_count": {**COUNT, "description": "all refused lines, past the cap"},
            "warnings": {"type": "array", "description": "accepted, but likely not meant "
                                                         "(epoch seconds read as nanoseconds)",
                         "items": _obj({"column": STR, "message": STR,
                                        "line": _nullable(COUNT)})}},
            optional=("rejected_count", "warnings")),
        "QueryRequest": {
            "type": "object",
            "properties": {"sql": {"type": "string", "minLength": 1,
                                   "description": "SELECT, WITH, EXPLAIN or shoal's DDL"},
                           "kql": {"type": "string", "minLength": 1,
                                   "description": "a KQL query (translated to SQL; see the "
                                                  "docs/kql.md)"}},
            "anyOf": [{"required": ["sql"]}, {"required": ["kql"]}]},
        "QueryStats": _obj({**scan, "scans": {"type": "array", "items": _obj(
            {"table": STR, "alias": STR, "snapshot_id": INT, "pushed": _nullable(STR),
             "source": {**STR, "description": "foreign tables: the source (password masked)"},
             "source_rows": {**COUNT, "description": "foreign tables: rows the source "
                                                     "returned"},
             **scan}, optional=("source", "source_rows"))}}, closed=False),
        "QueryAnswer": _obj({
            "columns": {"type": "array", "items": _obj({"name": STR, "type": STR})},
            "rows": {"type": "array", "items": {"type": "array"}},
            "stats": _ref("QueryStats"),
            "sql": {**STR, "description": "KQL only: the SQL statement the query ran as"},
            "render": {**_nullable({"type": "object"}),
                       "description": "KQL only: the query's render hint "
                                      "({visualization, properties}) or null"}},
            optional=("sql", "render")),
        "KustoRequest": _obj({"db": STR, "csl": {"type": "string", "minLength": 1},
                              "properties": {}}, optional=("db", "properties"),
                             closed=False),
        "KustoFrame": {"type": "object", "required": ["FrameType"],
                       "properties": {"FrameType": {"enum": ["DataSetHeader", "DataTable",
                                                             "DataSetCompletion"]}}},
        "MaintenanceUnit": unit,
        "MaintenanceStatus": _obj({
            "counts": {"type": "object", "additionalProperties": COUNT,
                       "required": ["pending", "running", "done", "failed"]},
            "last": {"type": "object", "additionalProperties": unit},
            "units": {"type": "array", "items": unit},
            "service": _nullable(_obj({"running": BOOL, "worker": STR}))}),
        "OtlpStatus": {"type": "object", "description": "google.rpc.Status (OTLP/JSON)",
                       "properties": {"code": INT, "message": STR,
                                      "details": {"type": "array"}}},
        "OtlpExportResponse": {
            "type": "object", "description": "Export*ServiceResponse (OTLP/JSON)",
            "properties": {"partialSuccess": {"type": "object", "properties": {
                "rejectedLogRecords": int64, "rejectedSpans": int64,
                "rejectedDataPoints": int64, "errorMessage": STR}}}},
    }


# ---- errors --------------------------------------------------------------------------------

# status -> (component name, what it means here)
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "Bad input: parameters, body, lines (with line and field), SQL."),
    401: ("Unauthorized", "No bearer token, or one the server does not know."),
    403: ("Forbidden", "A token without the route's scope (`forbidden`), a browser Origin "
                       "that is not allowed (`forbidden_origin`) or a Host that is neither "
                       "loopback nor configured (`forbidden_host`)."),
    404: ("NotFound", "Unknown table."),
    408: ("RequestTimeout", "The body did not arrive in time (`request_timeout`)."),
    409: ("Conflict", "A schema conflict, an existing table, or an idempotency key first "
                      "used on another table."),
    413: ("PayloadTooLarge", "The body is over the cap (before or after gzip decoding)."),
    415: ("UnsupportedMediaType", "An unsupported Content-Type or Content-Encoding."),
    429: ("TooManyRequests", "Backpressure or too many concurrent queries; retry after "
                             "Retry-After seconds."),
    503: ("ServiceUnavailable", "Not ready (starting, stopping, catalog or engine "
                                "unavailable); retry after Retry-After seconds."),
}


def _headers() -> dict[str, Any]:
    return {
        "RetryAfter": {"description": "seconds to wait before retrying", "required": True,
                       "schema": {"type": "integer", "minimum": 1}},
        "WWWAuthenticate": {"description": "the bearer challenge", "required": True,
                            "schema": {"type": "string", "pattern": "^Bearer "}},
        "WWWAuthenticateScope": {"description": "the bearer challenge naming the missing "
                                                "scope, when a token lacks it",
                                 "schema": {"type": "string", "pattern": "^Bearer "}},
    }


def _error_headers(status: int) -> dict[str, Any]:
    name = {429: "RetryAfter", 503: "RetryAfter", 401: "WWWAuthenticate",
            403: "WWWAuthenticateScope"}.get(status)
    header = {429: "Retry-After", 503: "Retry-After"}.get(status, "WWW-Authenticate")
    return {header: {"$ref": f"#/components/headers/{name}"}} if name else {}


def _error_responses() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, (name, description) in _ERRORS.items():
        headers = _error_headers(status)
        out[name] = {"description": description,
                     "content": {JSON: {"schema": _ref("Error")}},
                     **({"headers": headers} if headers else {})}
        out[f"Otlp{name}"] = {
            "description": description + " A google.rpc.Status in the request's encoding "
                                         "(the shared error document for refusals made "
                                         "before the OTLP handler runs).",
            "content": {PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                        JSON: {"schema": {"anyOf": [_ref("OtlpStatus"), _ref("Error")]}}},
            **({"headers": headers} if headers else {})}
        out[f"Prom{name}"] = {
            "description": description + " One line of plain text, which Prometheus logs "
                                         "(the shared error document for refusals made "
                                         "before the remote write handler runs).",
            "content": {TEXT: {"schema": STR}, JSON: {"schema": _ref("Error")}},
            **({"headers": headers} if headers else {})}
    return out


def _prom_responses(success: dict[str, Any], *statuses: int) -> dict[str, Any]:
    """The Prometheus routes: their own error document for what their handler answers,
    the shared one for refusals before it runs (auth, Host/Origin)."""
    out = _responses(success, *AUTH)
    for status in statuses:
        out[str(status)] = {"description": "Prometheus's error document (errorType "
                                           "bad_data, execution, timeout, unavailable)",
                            "content": {JSON: {"schema": {"anyOf": [_ref("PromError"),
                                                                    _ref("Error")]}}},
                            **({"headers": _error_headers(status)}
                               if status in (429, 503) else {})}
    return out


def _prom_ops() -> dict[tuple[str, str], Operation]:
    """`/api/v1/...`: GET with query parameters, POST with the same fields as a form."""
    def param(name: str, description: str, example: Any, *,
              array: bool = False) -> dict[str, Any]:
        schema: Schema = {"type": "array", "items": STR} if array else STR
        return {"name": name, "in": "query", "required": False, "schema": schema,
                "description": description, "example": example}

    time_ = "RFC 3339 or unix seconds"
    fields = {
        "query": [param("query", "a PromQL expression", "sum(vector(1))"),
                  param("time", time_, "1700000000"),
                  param("timeout", "seconds or a duration", "30s")],
        "query_range": [param("query", "a PromQL expression", "vector(1) * 2"),
                        param("start", time_, "1700000000"),
                        param("end", time_, "2023-11-14T22:23:20Z"),
                        param("step", "seconds or a duration", "60"),
                        param("timeout", "seconds or a duration", "30")],
        "series": [param("match[]", "a series selector", ["up"], array=True),
                   param("start", time_, "1700000000"), param("end", time_, "1700003600"),
                   param("limit", "at most", "100")],
        "labels": [param("match[]", "a series selector", ["up"], array=True),
                   param("start", time_, "1700000000"), param("end", time_, "1700003600"),
                   param("limit", "at most", "100")],
    }
    ok = _ok(_ref("PromSuccess"), "Prometheus's success document")
    ops: dict[tuple[str, str], Operation] = {}
    for name, params in fields.items():
        path = f"/api/v1/{name}"
        errors = (400, 422, 429, 503) if name.startswith("query") else (400, 429, 503)
        ops[("GET", path)] = _op(f"prom_{name}_get", f"Prometheus API: {name}", "prometheus",
                                 scope="query", parameters=params,
                                 responses=_prom_responses(ok, *errors))
        form = {"type": "object", "properties": {
            p["name"]: p["schema"] for p in params}}
        ops[("POST", path)] = _op(
            f"prom_{name}_post", f"Prometheus API: {name} (form body)", "prometheus",
            scope="query", parameters=params,
            body={"required": False, "content": {
                "application/x-www-form-urlencoded": {"schema": form}}},
            responses=_prom_responses(ok, *errors, 408, 413, 415))
    ops[("GET", "/api/v1/label/{name}/values")] = _op(
        "prom_label_values", "Prometheus API: label values", "prometheus", scope="query",
        parameters=[{"name": "name", "in": "path", "required": True, "schema": STR,
                     "example": "job"}, *fields["labels"]],
        responses=_prom_responses(ok, 400, 429, 503))
    ops[("GET", "/api/v1/metadata")] = _op(
        "prom_metadata", "Prometheus API: metric metadata", "prometheus", scope="query",
        parameters=[param("metric", "one metric name", "up"),
                    param("limit", "at most", "10")],
        responses=_prom_responses(ok, 400, 429, 503))
    ops[("GET", "/api/v1/status/buildinfo")] = _op(
        "prom_buildinfo", "Prometheus API: build information", "prometheus", scope="query",
        responses=_prom_responses(ok, 400))
    # what Grafana reads besides queries (`shoal.frontends.prometheus.status`)
    expr = [param("query", "a PromQL expression", "sum(rate(x_total[5m]))")]
    for name, params, methods in (
            ("targets", [param("state", "active, dropped or any", "active"),
                         param("scrapePool", "one job", "node")], ("GET",)),
            ("query_exemplars", [*expr, *fields["series"][1:3]], ("GET", "POST")),
            ("rules", [], ("GET",)), ("alerts", [], ("GET",)),
            ("format_query", expr, ("GET", "POST")),
            ("status/runtimeinfo", [], ("GET",)), ("status/config", [], ("GET",)),
            ("status/flags", [], ("GET",)), ("status/tsdb", [], ("GET",))):
        op_name = name.replace("/", "_")
        for method in methods:
            extra: dict[str, Any] = {}
            if method == "POST":
                extra["body"] = {"required": False, "content": {
                    "application/x-www-form-urlencoded": {"schema": {
                        "type": "object", "properties": {
                            p["name"]: p["schema"] for p in params}}}}}
            statuses: tuple[int, ...] = (400, 408, 413, 415) if method == "POST" else (400,)
            ops[(method, f"/api/v1/{name}")] = _op(
                f"prom_{op_name}_{method.lower()}", f"Prometheus API: {name}", "prometheus",
                scope="query", parameters=params or None,
                responses=_prom_responses(ok, *statuses), **extra)
    return ops


def _responses(success: dict[str, Any], *statuses: int, otlp: bool = False,
               prom: bool = False) -> dict[str, Any]:
    prefix = "Otlp" if otlp else "Prom" if prom else ""
    out = dict(success)
    for status in sorted(statuses):
        out[str(status)] = {"$ref": f"#/components/responses/{prefix}{_ERRORS[status][0]}"}
    return out


# What refuses a request before its handler runs: the Host/Origin checks (403), and the
# bearer token of a route with a scope (401/403).
OPEN = (403,)
AUTH = (400, 401, 403)
BODY = (408, 413, 415)      # a body read under a cap and a deadline, of a checked type


# ---- operations ----------------------------------------------------------------------------

def _ok(schema: Schema, description: str, *, status: str = "200",
        media: str = JSON) -> dict[str, Any]:
    return {status: {"description": description, "content": {media: {"schema": schema}}}}


def _json_body(schema: Schema, **examples: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"schema": schema}
    if examples:
        content["examples"] = {k: {"value": v} for k, v in examples.items()}
    return {"required": True, "content": {JSON: content}}


def _op(op_id: str, summary: str, tag: str, responses: dict[str, Any], *,
        scope: str | None, parameters: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None) -> Operation:
    out: Operation = {"operationId": op_id, "summary": summary, "tags": [tag],
                      "security": [{"bearer": []}, {}] if scope else []}
    if scope:
        out["x-shoal-scope"] = scope
        either = " (or `query`)" if scope == "metrics" else ""
        out["description"] = (f"Needs the `{scope}` scope{either} when tokens are "
                              "configured.")
    if parameters:
        out["parameters"] = parameters
    if body:
        out["requestBody"] = body
    out["responses"] = responses
    return out


NDJSON_BODY = ("One JSON object per line (the schema's array items, each on its own line; "
               "blank lines are skipped); `_timestamp` is the event time. Gzip with "
               "Content-Encoding: gzip.")
TABLE_PATH = {"name": "table", "in": "path", "required": True,
              "schema": {"type": "string", "pattern": IDENTIFIER},
              "description": "the table name (any other name is an unknown table)"}
IDEMPOTENCY_HEADER = {
    "name": "X-Idempotency-Key", "in": "header", "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 256,
               "pattern": IDEMPOTENCY_KEY},
    "description": "a retry with the same key answers the first ack (`replayed: true`) "
                   "and writes nothing; a key first used on another table is a 409"}
ENCODING_HEADER = {"name": "Content-Encoding", "in": "header", "required": False,
                   "schema": {"enum": ["identity", "gzip", "x-gzip"]},
                   "description": "gzip bodies are decoded under the same cap"}


def _operations() -> dict[tuple[str, str], Operation]:
    table = _ok(_ref("Table"), "the describe document")
    ops: dict[tuple[str, str], Operation] = {
        ("POST", "/v1/tables"): _op(
            "create_table", "Create a table", "tables", scope="admin",
            body=_json_body(_ref("CreateTableRequest"), logs={
                "name": "logs", "columns": [{"name": "service", "type": "string"},
                                            {"name": "status", "type": "int"}],
                "retention": "7d"}),
            responses=_responses(_ok(_ref("Table"), "created: the describe document",
                                     status="201"), *AUTH, *BODY, 409)),
        ("GET", "/v1/tables"): _op(
            "list_tables", "List tables", "tables", scope="query",
            responses=_responses(_ok(_ref("TableList"), "every table"), *AUTH)),
        ("GET", "/v1/tables/{table}"): _op(
            "describe_table", "Describe a table", "tables", scope="query",
            parameters=[TABLE_PATH], responses=_responses(table, *AUTH, 404)),
        ("GET", "/v1/tables/{table}/snapshots"): _op(
            "table_snapshots", "A table's snapshot timeline (newest first)", "tables",
            scope="query",
            parameters=[TABLE_PATH, {"name": "limit", "in": "query", "required": False,
                                     "schema": {"type": "integer", "minimum": 1,
                                                "maximum": 1000, "default": 100}}],
            responses=_responses(_ok(_ref("TableSnapshots"), "the snapshots"), *AUTH, 404)),
        ("GET", "/v1/tables/{table}/schemas"): _op(
            "table_schemas", "A table's schema versions (oldest first)", "tables",
            scope="query", parameters=[TABLE_PATH],
            responses=_responses(_ok(_ref("TableSchemas"), "the schema history"),
                                 *AUTH, 404)),
        ("GET", "/v1/tables/{table}/storage"): _op(
            "table_storage", "What a table's current snapshot holds (rows, extents, bytes)",
            "tables", scope="query", parameters=[TABLE_PATH],
            responses=_responses(_ok(_ref("TableStorage"), "the storage summary"),
                                 *AUTH, 404)),
        ("POST", "/v1/tables/{table}/columns"): _op(
            "add_columns", "Add nullable columns or widen existing ones", "tables",
            scope="admin", parameters=[TABLE_PATH],
            body=_json_body(_ref("AddColumnsRequest"),
                            region={"columns": [{"name": "region", "type": "string"}]}),
            responses=_responses(table, *AUTH, *BODY, 404, 409, 503)),
        ("POST", "/v1/ingest/{table}"): _op(
            "ingest", "Ingest NDJSON rows", "ingest", scope="ingest",
            parameters=[
                TABLE_PATH,
                {"name": "mode", "in": "query", "required": False,
                 "schema": {"enum": ["evolve", "drop", "reject"]},
                 "description": "the schema mode for this batch (default: the table's)"},
                {"name": "partial", "in": "query", "required": False,
                 "schema": {"type": "boolean", "default": False},
                 "description": "write the good lines and report the bad ones"},
                IDEMPOTENCY_HEADER, ENCODING_HEADER],
            body={"required": True, "description": NDJSON_BODY, "content": {NDJSON: {
                "schema": {"type": "array", "items": {
                    "type": "object", "propertyNames": {"pattern": IDENTIFIER},
                    "description": "a record; in evolve mode a new field becomes a column, "
                                   "so its name must be identifier-safe"}},
                "examples": {"two": {"value": [{"service": "api", "status": 200},
                                               {"service": "web", "status": 503}]}}}}},
            responses=_responses(_ok(_ref("IngestAck"), "the rows are committed"),
                                 *AUTH, *BODY, 404, 409, 429, 503)),
        ("POST", "/v1/query"): _op(
            "query", "Run one SQL statement or KQL query", "query", scope="query",
            parameters=[{"name": "prune", "in": "query", "required": False,
                         "schema": {"type": "boolean", "default": True},
                         "description": "false reads every extent"},
                        {"name": "scans", "in": "query", "required": False,
                         "schema": {"type": "boolean", "default": False},
                         "description": "an Arrow answer's X-Shoal-Stats also lists the "
                                        "scans"},
                        {"name": "engine", "in": "query", "required": False,
                         "schema": {"enum": ["auto", "local", "spark"]},
                         "description": "the engine of a SELECT (default: the server's "
                                        "query_engine); the stats say which ran and why"}],
            body=_json_body(_ref("QueryRequest"), show={"sql": "SHOW TABLES"},
                            select={"sql": "SELECT 1 AS one"},
                            kql={"kql": "logs | where level == 'error' | count"}),
            responses=_responses({"200": {
                "description": "the answer; DDL (CREATE/ALTER) needs the admin scope",
                "content": {JSON: {"schema": _ref("QueryAnswer")},
                            ARROW_STREAM: {"schema": {
                                "type": "string", "format": "binary",
                                "description": "an Arrow IPC stream, for Accept: " + ARROW_STREAM
                            }}},
                "headers": {"X-Shoal-Stats": {
                    "description": "the stats (JSON; scans only with ?scans=true) of an "
                                   "Arrow answer",
                    "schema": STR},
                    "X-Shoal-Render": {
                        "description": "a KQL query's render hint (JSON), when it has one",
                        "schema": STR},
                    "X-Shoal-Kind": {
                        "description": "what the statement was: select, ddl or explain",
                        "schema": STR},
                    "X-Shoal-Sql": {
                        "description": "the SQL a KQL query ran as (a JSON string), on an "
                                       "Arrow answer",
                        "schema": STR}}}}, *AUTH, *BODY, 404, 409, 429, 503)),
        ("POST", "/v2/rest/query"): _op(
            "kusto_query", "Kusto query REST API (v2): a KQL query, Kusto's frames",
            "kusto", scope="query",
            body=_json_body(_ref("KustoRequest"),
                            count={"db": "shoal", "csl": "logs | count"}),
            responses=_responses(_ok({"type": "array", "items": _ref("KustoFrame")},
                                     "DataSetHeader, DataTables (@ExtendedProperties, "
                                     "PrimaryResult, QueryCompletionInformation), "
                                     "DataSetCompletion"),
                                 *AUTH, *BODY, 404, 409, 429, 503)),
        ("POST", "/v1/rest/mgmt"): _op(
            "kusto_mgmt", "Kusto management REST API (v1): .show tables, .show table T "
            "schema", "kusto", scope="query",
            body=_json_body(_ref("KustoRequest"), tables={"db": "shoal", "csl": ".show tables"}),
            responses=_responses(_ok(_obj({"Tables": {"type": "array", "items": {
                "type": "object"}}}), "Kusto's v1 answer: one table"), *AUTH, *BODY, 404)),
        ("GET", "/v1/maintenance"): _op(
            "maintenance_status", "Maintenance work units and their results", "maintenance",
            scope="admin",
            parameters=[{"name": "limit", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 1000,
                                    "default": 50}},
                        {"name": "table", "in": "query", "required": False, "schema": STR}],
            responses=_responses(_ok(_ref("MaintenanceStatus"), "the status"), *AUTH, 404)),
        ("GET", "/healthz"): _op(
            "healthz", "Liveness", "ops", scope=None,
            responses=_responses(_ok(_obj({"status": {"const": "ok"}}), "alive"), *OPEN)),
        ("GET", "/readyz"): _op(
            "readyz", "Readiness: accepting work and the catalog answers", "ops", scope=None,
            responses=_responses(_ok(_obj(
                {"status": {"const": "ready"},
                 "listeners": {"type": "object", "additionalProperties": _obj(
                     {"port": INT, "serving": {"type": "boolean"},
                      "required": {"type": "boolean"}, "reason": STR},
                     optional=("reason",))},
                 "warnings": {"type": "array", "items": STR}},
                optional=("listeners", "warnings")),
                "ready (`warnings`: extra listeners on default ports that were taken)"),
                *OPEN, 503)),
        ("GET", "/metrics"): _op(
            "metrics", "Prometheus metrics", "ops", scope="metrics",
            responses=_responses(_ok(STR, "Prometheus text exposition format 0.0.4",
                                     media="text/plain"), 401, 403)),
    }
    for signal, path in (("logs", "/v1/logs"), ("traces", "/v1/traces"),
                         ("metrics", "/v1/metrics")):
        ops[("POST", path)] = _otlp(signal)
    ops[("POST", "/api/v1/write")] = _remote_write()
    ops.update(_prom_ops())
    for kind in ("envelope", "store"):
        ops[("POST", f"/api/{{project_id}}/{kind}/")] = _sentry(kind)
    return ops


def _sentry(kind: str) -> Operation:
    example: Any = ('{"event_id":"0123456789abcdef0123456789abcdef"}\n{"type":"event"}\n'
                    '{"message":"hello"}\n') if kind == "envelope" else {"message": "hello"}
    schema: Schema = ({"type": "string", "format": "binary"} if kind == "envelope"
                      else {"type": "object"})
    media = "application/x-sentry-envelope" if kind == "envelope" else JSON
    what = ("a Sentry envelope: a JSON header line, then items (a JSON header line and a "
            "payload); items of type event and transaction are written, others skipped"
            if kind == "envelope" else "one Sentry event as JSON (or base64 of zlib)")
    body = {"required": True, "description": what,
            "content": {media: {"schema": schema, "examples": {"one": {"value": example}}}}}
    parameters = [
        {"name": "project_id", "in": "path", "required": True,
         "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
         "description": "the DSN's project id", "example": "42"},
        {"name": "Content-Encoding", "in": "header", "required": False,
         "schema": {"enum": ["identity", "gzip", "x-gzip", "deflate"]},
         "description": "decoded under the same cap"},
        {"name": "X-Sentry-Auth", "in": "header", "required": False, "schema": STR,
         "description": "`Sentry sentry_key=<key>, ...`: the key is read as a token"}]
    ok = _ok(_obj({"id": STR}, optional=("id",)),
             "every event of the body is committed (an event id already written for this "
             "project answers without writing again); `id`: the first event's id")
    return _op(f"sentry_{kind}", f"Sentry SDK {kind}", "sentry", scope="ingest",
               parameters=parameters, body=body,
               responses=_responses(ok, *AUTH, *BODY, 429, 503))


# An empty WriteRequest, snappy-compressed (block format): the smallest valid body.
EMPTY_WRITE_REQUEST = "\u0000"


def _remote_write() -> Operation:
    body = {"required": True, "description": "a protobuf prometheus.WriteRequest, "
                                             "snappy-compressed (block format)",
            "content": {PROTOBUF: {"schema": {"type": "string", "format": "binary"},
                                   "examples": {"empty": {"value": EMPTY_WRITE_REQUEST}}}}}
    parameters = [
        {"name": "Content-Encoding", "in": "header", "required": False,
         "schema": {"enum": ["snappy"]},
         "description": "snappy (block format); a missing header is read as snappy"},
        {"name": "X-Prometheus-Remote-Write-Version", "in": "header", "required": False,
         "schema": STR, "description": "sent by Prometheus (0.1.0); not checked"}]
    ok = {"204": {"description": "every sample and metadata entry of the body is committed "
                                 "(a resent identical body is answered without writing "
                                 "again)"}}
    return _op("prometheus_remote_write", "Prometheus remote write 1.0", "prometheus",
               scope="ingest", parameters=parameters, body=body,
               responses=_responses(ok, *AUTH, *BODY, 429, 503, prom=True))


def _otlp(signal: str) -> Operation:
    top = {"logs": "resourceLogs", "traces": "resourceSpans",
           "metrics": "resourceMetrics"}[signal]
    body = {"required": True, "content": {
        PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
        JSON: {"schema": {"type": "object", "properties": {
            top: {"type": "array", "items": {"type": "object"}}}}}}}
    ok = {"200": {"description": "Export*ServiceResponse in the request's encoding, with "
                                 "partialSuccess when records were refused",
                  "content": {PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                              JSON: {"schema": _ref("OtlpExportResponse")}}}}
    return _op(f"otlp_export_{signal}", f"OTLP/HTTP export of {signal}", "otlp",
               scope="ingest", parameters=[IDEMPOTENCY_HEADER, ENCODING_HEADER], body=body,
               responses=_responses(ok, *AUTH, *BODY, 409, 429, 503, otlp=True))


def _openapi_json() -> Operation:
    return _op("openapi", "This document", "ops", scope=None,
               responses=_responses(_ok({"type": "object"}, "the OpenAPI document"), *OPEN))
