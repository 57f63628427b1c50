"""Arrow Flight SQL holds its bounds against a careless or hostile client, over a real server
(uvicorn + the Flight port, real sockets) with pyarrow's Flight client and ADBC:

- a client that opens streams, reads one batch of each and stops reading holds its query
  slots only for `flight_idle_timeout_s`: then the engine stops, the slots are free again,
  and the client's next read fails DEADLINE_EXCEEDED naming the setting;
- slots are fair per client: one client (its token, or its address without tokens) gets at
  most `query_concurrency_per_client` of them (all but one by default), so another client's
  `/v1/query` still runs while the first holds every stream it may;
- every Flight error is a status with a code and a message (and the JSON error document in
  `extra_info`), never the server's Python traceback or its source paths.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import replace

import adbc_driver_flightsql.dbapi as flight_sql
import httpx
import pyarrow.flight as flight
import pytest

import shoal
from shoal.server import create_app
from tests.server.conftest import ADMIN, QUERY
from tests.server.test_flight_sql import ENDLESS_ROWS, _big, _logs, _pack, connect
from tests.support.server import free_port, serve_app
from tests.support.waiting import eventually

OTHER = "query-secret-4"        # a second client's token


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Iterator[shoal.Shoal]:
    # The row cap far above ENDLESS_ROWS's reach, so a stream outlasts every buffer between
    # the engine and a client that stopped reading (see test_flight_sql's `live`).
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("flight-sec")),
                       query_engine="local", query_max_rows=10**9)
    try:
        _logs(db)
        _big(db)
        yield db
    finally:
        db.close()


class Server:
    def __init__(self, app, http: str) -> None:
        self.app = app
        self.http = http
        self.uri = f"grpc://127.0.0.1:{app.state.flight.bound_port}"

    @property
    def running(self) -> int:
        return self.app.state.shoal.query_slots.running


def serve(db, **settings) -> Iterator[Server]:
    app = create_app(db, config=replace(db.config, **settings), flight_port=free_port())
    with serve_app(app) as http:
        yield Server(app, http)


def options(token: str | None) -> flight.FlightCallOptions:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return flight.FlightCallOptions(headers=headers)


def ticket_of(client: flight.FlightClient, sql: str, token: str | None = None
              ) -> flight.Ticket:
    from shoal.frontends.flightsql import flight_sql_pb2 as sql_pb

    command = _pack(sql_pb.CommandStatementQuery(query=sql))
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command), options(token))
    return info.endpoints[0].ticket


def open_streams(server: Server, token: str | None, wanted: int
                 ) -> tuple[flight.FlightClient, list, list[flight.FlightError]]:
    """A client that opens `wanted` streams of a huge answer and reads one batch of each:
    (its connection, the readers it holds, the refusals it got)."""
    client = flight.connect(server.uri)
    readers, refused = [], []
    # every ticket first: planning takes a slot too (while it plans), within the same bound
    tickets = [ticket_of(client, ENDLESS_ROWS, token) for _ in range(wanted)]
    for ticket in tickets:
        try:
            reader = client.do_get(ticket, options(token))
            assert reader.read_chunk().data.num_rows > 0
        except flight.FlightError as e:
            refused.append(e)
            continue
        readers.append(reader)
    return client, readers, refused


def close_streams(client: flight.FlightClient, readers: list) -> None:
    for reader in readers:
        reader.cancel()
    client.close()


def http_query(server: Server, token: str | None = None, *, source: str = "127.0.0.1"
               ) -> httpx.Response:
    """`POST /v1/query` from the loopback address `source` (any 127.x.y.z is this host)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=server.http, transport=transport, headers=headers,
                      timeout=60) as http:
        return http.post("/v1/query", json={"sql": "SELECT count(*) AS n FROM logs"})


def promql(server: Server, *, source: str) -> httpx.Response:
    """A PromQL instant query from the loopback address `source`."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=server.http, transport=transport, timeout=60) as http:
        return http.get("/api/v1/query", params={"query": "1 + 1", "time": "1772323200"})


def assert_clean(error: BaseException) -> None:
    """A Flight error carries a message and a code, never a traceback or a source path."""
    extra = getattr(error, "extra_info", b"") or b""
    for text in (str(error), extra.decode("utf-8", "replace")):
        assert "Traceback" not in text, text
        assert '.py"' not in text and 'File "' not in text, text


# ---- fairness and the idle bound -------------------------------------------------------------
@pytest.fixture
def fair(db) -> Iterator[Server]:
    # The idle bound far away: this test is about the per-client bound alone.
    yield from serve(db, query_concurrency=4, flight_idle_timeout_s=600.0)


def test_one_client_cannot_take_every_slot(fair):
    client, readers, refused = open_streams(fair, None, wanted=4)
    try:
        # all but one of the 4 slots: the fourth stream is refused, UNAVAILABLE with a hint
        assert len(readers) == 3 and fair.running == 3
        [error] = refused
        assert isinstance(error, flight.FlightUnavailableError), error
        assert "query_concurrency_per_client" in str(error) and "retry" in str(error)
        body = json.loads(error.extra_info)
        assert body["error"]["code"] == "too_many_queries" and body["retry_after_s"] >= 1
        assert_clean(error)
        # Another client (another address: no tokens here) still gets the last slot.
        answer = http_query(fair, source="127.0.0.2")
        assert answer.status_code == 200, answer.text
        assert answer.json()["rows"] == [[200]]
        # The same address over HTTP is the same client: refused with the per-client bound.
        same = http_query(fair, source="127.0.0.1")
        assert same.status_code == 429 and same.headers["Retry-After"] == "1"
        assert "query_concurrency_per_client" in same.json()["error"]["message"]
        # PromQL shares the slots and the rule.
        assert promql(fair, source="127.0.0.1").status_code == 429
        other = promql(fair, source="127.0.0.2")
        assert other.status_code == 200, other.text
    finally:
        close_streams(client, readers)
    eventually(lambda: fair.running, "the abandoned streams' slots", until=lambda n: n == 0)


@pytest.fixture
def fair_tokens(db) -> Iterator[Server]:
    yield from serve(db, query_concurrency=2, flight_idle_timeout_s=600.0,
                     tokens=f"{ADMIN}=admin;{QUERY}=query;{OTHER}=query")


def test_with_tokens_the_client_is_its_token(fair_tokens):
    """query_concurrency 2: one slot per client. Both clients on one address."""
    client, readers, refused = open_streams(fair_tokens, QUERY, wanted=2)
    try:
        assert len(readers) == 1 and len(refused) == 1
        assert isinstance(refused[0], flight.FlightUnavailableError)
        assert http_query(fair_tokens, QUERY).status_code == 429
        answer = http_query(fair_tokens, OTHER)     # another token: another client
        assert answer.status_code == 200, answer.text
    finally:
        close_streams(client, readers)
    eventually(lambda: fair_tokens.running, "the abandoned stream's slot",
               until=lambda n: n == 0)


@pytest.fixture
def idle(db) -> Iterator[Server]:
    yield from serve(db, query_concurrency=2, flight_idle_timeout_s=1.0)


def test_an_idle_stream_is_cancelled_and_frees_its_slot(idle, caplog):
    caplog.set_level(logging.INFO, logger="shoal.server")
    client, readers, refused = open_streams(idle, None, wanted=2)
    try:
        assert len(readers) == 1 and len(refused) == 1   # one client: one of the two slots
        # The client reads nothing more: the watchdog frees its slot (the old server held
        # it for the query timeout, 300 s).
        eventually(lambda: idle.running, "the idle stream's slot to be freed",
                   until=lambda n: n == 0)
        # The same client runs again at once.
        assert http_query(idle).status_code == 200
        # Its stale stream: what gRPC had buffered, then DEADLINE_EXCEEDED naming the
        # setting (never the stream's end: the query was stopped mid-way).
        [reader] = readers
        with pytest.raises(flight.FlightTimedOutError) as e:
            while True:
                chunk = reader.read_chunk()
                assert chunk.app_metadata is None, "the stream ended normally"
        assert "flight_idle_timeout_s" in str(e.value)
        assert json.loads(e.value.extra_info)["error"]["code"] == "stream_idle_timeout"
        assert_clean(e.value)
        assert any("read nothing" in r.getMessage() for r in caplog.records)
    finally:
        close_streams(client, readers)
    assert idle.running == 0


def test_a_client_that_keeps_reading_gets_its_whole_answer(idle):
    """The idle bound does not cut a client that reads: an answer many times gRPC's buffers
    (a million rows) streams to its end and the final stats arrive."""
    with flight.connect(idle.uri) as client:
        reader = client.do_get(ticket_of(client, "SELECT n, service FROM big"))
        rows, stats = 0, None
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            if chunk.data is not None:
                rows += chunk.data.num_rows
            if chunk.app_metadata is not None:
                stats = json.loads(chunk.app_metadata.to_pybytes())
    assert rows == 1_000_000 and stats is not None and stats["truncated"] is False
    eventually(lambda: idle.running, "the finished stream's slot", until=lambda n: n == 0)


# ---- errors without tracebacks ---------------------------------------------------------------
@pytest.fixture(scope="module")
def plain(db) -> Iterator[Server]:
    yield from serve(db)


@pytest.mark.parametrize(("sql", "code", "fragment"), [
    ("SELEC count(*) FROM logs", None, "SELEC"),                       # bad SQL
    ("SELECT reflect('java.lang.System', 'exit', 1)", None, "reflect"),  # forbidden function
    ("SELECT * FROM no_such_table", "table_not_found", "no_such_table"),  # unknown table
    ("kql: logs | where", "kql_syntax", "KQL"),                          # bad KQL
])
def test_errors_carry_a_code_and_a_message_not_a_traceback(plain, sql, code, fragment):
    with flight.connect(plain.uri) as client:
        with pytest.raises(flight.FlightError) as e:
            ticket_of(client, sql)
    assert isinstance(e.value, flight.FlightServerError), e.value      # the caller's fault
    assert fragment in str(e.value)
    body = json.loads(e.value.extra_info)
    assert set(body) == {"error"} and body["error"]["message"] in str(e.value)
    if code is not None:
        assert body["error"]["code"] == code, body
    assert_clean(e.value)
    with connect(plain.uri) as conn, conn.cursor() as cur:          # ADBC sees the same
        with pytest.raises(flight_sql.Error) as adbc:
            cur.execute(sql)
        assert fragment in str(adbc.value)
        assert "Traceback" not in str(adbc.value) and 'File "' not in str(adbc.value)


def test_an_unknown_ticket_and_an_unsupported_call_carry_no_traceback(plain):
    with flight.connect(plain.uri) as client:
        with pytest.raises(flight.FlightServerError) as e:
            client.do_get(flight.Ticket(b"\xff\x00 not a ticket")).read_all()
        assert_clean(e.value)
        with pytest.raises(flight.FlightServerError) as e:
            list(client.do_action(flight.Action("DropEverything", b"")))
        assert "not supported" in str(e.value)
        assert json.loads(e.value.extra_info)["error"]["code"] == "unsupported"
        assert_clean(e.value)


def test_an_internal_error_is_generic_and_logged(plain, monkeypatch, caplog):
    """A fault no statement can cause for real (a bug in the server) is injected: planning
    raises an arbitrary exception whose text names a source path."""
    def broken(*_args, **_kwargs):
        raise RuntimeError('File "/srv/shoal/secret.py", line 1: broken')

    monkeypatch.setattr(plain.app.state.flight, "plan", broken)
    caplog.set_level(logging.ERROR, logger="shoal.server")
    with flight.connect(plain.uri) as client:
        with pytest.raises(flight.FlightInternalError) as e:
            ticket_of(client, "SELECT count(*) FROM logs")
    assert "secret" not in str(e.value) and "RuntimeError" not in str(e.value)
    assert json.loads(e.value.extra_info)["error"]["code"] == "internal_error"
    assert_clean(e.value)
    logged = [r for r in caplog.records if r.exc_info is not None]
    assert logged and "secret.py" in str(logged[-1].exc_info[1])    # the details: the log only


# ---- stopping ----------------------------------------------------------------------------------
def test_stopping_does_not_wait_for_ever_on_a_client_that_reads_nothing(db):
    """gRPC's shutdown waits for every running call, and a stream whose client reads nothing
    never ends by itself: stop() waits `stop_wait_s` (set small here), then cancels the
    stream's query and returns."""
    for server in serve(db, flight_idle_timeout_s=600.0):
        flight_sql_server = server.app.state.flight
        flight_sql_server.stop_wait_s = 0.5
        client, readers, _refused = open_streams(server, None, wanted=1)
        try:
            assert server.running == 1
            stopper = threading.Thread(target=flight_sql_server.stop, daemon=True)
            stopper.start()
            eventually(stopper.is_alive, "stop() to return", until=lambda alive: not alive)
            eventually(lambda: server.running, "the stream's query to be cancelled",
                       until=lambda n: n == 0)
        finally:
            close_streams(client, readers)
