"""The error tree of shoal.

Every error raised on purpose derives from `ShoalError`. Constructors take the facts
(table, column, line, expected, found) and build the message, so every edge (HTTP, CLI,
Kafka reject table) can both print a precise line and map the error by class once.
`ValueError`/`TypeError` are reserved for misuse of the Python API.

Directly under the root sit only three branches, and a class's branch says whose fault it
is and so its HTTP status (the server maps statuses by branch, `shoal.http.errors`):

    ShoalError
    ├── RequestError        the caller can fix it: 400, or the 4xx of a sub-branch
    │   ├── NotFoundError 404 · ConflictError 409 · NotAllowedError 403
    │   ├── PayloadTooLargeError 413
    │   └── SchemaError, QueryError, IngestError, BadJsonError, InvalidPropertyError: 400
    ├── UnavailableError    retry later: 503 (BackpressureError: 429)
    └── InternalError       shoal or its operator must fix it: 500
        └── ConfigError, CatalogError, CommitError, StorageError, PipelineError
"""

from __future__ import annotations

from dataclasses import dataclass


class ShoalError(Exception):
    """Root of every error shoal raises on purpose."""

    code = "shoal_error"
    retryable = False


# ---- the three branches ------------------------------------------------------------------


class RequestError(ShoalError):
    """The request (statement, body, property, name) is wrong; the caller can fix it (4xx)."""

    code = "bad_request"


class UnavailableError(ShoalError):
    """shoal cannot serve this now (engine restarting, shutting down, overloaded): retry."""

    code = "unavailable"
    retryable = True


class InternalError(ShoalError):
    """shoal, its configuration or its dependencies failed; the caller cannot fix it (500)."""

    code = "internal_error"


# ---- request errors ----------------------------------------------------------------------


class NotAllowedError(RequestError):
    """The caller may not do this here (403)."""

    code = "not_allowed"


class ConflictError(RequestError):
    """The request conflicts with the current state (409)."""

    code = "conflict"


class InvalidPropertyError(RequestError):
    """A table property or pipeline option with a value shoal cannot use (400)."""

    code = "invalid_property"


# ---- internal errors -----------------------------------------------------------------------


class ConfigError(InternalError):
    """The server's own configuration (settings, URLs, ports) is unusable."""

    code = "config_error"


class CatalogError(InternalError):
    """The catalog database is unusable: wrong version, corrupt rows."""

    code = "catalog_error"


class PipelineError(InternalError):
    """A bound pipeline (Kafka, file-drop, maintenance) failed in a way it cannot skip."""

    code = "pipeline_error"


class LocationNotAllowedError(NotAllowedError):
    """A table property (or binding) naming a path or host outside the allowed locations
    (`SHOAL_ALLOWED_PATHS` / `SHOAL_ALLOWED_HOSTS`): 403 at the HTTP edge."""

    code = "location_not_allowed"

    def __init__(self, what: str, value: str, setting: str) -> None:
        self.what = what
        self.value = value
        self.setting = setting
        super().__init__(f"{what} {value!r} is outside the locations this server allows "
                         f"(the data directory and {setting})")


class OutboundRefusedError(LocationNotAllowedError):
    """An outbound fetch a user configured (a scrape target, a redirect it answered) that the
    location policy refuses: a scheme other than http/https, a host or port outside
    `SHOAL_ALLOWED_HOSTS`, a name resolving to an address the policy does not allow, or a
    redirect chain over the hop limit. Raised before anything is sent there (403 at the HTTP
    edge, like the other location refusals)."""

    def __init__(self, url: str, reason: str) -> None:
        self.what = "outbound URL"
        self.value = url
        self.setting = "SHOAL_ALLOWED_HOSTS"
        self.url = url
        self.reason = reason
        NotAllowedError.__init__(self, f"refused to fetch {url}: {reason}")


class NotFoundError(RequestError):
    code = "not_found"


class TableNotFoundError(NotFoundError):
    code = "table_not_found"

    def __init__(self, table: str) -> None:
        self.table = table
        super().__init__(f'table "{table}" does not exist')


class SnapshotNotFoundError(NotFoundError):
    code = "snapshot_not_found"

    def __init__(self, table: str, snapshot_id: int) -> None:
        self.table = table
        self.snapshot_id = snapshot_id
        super().__init__(f'table "{table}" has no snapshot {snapshot_id}')


class DroppedTableNotFoundError(NotFoundError):
    """UNDROP found nothing to bring back: no table of that name was dropped, or its
    snapshot retention ran out and maintenance purged it."""

    code = "dropped_table_not_found"

    def __init__(self, table: str, reason: str) -> None:
        self.table = table
        self.reason = reason
        super().__init__(f'cannot undrop table "{table}": {reason}')


class DatabaseNotFoundError(NotFoundError):
    """A Kusto command naming a database other than the server's one."""

    code = "database_not_found"

    def __init__(self, name: str, database: str) -> None:
        self.name = name
        super().__init__(f"database {name!r} does not exist (this server holds one "
                         f"database, {database!r})")


class AlreadyExistsError(ConflictError):
    code = "already_exists"


class TableAlreadyExistsError(AlreadyExistsError):
    code = "table_exists"

    def __init__(self, table: str) -> None:
        self.table = table
        super().__init__(f'table "{table}" already exists')


class TableNameReusedError(AlreadyExistsError):
    """UNDROP of a table whose name a newer table took meanwhile."""

    code = "table_name_reused"

    def __init__(self, table: str) -> None:
        self.table = table
        super().__init__(f'cannot undrop table "{table}": a table of that name was created '
                         "after it was dropped; rename or drop that one first")


class SchemaError(RequestError):
    """Base of schema problems: bad definitions, incompatible changes, bad values."""

    code = "schema_error"


class InvalidSchemaError(SchemaError):
    """A schema or column definition that is not valid on its own."""

    code = "invalid_schema"

    def __init__(self, message: str, *, column: str | None = None) -> None:
        self.column = column
        super().__init__(message)


class IncompatibleSchemaChangeError(ConflictError, SchemaError):
    """A change that is not a widening (narrow, drop, rename, other type change)."""

    code = "incompatible_schema_change"

    def __init__(self, table: str | None, column: str, current: str, requested: str,
                 reason: str = "") -> None:
        self.table = table
        self.column = column
        self.current = current
        self.requested = requested
        where = f'table "{table}": ' if table else ""
        tail = f" ({reason})" if reason else ""
        super().__init__(
            f'{where}column "{column}" is {current}; cannot change it to {requested}{tail}: '
            "the schema only widens")


class SchemaConflictError(ConflictError, SchemaError):
    """Two concurrent evolutions added one column name with conflicting types."""

    code = "schema_conflict"

    def __init__(self, table: str, column: str, existing: str, proposed: str) -> None:
        self.table = table
        self.column = column
        self.existing = existing
        self.proposed = proposed
        super().__init__(
            f'table "{table}": column "{column}" was concurrently added as {existing}; '
            f"this change wanted {proposed}")


class ProtectedColumnError(SchemaError):
    """A rename, drop or type change of a column that must keep its name and type: the
    reserved `_timestamp` and `props`, and Kafka header columns."""

    code = "protected_column"

    def __init__(self, table: str | None, column: str, action: str, reason: str) -> None:
        self.table = table
        self.column = column
        where = f'table "{table}": ' if table else ""
        super().__init__(f'{where}cannot {action} column "{column}": {reason}')


class ColumnExistsError(ConflictError, SchemaError):
    """`ADD COLUMN` of a name the table has with another type: nothing changes; a widening
    is asked for by name (`ALTER TABLE t ALTER COLUMN c TYPE wider`)."""

    code = "column_exists"

    def __init__(self, table: str, column: str, existing: str, requested: str, *,
                 widening: bool) -> None:
        self.table = table
        self.column = column
        self.existing = existing
        self.requested = requested
        if widening:
            hint = (f"to widen it, run ALTER TABLE {table} ALTER COLUMN {column} TYPE "
                    f"{requested}")
        else:
            hint = f"{existing} does not widen to {requested}: the schema only widens"
        super().__init__(f'table "{table}": column "{column}" already exists as {existing}, '
                         f"not {requested}; nothing was changed ({hint})")


class CatalogCorruptError(CatalogError):
    """A value stored in the catalog does not decode (JSON that does not parse, a schema
    document or a membership filter that is not valid): the database was damaged or edited
    by hand. `catalog_table` is the catalog's own table, `row` names the row in it."""

    code = "catalog_corrupt"

    def __init__(self, catalog_table: str, row: str, reason: str) -> None:
        self.catalog_table = catalog_table
        self.row = row
        self.reason = reason
        super().__init__(f"corrupt catalog data in {catalog_table} ({row}): {reason}")


class CommitError(InternalError):
    """Committing a snapshot failed (conflicts are retried inside the commit layer)."""

    code = "commit_error"


class CommitConflictError(CommitError):
    """The compare-and-swap found another snapshot in place: refresh, rebase, retry."""

    code = "commit_conflict"
    retryable = True

    def __init__(self, table: str, expected: int | None, actual: int | None = None) -> None:
        self.table = table
        self.expected = expected
        self.actual = actual
        found = "" if actual is None else f", found {actual}"
        super().__init__(
            f'table "{table}": snapshot moved during commit (expected {expected}{found})')


class CommitStateUnknownError(CommitError):
    """The catalog connection failed mid-commit: the snapshot may or may not have landed."""

    code = "commit_state_unknown"

    def __init__(self, table: str, cause: BaseException) -> None:
        self.table = table
        super().__init__(f'table "{table}": commit outcome unknown: {cause}')


class CommitRetriesExhaustedError(UnavailableError, CommitError):
    code = "commit_retries_exhausted"

    def __init__(self, table: str, attempts: int) -> None:
        self.table = table
        self.attempts = attempts
        super().__init__(f'table "{table}": commit still conflicting after {attempts} attempts')


class StorageError(InternalError):
    """The object store failed or holds bytes shoal cannot read."""

    code = "storage_error"


class ObjectNotFoundError(StorageError):
    code = "object_not_found"

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"object not found: {path}")


class ExtentFormatError(StorageError):
    """An extent whose bytes do not follow its format (bad magic, truncated footer)."""

    code = "extent_format_error"

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: not a valid extent: {reason}")


class IngestError(RequestError):
    """Base of problems with data sent for ingest."""

    code = "ingest_error"


@dataclass(frozen=True)
class LineError:
    """One precise problem in one input line: `line 7: field "x": expected ..., got ...`."""

    line: int                 # 1-based line number in the request body
    field: str | None         # the top-level field, None for whole-line problems
    message: str              # the full message, starting with "line N: "

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "field": self.field, "message": self.message}

    def shifted(self, offset: int) -> LineError:
        """The same error `offset` lines further down (a chunk inside a larger file)."""
        prefix = f"line {self.line}: "
        rest = self.message[len(prefix):] if self.message.startswith(prefix) else self.message
        return LineError(self.line + offset, self.field, f"line {self.line + offset}: {rest}")


class BadJsonError(RequestError):
    """A JSON document shoal cannot take: not valid JSON, or over a limit (400).

    `field`: the top-level key of the document where the problem is, when known."""

    code = "bad_json"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class JsonLimitError(BadJsonError):
    """JSON nested too deep or with a too long number (`shoal.types.jsonlimits`)."""

    code = "json_limit"


class IdempotencyKeyConflictError(ConflictError, IngestError):
    """An idempotency key reused for another table than the one it was first applied to.

    Answering it as a replay would drop the request silently, so it is a conflict (409)."""

    code = "idempotency_key_conflict"

    def __init__(self, key: str, *, table: str, first_table: str) -> None:
        self.key = key
        self.table = table
        self.first_table = first_table
        super().__init__(
            f'idempotency key "{key}" was already used for table "{first_table}"; it cannot '
            f'be used for table "{table}" (use a new key for each request)')


class PayloadError(IngestError):
    """A request body with bad lines; nothing of it was written (atomic mode).

    `errors` are the first problems, in line order, capped (the write path keeps 100);
    `total_errors` is how many lines (records) were rejected in all, counted exactly however
    many errors are kept. When the errors do not cover every rejected line the message says
    so: `line 1: ... (1,000,000 lines rejected; first 100 errors shown)`.
    """

    code = "bad_payload"

    def __init__(self, errors: list[LineError], *, total_errors: int | None = None) -> None:
        self.errors = errors
        shown_lines = len({e.line for e in errors})
        self.total_errors = max(total_errors or 0, shown_lines)
        head = errors[0].message if errors else "bad payload"
        if self.truncated:
            tail = f" ({self.summary()})"
        else:
            tail = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(head + tail)

    @property
    def truncated(self) -> bool:
        """Some rejected lines have no error in `errors` (the list was capped)."""
        return self.total_errors > len({e.line for e in self.errors})

    def summary(self) -> str:
        """`1,000,000 lines rejected; first 100 errors shown`."""
        n = self.total_errors
        return (f"{n:,} line{'s' if n != 1 else ''} rejected; first {len(self.errors)} "
                f"error{'s' if len(self.errors) != 1 else ''} shown")


class PayloadTooLargeError(IngestError):
    code = "payload_too_large"

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"request body of {size} bytes exceeds the limit of {limit} bytes")


class BackpressureError(UnavailableError):
    """The write path is full; retry after `retry_after_s` (429)."""

    code = "backpressure"
    retryable = True

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class CatalogBusyError(UnavailableError):
    """Every connection to the embedded catalog stayed in use for the wait allowed (503):
    retry."""

    code = "catalog_busy"

    def __init__(self, connections: int, waited_s: float) -> None:
        self.connections = connections
        super().__init__(f"all {connections} catalog connections stayed in use for "
                         f"{waited_s:g} s; retry")


class CoercionWorkerLostError(UnavailableError):
    """A coercion worker process died while it served this request (503): nothing of the
    request was buffered or written, so a retry is safe; the worker is being replaced."""

    code = "coercion_worker_lost"
    retryable = True

    def __init__(self, pid: int, exit_status: int | None, *,
                 retry_after_s: float = 1.0) -> None:
        self.pid = pid
        self.exit_status = exit_status
        self.retry_after_s = retry_after_s
        super().__init__(f"the coercion worker (pid {pid}) serving this request died "
                         f"(exit status {exit_status}); nothing was written, retry")


class QueryError(RequestError):
    """Base of problems with a statement: syntax, forbidden, limits."""

    code = "query_error"


class DdlSyntaxError(QueryError):
    """A DDL statement shoal owns (CREATE/ALTER TABLE, DESCRIBE, SHOW TABLES) that does not parse.

    `line` and `column` (1-based) point at the offending token; `found` is its source text
    (quoted) or "end of input".
    """

    code = "ddl_syntax"

    def __init__(self, *, line: int, column: int, expected: str, found: str) -> None:
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
        super().__init__(
            f"DDL syntax error at line {line}, col {column}: expected {expected}, found {found}")


class KqlSyntaxError(QueryError):
    """A KQL query that does not parse (`shoal.frontends.kusto.kql`).

    `line` and `column` (1-based) point at the offending token, `found` is its text (or
    "end of input"), as Kusto reports "Query could not be parsed at 'x' on line [l,c]".
    """

    code = "kql_syntax"

    def __init__(self, *, line: int, column: int, expected: str, found: str) -> None:
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
        super().__init__(f"KQL syntax error: query could not be parsed at {found} on line "
                         f"[{line},{column}]: expected {expected}")


class KqlSemanticError(QueryError):
    """A KQL query that parses but names an unknown column, function or argument form, or
    uses what shoal's KQL does not translate; `line`/`column` point at the construct."""

    code = "kql_semantic"

    def __init__(self, message: str, *, line: int | None = None,
                 column: int | None = None) -> None:
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"KQL semantic error: {message}{where}")


class QueryTimeoutError(QueryError):
    """A statement ran longer than the configured limit; its Spark jobs were cancelled."""

    code = "query_timeout"

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        super().__init__(f"the query ran longer than the limit of {limit_s:g} s "
                         "(query_timeout_s) and was cancelled")


class QueryCancelledError(QueryError):
    """A running statement was cancelled by a client (Flight SQL's `CancelFlightInfo`), or
    its client went away; its engine work was interrupted."""

    code = "query_cancelled"

    def __init__(self) -> None:
        super().__init__("the query was cancelled")


class ResultTooLargeError(QueryError):
    """Spark refused to collect a result larger than the driver's bound
    (`spark.driver.maxResultSize`, derived from the byte cap of answers)."""

    code = "result_too_large"

    def __init__(self, limit: str) -> None:
        self.limit = limit
        super().__init__(f"the result is larger than the {limit} Spark may collect for one "
                         "query (spark.driver.maxResultSize); add a LIMIT or select fewer or "
                         "smaller columns")


class ForeignRowCapError(QueryError):
    """A foreign table's source answered more rows than one read may fetch."""

    code = "foreign_row_cap"

    def __init__(self, table: str, cap: int) -> None:
        self.table = table
        self.cap = cap
        super().__init__(f"foreign table {table}: the source has more than {cap} rows for "
                         "this read (query_max_rows); add a filter the source can apply "
                         "(comparisons, IN, IS NULL) or select fewer rows")


class ReadOnlyTableError(RequestError):
    """A write (ingest, DELETE, TRUNCATE, schema change) to a foreign table, which only
    reads its source."""

    code = "read_only_table"

    def __init__(self, table: str, what: str = "written to") -> None:
        self.table = table
        super().__init__(f"table {table} is a foreign table: it reads its source live and "
                         f"cannot be {what}")


class ForeignSourceError(UnavailableError):
    """A foreign table's source failed to answer (unreachable, refused the login, no such
    table, timed out). The message never holds a password."""

    code = "foreign_source_error"

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"foreign source {source}: {reason}")


class EngineUnavailableError(UnavailableError):
    """The query engine (the Spark session) is dead, wedged or restarting; retry later."""

    code = "engine_unavailable"
    retryable = True

    def __init__(self, reason: str, *, retry_after_s: float = 5.0) -> None:
        self.reason = reason
        self.retry_after_s = retry_after_s
        super().__init__(f"the query engine is unavailable: {reason}; retry shortly")


class OutboundFetchError(UnavailableError):
    """An allowed outbound fetch failed on the way (refused connection, unknown name, timeout,
    a body over its bound, a protocol error): retry later."""

    code = "outbound_failed"
    retryable = True

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"fetch of {url} failed: {reason}")


class ScrapeFailedError(UnavailableError):
    """Scraping a Prometheus target failed (refused, timed out, non-2xx, unparseable body):
    the target gets `up` 0 and the next scrape tries again."""

    code = "scrape_failed"
    retryable = True

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"scrape of {target} failed: {reason}")


# ---- a shoal server's answers, as a client (`shoal.remote`) raises them --------------------


class DataDirNotFoundError(ConfigError):
    """The data directory a command would read does not exist (nothing is created for it)."""

    code = "data_dir_not_found"

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"data directory {path} does not exist: create it with `shoal init` "
                         "(or `shoal create-table`), pass --data-dir, or talk to a server "
                         "with --url")


class ServerUnreachableError(UnavailableError):
    """The server at `url` did not answer (refused, reset, timed out, not HTTP)."""

    code = "server_unreachable"
    retryable = True

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot reach the shoal server at {url}: {reason}")


class _FromServer:
    """What a server's error answer said: its HTTP `status`, its `code` and `details`.

    The client raises the class of the branch the status belongs to (`server_error`), so
    `except NotFoundError` catches a remote 404 as it catches a local one."""

    status: int
    code: str
    details: list[dict[str, object]]

    def _keep(self, status: int, code: str, details: list[dict[str, object]] | None) -> None:
        self.status = status
        self.code = code
        self.details = list(details or ())


class ServerRequestError(_FromServer, RequestError):
    """A 4xx answer without a more specific branch (400, 401, 408, 413, 415, ...)."""

    def __init__(self, message: str, *, status: int = 400, code: str = "bad_request",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(message)


class ServerNotAllowedError(_FromServer, NotAllowedError):
    """A 403 answer: the token lacks the scope, or the place is not allowed."""

    def __init__(self, message: str, *, status: int = 403, code: str = "forbidden",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(message)


class ServerNotFoundError(_FromServer, NotFoundError):
    """A 404 answer (an unknown table, snapshot or route)."""

    def __init__(self, message: str, *, status: int = 404, code: str = "not_found",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(message)


class ServerConflictError(_FromServer, ConflictError):
    """A 409 answer (the table exists, a schema or idempotency-key conflict)."""

    def __init__(self, message: str, *, status: int = 409, code: str = "conflict",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(message)


class ServerPayloadError(_FromServer, PayloadError):
    """A 400 `bad_payload` answer to an ingest: its details are the bad lines."""

    def __init__(self, errors: list[LineError], *, total_errors: int | None = None,
                 status: int = 400, code: str = "bad_payload",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(errors, total_errors=total_errors)


class ServerUnavailableError(_FromServer, UnavailableError):
    """A 429 or 503 answer: retry after `retry_after_s` (None when the server said nothing)."""

    def __init__(self, message: str, *, status: int = 503, code: str = "unavailable",
                 details: list[dict[str, object]] | None = None,
                 retry_after_s: float | None = None) -> None:
        self._keep(status, code, details)
        self.retry_after_s = retry_after_s
        super().__init__(message)


class ServerInternalError(_FromServer, InternalError):
    """A 5xx answer other than 503: the server failed."""

    def __init__(self, message: str, *, status: int = 500, code: str = "internal_error",
                 details: list[dict[str, object]] | None = None) -> None:
        self._keep(status, code, details)
        super().__init__(message)
