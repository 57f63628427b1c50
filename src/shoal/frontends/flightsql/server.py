"""Arrow Flight SQL: shoal's query lane for ADBC, JDBC and ODBC clients.

A `pyarrow.flight` server on its own port (`flight_port`, SHOAL_FLIGHT_PORT, 0 = off; unset,
8815 if it is free: `shoal.server.listeners`), started and stopped with the app's lifespan like
OTLP/gRPC. The Flight SQL messages are `shoal.frontends.flightsql.flight_sql_pb2`, Flight's
cancel messages `flight_cancel_pb2` (generated from the .proto files beside them; how to
regenerate is written there).

Served:
- `GetFlightInfo` on `CommandStatementQuery` / `CommandPreparedStatementQuery`: the statement
  goes through the same path as `POST /v1/query` (the guard's allow-list, `admin` for
  CREATE/ALTER, the query slots, timeout and result caps, both engines). A statement starting
  with `kql:` is KQL (read only, like `{"kql": ...}`). A query (SELECT, WITH, KQL) is only
  planned here (`shoal.http.statements.plan_statement`: scans pruned, engine chosen, the
  answer's schema known, no row read); the FlightInfo carries that schema, `total_records` /
  `total_bytes` -1 (unknown until the stream ends) and, in `app_metadata`, the planning stats
  (the JSON object of `X-Shoal-Stats` without what only the run knows). Other statements
  (DDL, DESCRIBE, SHOW, EXPLAIN) run here and their answer waits for its DoGet, with exact
  totals and stats. Either way the answer is one endpoint whose ticket
  (`TicketStatementQuery`) is good for one `DoGet` within `RESULT_TTL_S`.
- `DoGet` of a query runs it under a query slot and streams record batches (at most
  `BATCH_BYTES` each) as the engine produces them (`shoal.query.answer_stream`: the embedded
  engine for real, Spark's answer collected under the caps first). The caps end the stream
  at the longest prefix that fits; the deadline covers the whole stream. The last message
  is an empty batch whose `app_metadata` holds the final stats: `truncated` (and
  `truncated_by`), `bytes_read`, `rows`, `bytes`. The slot and the engine's work are
  released when the stream ends, fails, or its client goes away (a write fails; before the
  first batch, `_ClientWatch` notices the call's cancellation), or when its client has read
  nothing for `flight_idle_timeout_s` (`_Delivery`'s watchdog: the engine stops, the slot is
  freed, the next read fails DEADLINE_EXCEEDED). Slots are counted per client
  (`ServerState.client_key`: the token, else the peer's address without its port), shared
  with the HTTP routes, so one client gets at most `query_concurrency_per_client`.
- Cancel: the Flight action `CancelFlightInfo` (body: `CancelFlightInfoRequest`) and the
  legacy Flight SQL action `CancelQuery` (`ActionCancelQueryRequest`) take the FlightInfo of
  a statement: its running query is interrupted (the embedded engine's run, the Spark job
  tag) and its DoGet ends with CANCELLED; a ticket not yet fetched is dropped (its DoGet is
  CANCELLED). Answer: CANCELLED once the stream has ended (waiting up to `CANCEL_WAIT_S`),
  else CANCELLING; NOT_CANCELLABLE for a ticket already answered, expired or unknown.
- Metadata (`GetCatalogs`, `GetDbSchemas`, `GetTables` with `include_schema`,
  `GetTableTypes`, `GetSqlInfo`), answered from the catalog. shoal has one namespace: one
  catalog `shoal` with one schema `default`; table names in SQL are unqualified. A table's
  schema is the one `SELECT *` answers with (`table_schema`, from the scan reader's shapes:
  `shoal.query.scan_shape.answer_schema`), so what a client is told is what it gets.
- Prepared statements: the actions `CreatePreparedStatement` (the guard checks the
  statement at once; a query is planned to announce its `dataset_schema`, its `?`
  parameters standing in as sample values of their `parameter_schema` types) and
  `ClosePreparedStatement`. `DoPut` on a prepared statement binds its parameters (one row;
  `shoal.frontends.flightsql.parameters` writes each value as a SQL literal in place of its
  `?`), answered with a `DoPutPreparedStatementResult` naming the same handle. Updates
  through DoPut are refused as unimplemented.
- Transactions (`BeginTransaction`, `EndTransaction`): ids that statements may name, so
  that clients which turn autocommit off (ADBC's DB-API, JDBC) work. Statements read the
  data committed when they start and write nothing; CREATE/ALTER commit at once (GetSqlInfo
  says so), so commit and rollback only end the transaction. An id is a nonce with this
  server's MAC (`_Store.begin`): checked, never stored.
- `GetSchema` on a metadata command gives its fixed schema; on a query, its planned schema;
  other statements are not run for it (an empty schema).

Auth: the same tokens and scopes as the HTTP API (`shoal.http.auth`). A middleware reads
`authorization: Bearer <token>` on every call (a call without a valid one is
UNAUTHENTICATED when tokens are configured); every call needs the `query` scope, CREATE/ALTER
also `admin` (PERMISSION_DENIED otherwise). `authorization: Basic` with the token as the
password is accepted too, and answered with the bearer header, which is how clients that
only know user/password (JDBC's `user=x;password=<token>`) log in.

TLS: `flight_tls_cert` / `flight_tls_key` (PEM files; both or neither) serve `grpc+tls`.

Errors: every one is a pyarrow.flight error class, whose status carries a code and the
message only (pyarrow attaches the server's Python traceback to any other exception), with
the HTTP API's JSON error document as `extra_info`. shoal's status table
(`shoal.http.errors.status_for`) mapped onto gRPC codes: 401/403 ->
UNAUTHENTICATED/PERMISSION_DENIED, 429/503 -> UNAVAILABLE (with `retry_after_s`), a
timeout or an idle stream -> DEADLINE_EXCEEDED, a cancel -> CANCELLED, 5xx -> INTERNAL
(logged), other 4xx -> UNKNOWN ("Failed": the guard's message, the parse position...;
INVALID_ARGUMENT exists only with a traceback). Anything outside shoal's error tree is
INTERNAL with a generic message, its details in the server's log only.

Stop: running calls get `stop_wait_s` to finish (gRPC would wait for ever on a client that
reads nothing); then their queries are cancelled and `stop` returns.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from shoal.errors import (ConfigError, QueryCancelledError, QueryTimeoutError, ShoalError,
                          UnavailableError)
from shoal.http.auth import bearer_of
from shoal.http.errors import (BadRequestError, StreamIdleError, UnsupportedCallError,
                                 details_for, error_document, status_for)
from shoal.frontends.flightsql import flight_cancel_pb2 as cancel_pb
from shoal.frontends.flightsql import flight_sql_pb2 as sql_pb
from shoal.frontends.flightsql import parameters
from shoal.http.statements import (BoundedStream, PlannedQuery, answer_stats, open_stream,
                                plan_statement, query_schema)
from shoal.http.state import ServerState
from shoal.query.scan_shape import answer_schema
from shoal.types.schema import Schema

log = logging.getLogger("shoal.server")

CATALOG = "shoal"
DB_SCHEMA = "default"
TABLE_TYPE = "TABLE"
KQL_PREFIX = "kql:"
RESULT_TTL_S = 300.0       # a ticket not fetched within this is dropped
# Answers waiting for their DoGet: at most this many, and this many bytes beside the newest
# one (whose size the query's byte cap bounds); the oldest are dropped first.
MAX_PENDING = 64
MAX_PENDING_BYTES = 1 << 30
MAX_PREPARED = 1024
TXN_NONCE_BYTES = 16
BATCH_BYTES = 4 << 20      # record batches on the wire stay under gRPC's usual 16 MiB limit
BATCH_ROWS = 1 << 16
CANCEL_WAIT_S = 5.0        # a cancel request waits this long for the stream to end
WATCH_CLIENT_S = 0.2       # how often a stream's first batch checks that its client is there
STOP_WAIT_S = 10.0         # stop() waits this long for running calls, then cancels them
IDLE_POLL_S = 1.0          # the idle watchdog looks at least this often (the bound is a setting)
INTERNAL_MESSAGE = "internal error (the details are in the server's log)"

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8(), nullable=False)])
DB_SCHEMAS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8()),
                               pa.field("db_schema_name", pa.utf8(), nullable=False)])
TABLES_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8()),
                           pa.field("db_schema_name", pa.utf8()),
                           pa.field("table_name", pa.utf8(), nullable=False),
                           pa.field("table_type", pa.utf8(), nullable=False)])
TABLES_SCHEMA_WITH_SCHEMA = TABLES_SCHEMA.append(
    pa.field("table_schema", pa.binary(), nullable=False))
TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", pa.utf8(), nullable=False)])
_SQL_INFO_VALUE = pa.dense_union([
    pa.field("string_value", pa.utf8()),
    pa.field("bool_value", pa.bool_()),
    pa.field("bigint_value", pa.int64()),
    pa.field("int32_bitmask", pa.int32()),
    pa.field("string_list", pa.list_(pa.field("item", pa.utf8()))),
    pa.field("int32_to_int32_list_map",
             pa.map_(pa.int32(), pa.list_(pa.field("item", pa.int32())))),
])
SQL_INFO_SCHEMA = pa.schema([pa.field("info_name", pa.uint32(), nullable=False),
                             pa.field("value", _SQL_INFO_VALUE, nullable=False)])

_COMMANDS: dict[str, type[Message]] = {
    m.DESCRIPTOR.full_name: m for m in (
        sql_pb.CommandStatementQuery, sql_pb.CommandPreparedStatementQuery,
        sql_pb.CommandGetCatalogs, sql_pb.CommandGetDbSchemas, sql_pb.CommandGetTables,
        sql_pb.CommandGetTableTypes, sql_pb.CommandGetSqlInfo,
        sql_pb.CommandStatementUpdate)}


# ---- auth ----------------------------------------------------------------------------------
class _Caller(flight.ServerMiddleware):
    """Who is calling: the bearer token of the call (None when auth is off)."""

    def __init__(self, token: str | None, *, echo_bearer: bool = False) -> None:
        self.token = token
        self._echo = echo_bearer

    def sending_headers(self) -> dict[str, str]:
        if self._echo and self.token is not None:   # Basic login: hand back the bearer form
            return {"authorization": f"Bearer {self.token}"}
        return {}


class _AuthFactory(flight.ServerMiddlewareFactory):
    def __init__(self, state: ServerState) -> None:
        super().__init__()
        self.state = state

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> _Caller:
        values = headers.get("authorization") or [None]
        header = values[0]
        if isinstance(header, bytes):
            header = header.decode("utf-8", "replace")
        token, basic = _token_of(header)
        if self.state.tokens.enabled:
            if token is None:
                raise flight.FlightUnauthenticatedError(
                    "missing bearer token (authorization: Bearer <token>)")
            if self.state.tokens.scopes_of(token) is None:
                raise flight.FlightUnauthenticatedError("invalid bearer token")
        return _Caller(token, echo_bearer=basic)


class _Handshake(flight.ServerAuthHandler):
    """Lets the Handshake RPC of user/password clients through: the `auth` middleware has
    checked their `authorization` header and answers it with the bearer form."""

    def authenticate(self, outgoing: flight.ServerAuthSender,
                     incoming: flight.ServerAuthReader) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""       # every call's header is checked by the `auth` middleware


def _token_of(header: str | None) -> tuple[str | None, bool]:
    """(the token, whether it came as a Basic password) of an `authorization` header."""
    if header is None:
        return None, False
    bearer = bearer_of(header)
    if bearer is not None:
        return bearer, False
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None, False
        password = decoded.partition(":")[2]
        return (password or None), True
    return None, False


# ---- pending answers and prepared statements -------------------------------------------------
@dataclass(frozen=True)
class _Prepared:
    """A prepared statement: its text, its parameters' schema (empty: none), and with values
    bound, the text they make (what runs)."""

    text: str
    params: pa.Schema
    bound: str | None = None

    def runnable(self) -> str:
        if len(self.params) == 0:
            return self.text
        if self.bound is None:
            raise BadRequestError(f"the prepared statement has {len(self.params)} "
                                  "parameter(s) (?) and no values were bound")
        return self.bound


@dataclass
class _Answer:
    body: pa.Table | PlannedQuery       # rows already there (metadata, DDL), or a plan
    created: float

    @property
    def nbytes(self) -> int:
        return self.body.nbytes if isinstance(self.body, pa.Table) else 0


class _Store:
    """Tickets waiting for their one `DoGet` (an answer, or a planned query), streams
    running (for cancel requests), and prepared statements, by random handle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: OrderedDict[bytes, _Answer] = OrderedDict()
        self._bytes = 0
        self._prepared: OrderedDict[bytes, _Prepared] = OrderedDict()
        self._txn_key = secrets.token_bytes(32)
        self._running: dict[bytes, _Delivery] = {}
        # tickets cancelled before their DoGet: that DoGet ends CANCELLED
        self._cancelled: OrderedDict[bytes, float] = OrderedDict()

    def put(self, body: pa.Table | PlannedQuery) -> bytes:
        handle = secrets.token_bytes(16)
        now = time.monotonic()
        with self._lock:
            answer = _Answer(body, now)
            self._answers[handle] = answer
            self._bytes += answer.nbytes
            while len(self._answers) > 1 and (
                    len(self._answers) > MAX_PENDING or self._bytes > MAX_PENDING_BYTES
                    or now - next(iter(self._answers.values())).created > RESULT_TTL_S):
                self._bytes -= self._answers.popitem(last=False)[1].nbytes
        return handle

    def take(self, handle: bytes) -> pa.Table | PlannedQuery:
        with self._lock:
            answer = self._answers.pop(handle, None)
            if answer is not None:
                self._bytes -= answer.nbytes
            cancelled = self._cancelled.pop(handle, None) is not None
        if cancelled:
            raise QueryCancelledError()
        if answer is None or time.monotonic() - answer.created > RESULT_TTL_S:
            raise BadRequestError("unknown or expired ticket (a ticket is good for one DoGet "
                                  f"within {RESULT_TTL_S:g}s of GetFlightInfo)")
        return answer.body

    def restore(self, handle: bytes, body: pa.Table | PlannedQuery) -> None:
        """Give a ticket back (its DoGet could not start: the client may retry it)."""
        with self._lock:
            answer = _Answer(body, time.monotonic())
            self._answers[handle] = answer
            self._bytes += answer.nbytes

    def running(self, handle: bytes, delivery: _Delivery | None) -> None:
        """Record (or, with None, forget) the stream a ticket's DoGet is sending."""
        with self._lock:
            if delivery is None:
                self._running.pop(handle, None)
            else:
                self._running[handle] = delivery

    def cancel(self, handle: bytes) -> cancel_pb.CancelStatus:
        """Cancel a ticket's query: a running stream is interrupted; a ticket not yet
        fetched is dropped (its DoGet ends CANCELLED). A `CancelStatus`."""
        with self._lock:
            stream = self._running.get(handle)
            pending = self._answers.get(handle)
            if stream is None and pending is not None:
                del self._answers[handle]
                self._bytes -= pending.nbytes
                self._cancelled[handle] = time.monotonic()
                while len(self._cancelled) > MAX_PENDING:
                    self._cancelled.popitem(last=False)
        if stream is not None:
            if not stream.cancel():
                return cancel_pb.CANCEL_STATUS_NOT_CANCELLABLE     # it had just ended
            done = stream.finished.wait(CANCEL_WAIT_S)
            return cancel_pb.CANCEL_STATUS_CANCELLED if done else cancel_pb.CANCEL_STATUS_CANCELLING
        if pending is not None:
            return cancel_pb.CANCEL_STATUS_CANCELLED
        return cancel_pb.CANCEL_STATUS_NOT_CANCELLABLE      # unknown, fetched or finished

    def cancel_running(self) -> int:
        """Cancel every running stream's query (the server is stopping); how many."""
        with self._lock:
            streams = list(self._running.values())
        return sum(stream.cancel() for stream in streams)

    def prepare(self, statement: _Prepared) -> bytes:
        handle = secrets.token_bytes(16)
        with self._lock:
            self._prepared[handle] = statement
            while len(self._prepared) > MAX_PREPARED:
                self._prepared.popitem(last=False)
        return handle

    def prepared(self, handle: bytes) -> _Prepared:
        with self._lock:
            statement = self._prepared.get(handle)
        if statement is None:
            raise BadRequestError("unknown or closed prepared statement")
        return statement

    def bind(self, handle: bytes, bound: str) -> None:
        """Bind values to a prepared statement: `bound` is its text with them in place; it
        runs so until values are bound again."""
        with self._lock:
            statement = self._prepared.get(handle)
            if statement is None:
                raise BadRequestError("unknown or closed prepared statement")
            self._prepared[handle] = replace(statement, bound=bound)

    def begin(self) -> bytes:
        """A new transaction id: a random nonce and its MAC under this server's key. A
        transaction holds nothing (statements only read), so ids are checked, not stored:
        pooled connections that never end theirs cost no memory and evict nothing."""
        nonce = secrets.token_bytes(TXN_NONCE_BYTES)
        return nonce + self._mac(nonce)

    def check_transaction(self, handle: bytes | None) -> None:
        """Refuse a transaction id this server did not issue."""
        if handle is None:
            return
        nonce, mac = handle[:TXN_NONCE_BYTES], handle[TXN_NONCE_BYTES:]
        if len(nonce) != TXN_NONCE_BYTES or not hmac.compare_digest(mac, self._mac(nonce)):
            raise BadRequestError("unknown transaction (not begun on this server)")

    def end(self, handle: bytes) -> None:
        self.check_transaction(handle)

    def _mac(self, nonce: bytes) -> bytes:
        return hmac.new(self._txn_key, nonce, hashlib.sha256).digest()[:TXN_NONCE_BYTES]

    def close(self, handle: bytes) -> None:
        with self._lock:
            self._prepared.pop(handle, None)


# ---- the service ----------------------------------------------------------------------------
class _Service(flight.FlightServerBase):
    def __init__(self, owner: FlightSqlServer, location: str,
                 tls: list[tuple[bytes, bytes]] | None) -> None:
        super().__init__(location, tls_certificates=tls, auth_handler=_Handshake(),
                         middleware={"auth": _AuthFactory(owner.state)})
        self.owner = owner

    def get_flight_info(self, context: flight.ServerCallContext,
                        descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        return self.owner.call(context, lambda who: self.owner.flight_info(who, descriptor))

    def get_schema(self, context: flight.ServerCallContext,
                   descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        return self.owner.call(context, lambda who: flight.SchemaResult(
            self.owner.schema(who, descriptor)))

    def do_get(self, context: flight.ServerCallContext,
               ticket: flight.Ticket) -> flight.FlightDataStream:
        return self.owner.call(context, lambda who: self.owner.stream(who, ticket, context))

    def do_action(self, context: flight.ServerCallContext,
                  action: flight.Action) -> Iterator[flight.Result]:
        return self.owner.call(context, lambda who: self.owner.action(who, action))

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [("CreatePreparedStatement", "prepare a statement (`?` parameters bound "
                                            "through DoPut)"),
                ("ClosePreparedStatement", "close a prepared statement"),
                ("BeginTransaction", "begin a transaction (statements read committed data; "
                                     "CREATE/ALTER commit at once)"),
                ("EndTransaction", "commit or roll back a transaction"),
                ("CancelFlightInfo", "cancel the running query of a FlightInfo"),
                ("CancelQuery", "cancel the running query of a FlightInfo (legacy "
                                "Flight SQL action)")]

    def do_put(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor,
               reader: flight.MetadataRecordBatchReader,
               writer: flight.FlightMetadataWriter) -> None:
        self.owner.call(context, lambda who: self.owner.put(who, descriptor, reader, writer))


class FlightSqlServer:
    """Flight SQL over `state` (the HTTP app's: same db, tokens, slots and limits)."""

    def __init__(self, state: ServerState, *, host: str = "127.0.0.1", port: int = 8815,
                 tls_cert: str | None = None, tls_key: str | None = None) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise ConfigError("Flight SQL TLS needs both flight_tls_cert and flight_tls_key")
        self.state = state
        self.host = host
        self.port = port
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.store = _Store()
        self._service: _Service | None = None
        self.bound_port: int | None = None
        self.stop_wait_s = STOP_WAIT_S

    @property
    def scheme(self) -> str:
        return "grpc+tls" if self.tls_cert else "grpc+tcp"

    def start(self) -> int:
        tls = None
        if self.tls_cert is not None and self.tls_key is not None:
            try:
                with open(self.tls_cert, "rb") as c, open(self.tls_key, "rb") as k:
                    tls = [(c.read(), k.read())]
            except OSError as e:
                raise ConfigError(f"Flight SQL TLS: {e.filename}: {e.strerror}") from None
        host = f"[{self.host}]" if ":" in self.host else self.host
        try:
            service = _Service(self, f"{self.scheme}://{host}:{self.port}", tls)
        except (OSError, pa.ArrowException) as e:
            raise ConfigError(f"cannot serve Flight SQL on {host}:{self.port} ({e}); choose "
                              "another port with --flight-port N, or 0 to turn it off") from None
        self._service = service
        self.bound_port = service.port
        return service.port

    def stop(self) -> None:
        """Refuse new calls and let running ones finish, for `stop_wait_s` at most: gRPC's
        shutdown waits for every call, and a stream whose client reads nothing would hold
        it for ever (its write blocked by flow control). Past that, the running streams'
        queries are cancelled and the server is left to end with the process."""
        service, self._service = self._service, None
        if service is None:
            return
        stopping = threading.Thread(target=_shut_down, args=(service,), daemon=True,
                                    name="shoal-flight-stop")
        stopping.start()
        stopping.join(self.stop_wait_s)
        if stopping.is_alive():
            cancelled = self.store.cancel_running()
            log.warning("Flight SQL: calls still open %gs after shutdown began (clients "
                        "that read nothing); their %d queries were cancelled, not waiting "
                        "for the calls", self.stop_wait_s, cancelled)

    # ---- calls --------------------------------------------------------------------------
    def call(self, context: flight.ServerCallContext, work: Callable[[_Who], Any]) -> Any:
        """`work(who)` under the `query` scope, with every error as a Flight status of a
        code and a message (`_raise_flight`): never a Python traceback, which pyarrow would
        send for any other exception."""
        caller = context.get_middleware("auth")
        token = caller.token if isinstance(caller, _Caller) else None
        try:
            self.state.check_accepting()
            if self.state.tokens.enabled:
                self.state.tokens.allows(token, "query")
            who = _Who(token, self.state.client_key(token, _peer_host(context.peer())))
            return work(who)
        except flight.FlightError:
            raise
        except ShoalError as e:
            _raise_flight(e)
        except Exception as e:  # noqa: BLE001 - logged there, answered without its traceback
            _raise_unexpected(e)

    def flight_info(self, who: _Who,
                    descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        command = _unpack(descriptor)
        stats: dict[str, Any] | None = None
        if isinstance(command, (sql_pb.CommandStatementQuery,
                                sql_pb.CommandPreparedStatementQuery)):
            answer = self.plan(who, self._text(command))
            if isinstance(answer, PlannedQuery):
                # Rows and bytes are known once the stream ends (-1: unknown, as Flight
                # says); so are `bytes_read` and `truncated` (the stream's last message).
                ticket = _pack(sql_pb.TicketStatementQuery(
                    statement_handle=self.store.put(answer)))
                return flight.FlightInfo(
                    answer.schema, descriptor, [flight.FlightEndpoint(ticket, [])],
                    total_records=-1, total_bytes=-1,
                    app_metadata=json.dumps(answer.planned_stats()).encode())
            table, stats = answer
        elif isinstance(command, sql_pb.CommandGetCatalogs):
            table = pa.table({"catalog_name": [CATALOG]}, schema=CATALOGS_SCHEMA)
        elif isinstance(command, sql_pb.CommandGetDbSchemas):
            table = self._db_schemas(command)
        elif isinstance(command, sql_pb.CommandGetTables):
            table = self._tables(command)
        elif isinstance(command, sql_pb.CommandGetTableTypes):
            table = pa.table({"table_type": [TABLE_TYPE]}, schema=TABLE_TYPES_SCHEMA)
        elif isinstance(command, sql_pb.CommandGetSqlInfo):
            table = sql_info(list(command.info))
        else:
            raise UnsupportedCallError(f"{type(command).__name__} is not supported by shoal")
        ticket = _pack(sql_pb.TicketStatementQuery(statement_handle=self.store.put(table)))
        return flight.FlightInfo(
            table.schema, descriptor, [flight.FlightEndpoint(ticket, [])],
            total_records=table.num_rows, total_bytes=table.nbytes,
            app_metadata=json.dumps(stats).encode() if stats is not None else b"")

    def _text(self, command: Message) -> str:
        if isinstance(command, sql_pb.CommandStatementQuery):
            self.store.check_transaction(command.transaction_id
                                         if command.HasField("transaction_id") else None)
            if not _language(command.query)[1] and parameters.placeholders(command.query):
                raise BadRequestError("a statement with ? parameters runs as a prepared "
                                      "statement, its values bound by DoPut (ADBC: "
                                      "cursor.execute(sql, parameters))")
            return command.query
        assert isinstance(command, sql_pb.CommandPreparedStatementQuery)
        return self.store.prepared(command.prepared_statement_handle).runnable()

    def put(self, who: _Who, descriptor: flight.FlightDescriptor,
            reader: flight.MetadataRecordBatchReader,
            writer: flight.FlightMetadataWriter) -> None:
        """DoPut: values for the `?` parameters of a prepared statement (one row; its
        columns in parameter order), which then runs with them until others are bound.
        Answered with a `DoPutPreparedStatementResult` naming the same handle. Updates and
        bulk ingest are refused."""
        command = _unpack(descriptor)
        if not isinstance(command, sql_pb.CommandPreparedStatementQuery):
            raise UnsupportedCallError(
                "shoal's Flight SQL takes parameter values for prepared queries only, no "
                "updates: ingest through the HTTP API, OTLP or Kafka")
        handle = command.prepared_statement_handle
        statement = self.store.prepared(handle)
        try:
            values = reader.read_all()
        except pa.ArrowException as e:
            raise BadRequestError(f"unreadable parameter values: {e}") from None
        if _language(statement.text)[1]:
            raise BadRequestError("KQL statements take no parameters")
        batch = values.combine_chunks().to_batches()
        if not batch:
            raise BadRequestError("no parameter values were sent (one row expected)")
        self.store.bind(handle, parameters.bind(statement.text, batch[0]))
        result = sql_pb.DoPutPreparedStatementResult(prepared_statement_handle=handle)
        writer.write(pa.py_buffer(result.SerializeToString()))

    def plan(self, who: _Who, text: str
             ) -> PlannedQuery | tuple[pa.Table, dict[str, Any]]:
        """One statement through the `/v1/query` path, planned: a query's plan (its rows
        stream at DoGet), or what another statement answered (its rows, its stats)."""
        text, kql = _language(text)
        result = plan_statement(self.state, text, token=who.token, prune=True,
                                engine=self.state.db.config.query_engine, kql=kql,
                                client=who.client)
        if isinstance(result, PlannedQuery):
            return result
        return result.table, answer_stats(result)

    def schema(self, who: _Who, descriptor: flight.FlightDescriptor) -> pa.Schema:
        """GetSchema: a query's answer schema (planned, not run); a metadata command's
        fixed schema; other statements (DDL...) are not run for it: an empty schema."""
        command = _unpack(descriptor)
        if isinstance(command, (sql_pb.CommandStatementQuery,
                                sql_pb.CommandPreparedStatementQuery)):
            if isinstance(command, sql_pb.CommandPreparedStatementQuery):
                prepared = self.store.prepared(command.prepared_statement_handle)
                text, kql = _language(prepared.bound or (
                    parameters.with_samples(prepared.text, prepared.params)
                    if len(prepared.params) else prepared.text))
            else:
                text, kql = _language(self._text(command))
            schema = query_schema(self.state, text, engine=self.state.db.config.query_engine,
                                  kql=kql, client=who.client)
            return schema if schema is not None else pa.schema([])
        return self.flight_info(who, descriptor).schema

    def stream(self, who: _Who, ticket: flight.Ticket,
               context: flight.ServerCallContext) -> flight.FlightDataStream:
        """DoGet: a stored answer, or a planned query run now and streamed as the engine
        produces it. The first batch is produced here, so an error before any row (a bad
        statement at run time, too many queries, a cancel) is this call's status; later
        errors end the stream with theirs. The stream's last message is an empty batch whose
        `app_metadata` holds the final stats (`truncated`, `bytes_read`, `rows`).

        A stream whose client takes nothing for `flight_idle_timeout_s` (gRPC's flow control
        then stops pulling messages) is cancelled by its `_Delivery`'s watchdog: the engine
        stops, the slot is freed, and the client's next read fails DEADLINE_EXCEEDED."""
        message = _unpack_bytes(ticket.ticket)
        if not isinstance(message, sql_pb.TicketStatementQuery):
            raise BadRequestError("expected a TicketStatementQuery ticket")
        handle = message.statement_handle
        body = self.store.take(handle)
        if isinstance(body, pa.Table):
            return flight.RecordBatchStream(
                pa.RecordBatchReader.from_batches(body.schema, _batches(body)))
        try:
            bounded = open_stream(self.state, body, who.client)
        except UnavailableError:
            self.store.restore(handle, body)    # busy or restarting: the ticket stays good
            raise
        watch = _ClientWatch(context, bounded)
        delivery = _Delivery(bounded, self._messages(bounded, handle, watch, body.extra),
                             idle_timeout_s=self.state.config.flight_idle_timeout_s)
        self.store.running(handle, delivery)
        try:
            first = delivery.next_message()
        except StopIteration:       # cannot happen: the stats message always comes
            first = None
        except (ShoalError, flight.FlightError):
            raise
        except pa.ArrowException as e:
            delivery.close()
            raise BadRequestError(str(e)) from None
        messages = _chain(first, delivery.messages())
        # However the stream ends (done, failed, its client gone), pyarrow drops `messages`
        # then: the engine stops and the slot is freed, even if it was never pulled.
        weakref.finalize(messages, delivery.close)
        return flight.GeneratorStream(body.schema, messages)

    def _messages(self, bounded: BoundedStream, handle: bytes, watch: _ClientWatch,
                  extra: dict[str, Any]
                  ) -> Generator[pa.RecordBatch | tuple[pa.RecordBatch, bytes], None, None]:
        stream = bounded.stream
        try:
            for batch in bounded.batches:
                watch.stop()        # data flows: a gone client now fails the next write
                yield from _split(batch)
            watch.stop()
            stats = {**stream.final_stats(), **extra}
            yield (pa.RecordBatch.from_pylist([], schema=stream.schema),
                   json.dumps(stats).encode())
        except ShoalError as e:
            if isinstance(e, QueryCancelledError) and watch.client_gone:
                log.info("Flight SQL client went away; its query was cancelled")
            _raise_flight(e)
        except flight.FlightError:
            raise
        except Exception as e:  # noqa: BLE001 - logged there, answered without its traceback
            _raise_unexpected(e)
        finally:
            watch.stop()
            bounded.close()
            self.store.running(handle, None)

    def action(self, who: _Who, action: flight.Action) -> Iterator[flight.Result]:
        body = action.body.to_pybytes() if action.body is not None else b""
        if action.type == "CreatePreparedStatement":
            request = _unpack_bytes(body)
            if not isinstance(request, sql_pb.ActionCreatePreparedStatementRequest):
                raise BadRequestError("expected an ActionCreatePreparedStatementRequest")
            self.store.check_transaction(request.transaction_id
                                         if request.HasField("transaction_id") else None)
            # The guard refuses a forbidden statement at once; a query is planned (nothing
            # read) to announce its answer's schema, with sample values for its `?` parameters.
            text, kql = _language(request.query)
            params = pa.schema([]) if kql else parameters.parameter_schema(
                text, self._answer_schema)
            if len(params):
                text = parameters.with_samples(text, params)
            schema = query_schema(self.state, text, engine=self.state.db.config.query_engine,
                                  kql=kql, client=who.client)
            result = sql_pb.ActionCreatePreparedStatementResult(
                prepared_statement_handle=self.store.prepare(_Prepared(request.query, params)),
                dataset_schema=schema.serialize().to_pybytes() if schema is not None else b"",
                parameter_schema=params.serialize().to_pybytes())
            return iter([flight.Result(_pack(result))])
        if action.type == "BeginTransaction":
            begin = _unpack_bytes(body)
            if not isinstance(begin, sql_pb.ActionBeginTransactionRequest):
                raise BadRequestError("expected an ActionBeginTransactionRequest")
            return iter([flight.Result(_pack(sql_pb.ActionBeginTransactionResult(
                transaction_id=self.store.begin())))])
        if action.type == "EndTransaction":
            end = _unpack_bytes(body)
            if not isinstance(end, sql_pb.ActionEndTransactionRequest):
                raise BadRequestError("expected an ActionEndTransactionRequest")
            if end.action not in (end.END_TRANSACTION_COMMIT, end.END_TRANSACTION_ROLLBACK):
                raise BadRequestError("EndTransaction needs COMMIT or ROLLBACK")
            # Nothing to apply or undo: statements write nothing, and CREATE/ALTER commit
            # at once (SqlInfo says so).
            self.store.end(end.transaction_id)
            return iter([])
        if action.type == "ClosePreparedStatement":
            close = _unpack_bytes(body)
            if not isinstance(close, sql_pb.ActionClosePreparedStatementRequest):
                raise BadRequestError("expected an ActionClosePreparedStatementRequest")
            self.store.close(close.prepared_statement_handle)
            return iter([])
        if action.type == "CancelFlightInfo":
            try:
                request = cancel_pb.CancelFlightInfoRequest.FromString(body)
            except DecodeError:
                raise BadRequestError("expected a CancelFlightInfoRequest") from None
            status = self.store.cancel(_ticket_handle(request.info))
            return iter([flight.Result(
                cancel_pb.CancelFlightInfoResult(status=status).SerializeToString())])
        if action.type == "CancelQuery":
            legacy = _unpack_bytes(body)
            if not isinstance(legacy, sql_pb.ActionCancelQueryRequest):
                raise BadRequestError("expected an ActionCancelQueryRequest")
            status = self.store.cancel(_ticket_handle(legacy.info))
            return iter([flight.Result(_pack(sql_pb.ActionCancelQueryResult(
                result=_LEGACY_CANCEL[status])))])
        raise UnsupportedCallError(f"action {action.type!r} is not supported by shoal")

    # ---- metadata -----------------------------------------------------------------------
    def _db_schemas(self, command: sql_pb.CommandGetDbSchemas) -> pa.Table:
        ok = (_matches_catalog(command.catalog if command.HasField("catalog") else None)
              and _like(command.db_schema_filter_pattern
                        if command.HasField("db_schema_filter_pattern") else None, DB_SCHEMA))
        rows = [(CATALOG, DB_SCHEMA)] if ok else []
        return pa.table({"catalog_name": [r[0] for r in rows],
                         "db_schema_name": [r[1] for r in rows]}, schema=DB_SCHEMAS_SCHEMA)

    def _tables(self, command: sql_pb.CommandGetTables) -> pa.Table:
        ok = (_matches_catalog(command.catalog if command.HasField("catalog") else None)
              and _like(command.db_schema_filter_pattern
                        if command.HasField("db_schema_filter_pattern") else None, DB_SCHEMA)
              and (not command.table_types or TABLE_TYPE in command.table_types))
        pattern = (command.table_name_filter_pattern
                   if command.HasField("table_name_filter_pattern") else None)
        infos = sorted((t for t in self.state.db.catalog.list_tables()
                        if ok and _like(pattern, t.name)), key=lambda t: t.name)
        columns: dict[str, list[Any]] = {
            "catalog_name": [CATALOG] * len(infos), "db_schema_name": [DB_SCHEMA] * len(infos),
            "table_name": [t.name for t in infos], "table_type": [TABLE_TYPE] * len(infos)}
        if not command.include_schema:
            return pa.table(columns, schema=TABLES_SCHEMA)
        columns["table_schema"] = [table_schema(t.name, t.schema).serialize().to_pybytes()
                                   for t in infos]
        return pa.table(columns, schema=TABLES_SCHEMA_WITH_SCHEMA)

    def _answer_schema(self, table: str) -> pa.Schema | None:
        """The answer schema of `SELECT *` over `table`, None for a name that is no table."""
        try:
            info = self.state.db.catalog.load_table(table)
        except ShoalError:
            return None
        return answer_schema(info.schema)


def table_schema(name: str, schema: Schema) -> pa.Schema:
    """A table's schema as metadata announces it: exactly the answer of `SELECT *`
    (`answer_schema`), each field also carrying Flight SQL's column metadata (shoal's type
    name, the catalog, schema and table), which clients show and schema equality ignores."""
    fields = []
    for field in answer_schema(schema):
        fields.append(field.with_metadata({
            "ARROW:FLIGHT:SQL:TYPE_NAME": str(schema.column(field.name).type),
            "ARROW:FLIGHT:SQL:CATALOG_NAME": CATALOG,
            "ARROW:FLIGHT:SQL:SCHEMA_NAME": DB_SCHEMA,
            "ARROW:FLIGHT:SQL:TABLE_NAME": name}))
    return pa.schema(fields)


# ---- GetSqlInfo ------------------------------------------------------------------------------
# Flight SQL's SqlInfo ids shoal answers, by name (the protocol's numbers).
_TRANSACTION_SUPPORTED = 1                  # SqlSupportedTransaction.TRANSACTION
_READ_COMMITTED = 2                         # SqlTransactionIsolationLevel
_CASE_INSENSITIVE = 1                       # SqlSupportedCaseSensitivity
_NULLS_LOW = 1                              # SqlNullOrdering: Spark sorts NULLs first
_KEYWORDS = ("ALTER", "AND", "AS", "ASC", "BETWEEN", "BY", "CASE", "CAST", "CREATE",
             "DESC", "DESCRIBE", "DISTINCT", "ELSE", "END", "EXPLAIN", "FALSE", "FROM",
             "FULL", "GROUP", "HAVING", "IN", "INNER", "IS", "JOIN", "LEFT", "LIKE", "LIMIT",
             "NOT", "NULL", "OF", "ON", "OR", "ORDER", "OUTER", "RIGHT", "SELECT", "SHOW",
             "TABLE", "THEN", "TRUE", "UNION", "VERSION", "WHEN", "WHERE", "WITH")


def _sql_infos() -> dict[int, tuple[int, Any]]:
    """info id -> (union child index, value): 0 string, 1 bool, 2 bigint, 3 int32,
    4 string list."""
    from importlib.metadata import version

    return {0: (0, "shoal"), 1: (0, version("shoal")), 2: (0, pa.__version__),
            3: (1, False),           # FLIGHT_SQL_SERVER_READ_ONLY: CREATE/ALTER run
            4: (1, True),            # FLIGHT_SQL_SERVER_SQL
            5: (1, False),           # FLIGHT_SQL_SERVER_SUBSTRAIT
            # FLIGHT_SQL_SERVER_TRANSACTION: transactions exist (ADBC and JDBC turn
            # autocommit off only then); they hold only reads, see EndTransaction.
            8: (3, _TRANSACTION_SUPPORTED),
            9: (1, True),            # FLIGHT_SQL_SERVER_CANCEL
            10: (1, False),          # FLIGHT_SQL_SERVER_BULK_INGESTION
            500: (1, False),         # SQL_DDL_CATALOG
            501: (1, False),         # SQL_DDL_SCHEMA
            502: (1, True),          # SQL_DDL_TABLE
            503: (3, _CASE_INSENSITIVE),     # SQL_IDENTIFIER_CASE
            504: (0, "`"),           # SQL_IDENTIFIER_QUOTE_CHAR (Spark SQL's)
            505: (3, _CASE_INSENSITIVE),     # SQL_QUOTED_IDENTIFIER_CASE
            506: (1, True),          # SQL_ALL_TABLES_ARE_SELECTABLE
            507: (3, _NULLS_LOW),    # SQL_NULL_ORDERING
            508: (4, list(_KEYWORDS)),       # SQL_KEYWORDS
            513: (0, "\\"),          # SQL_SEARCH_STRING_ESCAPE (LIKE's)
            515: (1, True),          # SQL_SUPPORTS_COLUMN_ALIASING
            516: (1, True),          # SQL_NULL_PLUS_NULL_IS_NULL
            529: (0, "schema"),      # SQL_SCHEMA_TERM
            531: (0, "catalog"),     # SQL_CATALOG_TERM
            536: (1, False),         # SQL_SELECT_FOR_UPDATE_SUPPORTED
            537: (1, False),         # SQL_STORED_PROCEDURES_SUPPORTED
            539: (1, True),          # SQL_CORRELATED_SUBQUERIES_SUPPORTED
            562: (3, _READ_COMMITTED),       # SQL_DEFAULT_TRANSACTION_ISOLATION
            563: (1, True),          # SQL_TRANSACTIONS_SUPPORTED
            564: (3, 1 << _READ_COMMITTED),  # SQL_SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS
            565: (1, True),          # SQL_DATA_DEFINITION_CAUSES_TRANSACTION_COMMIT
            566: (1, False),         # SQL_DATA_DEFINITIONS_IN_TRANSACTIONS_IGNORED
            572: (1, False),         # SQL_BATCH_UPDATES_SUPPORTED
            573: (1, False),         # SQL_SAVEPOINTS_SUPPORTED
            574: (1, False),         # SQL_NAMED_PARAMETERS_SUPPORTED
            }


def sql_info(wanted: list[int]) -> pa.Table:
    infos = _sql_infos()
    ids = sorted(infos) if not wanted else [i for i in wanted if i in infos]
    children: list[list[Any]] = [[], [], [], [], []]
    types, offsets = [], []
    for i in ids:
        child, value = infos[i]
        types.append(child)
        offsets.append(len(children[child]))
        children[child].append(value)
    arrays = [pa.array(children[0], pa.utf8()), pa.array(children[1], pa.bool_()),
              pa.array(children[2], pa.int64()), pa.array(children[3], pa.int32()),
              pa.array(children[4], _SQL_INFO_VALUE.field(4).type),
              pa.array([], _SQL_INFO_VALUE.field(5).type)]
    value = pa.UnionArray.from_dense(pa.array(types, pa.int8()), pa.array(offsets, pa.int32()),
                                     arrays, [f.name for f in _SQL_INFO_VALUE])
    return pa.Table.from_arrays([pa.array(ids, pa.uint32()), value], schema=SQL_INFO_SCHEMA)


# ---- helpers ---------------------------------------------------------------------------------
def _batches(table: pa.Table) -> Iterator[pa.RecordBatch]:
    """The answer in record batches of at most `BATCH_BYTES` (and `BATCH_ROWS`)."""
    rows = table.num_rows
    per_row = max(1, table.nbytes // rows) if rows else 1
    size = max(1, min(BATCH_ROWS, BATCH_BYTES // per_row))
    yield from table.to_batches(max_chunksize=size)


def _split(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """One streamed batch in pieces of at most `BATCH_BYTES` (and `BATCH_ROWS`)."""
    rows = batch.num_rows
    per_row = max(1, batch.nbytes // rows) if rows else 1
    size = max(1, min(BATCH_ROWS, BATCH_BYTES // per_row))
    for start in range(0, rows, size):
        yield batch.slice(start, size)


class _Delivery:
    """A DoGet's messages, which a cancel request or the idle watchdog (other threads) can
    end even while the client reads nothing: `cancel` interrupts the engine, then takes the
    lock the sending thread holds while it pulls a message (which the interrupt makes
    short), and closes the messages: the engine's resources and the query slot are freed at
    once, and the stream's next pull fails CANCELLED.

    Idle bound: pyarrow pulls the next message only once gRPC has taken the previous one,
    and gRPC's flow control stops taking messages when the client stops reading. So the
    time since the last pull ended, while no pull runs (a pull is the engine's time,
    bounded by `query_timeout_s`), is how long the client has read nothing. Past
    `idle_timeout_s` the watchdog thread closes the messages the same way (the engine
    stops, the slot is freed) and the next pull, if gRPC ever takes one, fails
    DEADLINE_EXCEEDED naming the setting. Once the engine has finished, the slot is free
    already and the watchdog leaves the stream to its client."""

    def __init__(self, bounded: BoundedStream, messages: Generator[Any, None, None], *,
                 idle_timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.bounded = bounded
        self.finished = bounded.stream.finished
        self._messages = messages
        self._lock = threading.Lock()
        self._cancelled = False
        self._idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._idle_since: float | None = clock()    # None while a pull runs
        self.timed_out = False
        self._ended = threading.Event()
        threading.Thread(target=self._watch_idle, name="shoal-flight-idle",
                         daemon=True).start()

    def next_message(self) -> Any:
        with self._lock:
            if self.timed_out:
                _raise_flight(StreamIdleError(self._idle_timeout_s))
            if self._cancelled:
                _raise_flight(QueryCancelledError())
            self._idle_since = None
            try:
                return next(self._messages)
            except BaseException:
                self._ended.set()       # done or failed: the generator has closed
                raise
            finally:
                self._idle_since = self._clock()

    def messages(self) -> Iterator[Any]:
        while True:
            try:
                message = self.next_message()
            except StopIteration:
                return
            yield message

    def cancel(self) -> bool:
        if not self.bounded.stream.cancel():
            return False
        self.close(cancelled=True)
        return True

    def close(self, *, cancelled: bool = False) -> None:
        with self._lock:
            self._cancelled = self._cancelled or cancelled
            self._messages.close()
            self._ended.set()

    def _watch_idle(self) -> None:
        limit = self._idle_timeout_s
        while not self.finished.is_set():
            since = self._idle_since
            wait = IDLE_POLL_S if since is None else since + limit - self._clock()
            if wait > 0 and self._ended.wait(min(wait, IDLE_POLL_S)):
                return
            if not self._lock.acquire(blocking=False):
                continue        # a pull runs: the engine works, the client waits for it
            try:
                since = self._idle_since
                if (self._ended.is_set() or self.finished.is_set() or since is None
                        or self._clock() - since < limit):
                    continue
                self.timed_out = True
                self.bounded.stream.cancel()
                self._messages.close()      # the engine stops, the slot is freed
                self._ended.set()
            finally:
                self._lock.release()
            log.info("a Flight SQL client read nothing for %gs (flight_idle_timeout_s): "
                     "its stream was cancelled and its query slot freed", limit)
            return


@dataclass(frozen=True)
class _Who:
    """The caller of a Flight call: its bearer token (None when auth is off) and its key
    for the per-client slot bound (`ServerState.client_key`)."""

    token: str | None
    client: str


def _peer_host(peer: str) -> str:
    """The address of a gRPC peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`) without
    its port: every connection of one host is one client."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] or rest
        host = host.strip("[]")
        return host.partition("%")[0]       # a zone id names the interface, not the host
    return peer


def _shut_down(service: _Service) -> None:
    service.shutdown()     # refuses new calls, waits for running ones
    service.wait()


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
    yield from rest


class _ClientWatch:
    """Until a stream's first batch is ready, watches that its client is still there (the
    call's cancellation flag, checked every `WATCH_CLIENT_S`): a client gone while the
    engine computes cancels the query, which a write would only notice after the engine
    finished. Once batches flow, a gone client fails the next write, which drops the
    stream (`BoundedStream` then stops the engine and frees the slot)."""

    def __init__(self, context: flight.ServerCallContext, bounded: BoundedStream) -> None:
        self._context = context
        self._bounded = bounded
        self._stop = threading.Event()
        self._lock = threading.Lock()       # no check of the call once stop() returned
        self.client_gone = False
        self._thread = threading.Thread(target=self._watch, name="shoal-flight-client",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_CLIENT_S):
            with self._lock:
                if self._stop.is_set():
                    return
                gone = self._context.is_cancelled()
            if gone:
                self.client_gone = True
                self._bounded.stream.cancel()
                return

    def stop(self) -> None:
        if self._stop.is_set():
            return
        with self._lock:
            self._stop.set()


def _language(text: str) -> tuple[str, bool]:
    """(the statement, whether it is KQL): a `kql:` prefix marks KQL."""
    if text.lstrip()[:len(KQL_PREFIX)].lower() == KQL_PREFIX:
        return text.lstrip()[len(KQL_PREFIX):], True
    return text, False


def _ticket_handle(info: bytes) -> bytes:
    """The statement handle in the ticket of a serialized FlightInfo (a cancel request's)."""
    try:
        parsed = flight.FlightInfo.deserialize(info)
    except (pa.ArrowException, TypeError, ValueError):
        raise BadRequestError("the cancel request holds no valid FlightInfo") from None
    if not parsed.endpoints:
        raise BadRequestError("the cancel request's FlightInfo has no endpoint")
    ticket = _unpack_bytes(parsed.endpoints[0].ticket.ticket)
    if not isinstance(ticket, sql_pb.TicketStatementQuery):
        raise BadRequestError("expected a TicketStatementQuery ticket")
    return ticket.statement_handle


def _like(pattern: str | None, name: str) -> bool:
    """SQL LIKE (`%`, `_`, case sensitive), as Flight SQL's filter patterns are."""
    if pattern is None:
        return True
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


def _matches_catalog(catalog: str | None) -> bool:
    return catalog is None or catalog == CATALOG


def _pack(message: Message) -> bytes:
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


def _unpack_bytes(raw: bytes) -> Message:
    try:
        wrapped = any_pb2.Any.FromString(raw)
    except DecodeError:
        raise BadRequestError("not a Flight SQL command (a google.protobuf.Any)") from None
    name = wrapped.type_url.rpartition("/")[2]
    cls = _COMMANDS.get(name) or _OTHER_MESSAGES.get(name)
    if cls is None:
        raise UnsupportedCallError(f"Flight SQL message {name or '(none)'} is not supported "
                                   "by shoal")
    message = cls()
    if not wrapped.Unpack(message):
        raise BadRequestError(f"malformed {name}")
    return message


def _unpack(descriptor: flight.FlightDescriptor) -> Message:
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise BadRequestError("shoal answers Flight SQL commands, not path descriptors")
    return _unpack_bytes(descriptor.command)


_R = sql_pb.ActionCancelQueryResult
_LEGACY_CANCEL: dict[cancel_pb.CancelStatus, sql_pb.ActionCancelQueryResult.CancelResult] = {
    cancel_pb.CANCEL_STATUS_UNSPECIFIED: _R.CANCEL_RESULT_UNSPECIFIED,
    cancel_pb.CANCEL_STATUS_CANCELLED: _R.CANCEL_RESULT_CANCELLED,
    cancel_pb.CANCEL_STATUS_CANCELLING: _R.CANCEL_RESULT_CANCELLING,
    cancel_pb.CANCEL_STATUS_NOT_CANCELLABLE: _R.CANCEL_RESULT_NOT_CANCELLABLE}

_OTHER_MESSAGES: dict[str, type[Message]] = {
    m.DESCRIPTOR.full_name: m for m in (
        sql_pb.TicketStatementQuery, sql_pb.ActionCreatePreparedStatementRequest,
        sql_pb.ActionClosePreparedStatementRequest, sql_pb.ActionCancelQueryRequest,
        sql_pb.ActionBeginTransactionRequest, sql_pb.ActionEndTransactionRequest)}


def _raise_flight(exc: ShoalError) -> NoReturn:
    """`exc` as a Flight error: a gRPC code, the error's message, and in `extra_info` the
    JSON error document of the HTTP API (`{"error": {"code", "message", "details"}}`, and
    `retry_after_s` for a refusal to retry). Only pyarrow.flight's own error classes
    travel without the server's Python traceback, which pyarrow attaches to any other
    exception (ArrowInvalid included): so bad input is UNKNOWN ("Failed"), not
    INVALID_ARGUMENT, and its code is in the document."""
    status = status_for(exc)
    message = str(exc)
    body: dict[str, Any] = error_document(exc.code, message, details_for(exc))
    if isinstance(exc, UnavailableError):
        retry = float(getattr(exc, "retry_after_s", 1.0))
        body["retry_after_s"] = retry
        message = f"{message} (retry after {retry:g} s)"
    info = json.dumps(body).encode()
    if status == 401:
        raise flight.FlightUnauthenticatedError(message, info) from None
    if status == 403:
        raise flight.FlightUnauthorizedError(message, info) from None
    if isinstance(exc, QueryCancelledError):
        raise flight.FlightCancelledError(message, info) from None
    if isinstance(exc, (QueryTimeoutError, StreamIdleError)):
        raise flight.FlightTimedOutError(message, info) from None
    if isinstance(exc, UnavailableError):
        raise flight.FlightUnavailableError(message, info) from None
    if status >= 500:
        log.error("Flight SQL call failed: %s", exc, exc_info=exc)
        raise flight.FlightInternalError(message, info) from None
    raise flight.FlightServerError(message, info) from None


def _raise_unexpected(exc: Exception) -> NoReturn:
    """An exception outside shoal's error tree (a bug, a library's failure): logged with its
    traceback here, answered INTERNAL with a generic message."""
    log.error("Flight SQL call failed unexpectedly", exc_info=exc)
    body = error_document("internal_error", INTERNAL_MESSAGE)
    raise flight.FlightInternalError(INTERNAL_MESSAGE, json.dumps(body).encode()) from None
