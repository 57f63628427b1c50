"""Arrow Flight SQL with the real client, `adbc-driver-flightsql`
and its DBAPI cursor, against a live in-process server (uvicorn + the Flight port started by
the app's lifespan), on the embedded engine: connect, list tables, a needle and an
aggregation, a 1M-row answer as Arrow, prepared statements, time travel and `has()` pruning
in the stats side channel (FlightInfo.app_metadata, read with pyarrow's Flight client),
the guard's refusals, and bearer tokens with scopes."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
from dataclasses import replace

import adbc_driver_flightsql.dbapi as flight_sql
import httpx
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from adbc_driver_flightsql import DatabaseOptions

import shoal
from shoal.server import create_app
from shoal.frontends.flightsql import flight_cancel_pb2 as cancel_pb
from shoal.frontends.flightsql import flight_sql_pb2 as sql_pb
from shoal.types import LONG, STRING, Column
from tests.server.conftest import ADMIN, INGEST, QUERY
from tests.support.server import free_port, serve_app, start_server
from tests.support.waiting import eventually

BIG_ROWS = 1_000_000
BASE_NS = 1_772_323_200 * 10**9          # 2026-03-01T00:00:00Z


class Live(tuple):
    """(Flight URI, db) of a live server, with `.http`: its HTTP base URL (for /metrics)."""

    http: str


def _serve(tmp_path_factory, name: str, fill, **config):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp(name)), query_engine="local",
                       **config)
    try:
        fill(db)
        app = create_app(db, config=db.config, flight_port=free_port())
        with serve_app(app) as url:
            live = Live((f"grpc://127.0.0.1:{app.state.flight.bound_port}", db))
            live.http = url
            yield live
    finally:
        db.close()


def _logs(db) -> None:
    """`logs`: two snapshots of 100 rows each, 'deadlock' only in the second."""
    db.create_table("logs", [Column("service", STRING), Column("message", STRING),
                             Column("status", LONG)])
    schema = db.catalog.load_table("logs").schema.arrow()
    for part in range(2):
        ts = [BASE_NS + (part * 100 + i) * 10**9 for i in range(100)]
        db.append("logs", pa.table({
            "_timestamp": pa.array(ts, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(100, pa.binary()),
            "service": [f"svc-{i % 4}" for i in range(100)],
            "message": [("deadlock found" if part == 1 and i == 42 else f"request {i} ok")
                        for i in range(100)],
            "status": [200 + i % 3 for i in range(100)],
        }).cast(schema))


def _big(db) -> None:
    """`big`: 1M rows in 4 extents, written straight through the commit coordinator."""
    db.create_table("big", [Column("n", LONG), Column("service", STRING)])
    info = db.catalog.load_table("big")
    schema = info.schema.arrow()
    step = BIG_ROWS // 4
    entries = []
    for e in range(4):
        n = pa.array(range(e * step, (e + 1) * step), pa.int64())
        t = pa.table({"_timestamp": pa.array([BASE_NS + e * 10**9] * step,
                                             pa.timestamp("ns", tz="UTC")),
                      "props": pa.nulls(step, pa.binary()), "n": n,
                      "service": pa.array([f"svc-{e}"] * step)}).cast(schema)
        entries.append(db.coordinator.write_extent(info, t.to_batches()))
    db.coordinator.append("big", entries)


def _headers(db) -> None:
    """`h`: a Kafka header column `n` (4-byte big-endian ints 0..9)."""
    db.sql("CREATE TABLE h (k string, n binary HEADER('n'))")
    info = db.catalog.load_table("h")
    db.append("h", pa.table({
        "_timestamp": pa.array([BASE_NS + i for i in range(10)], pa.int64()).cast(
            pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(10, pa.binary()),
        "k": [f"k{i}" for i in range(10)],
        "n": [struct.pack(">i", i) for i in range(10)],
    }).cast(info.schema.arrow()))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    def fill(db):
        _logs(db)
        _big(db)
        _headers(db)

    # The row cap raised far above ENDLESS_ROWS's reach: at the default 1M rows (16 MB of two
    # longs) the whole capped answer fits in gRPC's and the sockets' buffers, so the server
    # could finish it, and free its slot, before the client reads its second batch. Under
    # 256 MB (the byte cap) no buffer holds it: the query really runs while rows are read.
    yield from _serve(tmp_path_factory, "flight", fill, query_max_rows=10**9)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    yield from _serve(tmp_path_factory, "flight-auth", _logs,
                      tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")


def connect(uri: str, token: str | None = None):
    kw = {DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}"} if token else {}
    return flight_sql.connect(uri, db_kwargs=kw, autocommit=True)


def flight_info(uri: str, sql: str, token: str | None = None) -> flight.FlightInfo:
    """The FlightInfo of a statement, with pyarrow's own Flight client (ADBC does not show
    app_metadata), and its stats."""
    wrapped = _pack(sql_pb.CommandStatementQuery(query=sql))
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    with flight.connect(uri) as client:
        return client.get_flight_info(flight.FlightDescriptor.for_command(wrapped),
                                      flight.FlightCallOptions(headers=headers))


def _pack(message) -> bytes:
    from google.protobuf import any_pb2

    a = any_pb2.Any()
    a.Pack(message)
    return a.SerializeToString()


def stats_of(uri: str, sql: str, token: str | None = None) -> dict:
    """The stats known when the statement is planned (FlightInfo.app_metadata)."""
    return json.loads(flight_info(uri, sql, token).app_metadata)


def streamed(uri: str, sql: str, token: str | None = None) -> tuple[pa.Table, dict]:
    """A statement's rows through DoGet with pyarrow's Flight client, and the final stats
    that the stream's last message carries in its app_metadata."""
    info = flight_info(uri, sql, token)
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    batches, stats = [], None
    with flight.connect(uri) as client:
        reader = client.do_get(info.endpoints[0].ticket,
                               flight.FlightCallOptions(headers=headers))
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            if chunk.data is not None and chunk.data.num_rows:
                batches.append(chunk.data)
            if chunk.app_metadata is not None:
                stats = json.loads(chunk.app_metadata.to_pybytes())
    assert stats is not None, "no final stats in the stream"
    return pa.Table.from_batches(batches, schema=info.schema), stats


def test_lists_tables_with_their_columns(live):
    uri, _db = live
    with connect(uri) as conn:
        objects = conn.adbc_get_objects().read_all().to_pylist()
        assert [c["catalog_name"] for c in objects] == ["shoal"]
        schemas = objects[0]["catalog_db_schemas"]
        assert [s["db_schema_name"] for s in schemas] == ["default"]
        tables = {t["table_name"]: t for t in schemas[0]["db_schema_tables"]}
        assert set(tables) == {"big", "h", "logs"}
        assert {c["column_name"] for c in tables["logs"]["table_columns"]} >= {
            "_timestamp", "service", "message", "status"}
        assert conn.adbc_get_table_types() == ["TABLE"]
        assert conn.adbc_get_table_schema("big").names[-2:] == ["n", "service"]
        info = conn.adbc_get_info()
        assert info["vendor_name"] == "shoal"


def test_needle_and_aggregation(live):
    uri, _db = live
    with connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT service, status FROM logs WHERE message = 'deadlock found'")
        assert cur.fetchall() == [("svc-2", 200)]
        cur.execute("SELECT service, count(*) AS n, sum(status) AS s FROM logs "
                    "GROUP BY service ORDER BY service")
        assert cur.fetchall() == [(f"svc-{k}", 50, sum(200 + i % 3 for i in range(100)
                                                      if i % 4 == k) * 2)
                                  for k in range(4)]


def test_one_million_rows_as_arrow(live):
    uri, _db = live
    with connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT n, service FROM big")
        table = cur.fetch_arrow_table()
    assert table.num_rows == BIG_ROWS
    assert pa.compute.sum(table["n"]).as_py() == BIG_ROWS * (BIG_ROWS - 1) // 2
    assert table.column("service").unique().to_pylist() == [f"svc-{e}" for e in range(4)]


def test_prepared_statement_without_parameters(live):
    uri, _db = live
    with connect(uri) as conn, conn.cursor() as cur:
        cur.adbc_prepare("SELECT count(*) AS n FROM logs WHERE status = 201")
        for _ in range(2):      # a prepared statement runs again and again
            cur.execute("SELECT count(*) AS n FROM logs WHERE status = 201")
            assert cur.fetchall() == [(66,)]


def test_time_travel_and_has_pruning_in_the_stats(live):
    uri, db = live
    first = min(s.snapshot_id for s in db.catalog.snapshots("logs")
                if s.operation != "create")
    with connect(uri) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) AS n FROM logs VERSION AS OF {first}")
        assert cur.fetchall() == [(100,)]
        cur.execute("SELECT count(*) AS n FROM logs")
        assert cur.fetchall() == [(200,)]
    then = stats_of(uri, f"SELECT count(*) AS n FROM logs VERSION AS OF {first}")
    assert then["scans"][0]["snapshot_id"] == first
    needle = stats_of(uri, "SELECT message FROM logs WHERE has(message, 'deadlock')")
    assert needle["extents_considered"] == 2
    assert needle["extents_pruned"] == 1, needle     # the first extent has no 'deadlock'
    rows, final = streamed(uri, "SELECT message FROM logs WHERE has(message, 'deadlock')")
    assert rows.num_rows == 1 and final["rows"] == 1
    assert final["truncated"] is False and final["extents_pruned"] == 1
    assert final["bytes_read"] > 0


def test_kql_with_the_prefix(live):
    uri, _db = live
    with connect(uri) as conn, conn.cursor() as cur:
        cur.execute("kql: logs | where message has 'deadlock' | project service")
        assert cur.fetchall() == [("svc-2",)]
    stats = stats_of(uri, "kql: logs | where message has 'deadlock' | count")
    assert "has(message, 'deadlock')" in stats["sql"]


def test_forbidden_statements_get_the_guards_message(live):
    uri, _db = live
    with connect(uri) as conn, conn.cursor() as cur:
        # UNKNOWN ("Failed"), which ADBC calls OperationalError: pyarrow's Flight server sends
        # INVALID_ARGUMENT only with the server's Python traceback attached
        with pytest.raises(flight_sql.OperationalError) as e:
            cur.execute("SELECT reflect('java.lang.System', 'exit', 1)")
        assert "reflect" in str(e.value)
        with pytest.raises(flight_sql.Error) as e:
            cur.execute("DROP VIEW logs")
        assert "DROP statements" in str(e.value)
        with pytest.raises(flight_sql.Error) as e:
            cur.adbc_prepare("INSERT INTO logs VALUES (1)")
        assert "INSERT statements" in str(e.value)


def test_tokens_and_scopes(secured):
    uri, _db = secured
    for token in (None, "not-a-token"):
        with connect(uri, token) as conn, conn.cursor() as cur:
            with pytest.raises(flight_sql.Error) as e:
                cur.execute("SELECT count(*) FROM logs")
            assert "UNAUTHENTICATED" in str(e.value) or "Unauthenticated" in str(e.value)
            assert "not-a-token" not in str(e.value)
    with connect(uri, INGEST) as conn, conn.cursor() as cur:
        with pytest.raises(flight_sql.Error) as e:
            cur.execute("SELECT count(*) FROM logs")
        assert "query" in str(e.value)
    with connect(uri, QUERY) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM logs")
        assert cur.fetchall() == [(200,)]
        with pytest.raises(flight_sql.Error) as e:      # DDL that changes tables: admin
            cur.execute("CREATE TABLE t2 (a string)")
        assert "admin" in str(e.value)
    with connect(uri, ADMIN) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t2 (a string)")
        cur.fetchall()
    assert streamed(uri, "SELECT count(*) FROM logs", QUERY)[1]["truncated"] is False
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_info(uri, "SELECT 1", "wrong")
    with flight.connect(uri) as client:     # user/password clients: the token as password
        header = client.authenticate_basic_token(b"anyone", QUERY.encode())
        assert header == (b"authorization", f"Bearer {QUERY}".encode())
        with pytest.raises(flight.FlightUnauthenticatedError):
            client.authenticate_basic_token(b"anyone", b"wrong")


def _self_signed(directory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "flight.crt", directory / "flight.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.mark.services
def test_shoal_serve_flight_port_with_tls(tmp_path):
    """`shoal serve --flight-port N` with SHOAL_FLIGHT_TLS_CERT/KEY: grpc+tls, the client
    trusting that certificate."""
    cert, key = _self_signed(tmp_path)
    data = tmp_path / "data"
    db = shoal.connect(data_dir=str(data))
    _logs(db)
    db.close()
    port = free_port()
    server = start_server(data, extra_args=["--lazy-spark", "--flight-port", str(port)],
                          env={"SHOAL_QUERY_ENGINE": "local", "SHOAL_FLIGHT_TLS_CERT": cert,
                               "SHOAL_FLIGHT_TLS_KEY": key})
    try:
        with open(cert) as f:
            roots = f.read()
        with flight_sql.connect(f"grpc+tls://127.0.0.1:{port}", autocommit=True, db_kwargs={
                DatabaseOptions.TLS_ROOT_CERTS.value: roots}) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) AS n FROM logs WHERE has(message, 'deadlock')")
            assert cur.fetchall() == [(1,)]
    finally:
        server.stop()


def test_a_ticket_is_good_for_one_doget(live):
    uri, _db = live
    info = flight_info(uri, "SELECT count(*) AS n FROM logs")
    ticket = info.endpoints[0].ticket
    with flight.connect(uri) as client:
        assert client.do_get(ticket).read_all().to_pylist() == [{"n": 200}]
        with pytest.raises(flight.FlightServerError, match="unknown or expired ticket"):
            client.do_get(ticket).read_all()
        with pytest.raises(flight.FlightServerError, match="not a Flight SQL command"):
            client.get_flight_info(flight.FlightDescriptor.for_command(b"\xff\xff"))


def test_header_columns_and_byte_functions_in_sql_and_kql(live):
    uri, _db = live
    want = [("k7", 7), ("k8", 8), ("k9", 9)]
    with connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT k, int_from_bytes(n) AS v FROM h WHERE int_from_bytes(n) >= 7 "
                    "ORDER BY v")
        assert cur.fetchall() == want
        cur.execute("kql: h | where int_from_bytes(n) >= 7 | project k, v = int_from_bytes(n)"
                    " | sort by v asc")
        assert cur.fetchall() == want


# ---- streaming, caps, prepared schemas, cancel ----------------------------------------------
def queries_running(http: str) -> float:
    """`shoal_queries_running` of a live server, from its /metrics."""
    for line in httpx.get(f"{http}/metrics", timeout=30).text.splitlines():
        if line.startswith("shoal_queries_running "):
            return float(line.split()[1])
    raise AssertionError("no shoal_queries_running in /metrics")


# 100 M rows (cut at 256 MB by the byte cap): far more than the server could compute, or gRPC
# buffer, before the client reads
ENDLESS_ROWS = ("SELECT a.n, b.n AS m FROM big a "
                "CROSS JOIN (SELECT n FROM big WHERE n < 100) b")
ENDLESS_COUNT = "SELECT count(*) AS c FROM big a CROSS JOIN big b"    # 10^12 rows to count


def test_rows_stream_while_the_query_runs_and_an_abandoned_stream_frees_its_slot(live):
    uri, _db = live
    info = flight_info(uri, ENDLESS_ROWS)
    assert info.total_records == -1         # not run yet: known when the stream ends
    assert info.schema.names == ["n", "m"]
    assert json.loads(info.app_metadata)["engine"] == "local"
    assert queries_running(live.http) == 0  # planning took no slot for good
    client = flight.connect(uri)
    reader = client.do_get(info.endpoints[0].ticket)
    first = reader.read_chunk().data
    assert first.num_rows > 0 and first.schema.names == ["n", "m"]
    # The first batch is here while the query still runs: it holds its slot (the old code
    # ran the whole statement in GetFlightInfo and had freed the slot before any DoGet).
    assert queries_running(live.http) == 1
    second = reader.read_chunk().data
    assert second.num_rows > 0
    reader.cancel()                         # the client abandons the stream mid-way
    client.close()
    eventually(lambda: queries_running(live.http), "the abandoned stream's slot to be freed",
               until=lambda n: n == 0)
    with connect(uri) as conn, conn.cursor() as cur:    # the engine answers the next query
        cur.execute("SELECT count(*) AS n FROM big WHERE n < 10")
        assert cur.fetchall() == [(10,)]


# A client in a process of its own: killing it drops its connection for real.
_FETCHER = """
import sys
import pyarrow.flight as flight
client = flight.connect(sys.argv[1])
client.do_get(flight.Ticket(bytes.fromhex(sys.argv[2]))).read_all()
"""


def test_a_client_gone_before_the_first_batch_cancels_the_query(live):
    uri, _db = live
    info = flight_info(uri, ENDLESS_COUNT)
    fetcher = subprocess.Popen([sys.executable, "-c", _FETCHER, uri,
                                info.endpoints[0].ticket.ticket.hex()])
    try:
        eventually(lambda: queries_running(live.http), "the count to start",
                   until=lambda n: n == 1)
    finally:
        fetcher.kill()                      # gone while the engine computes; no batch yet
        fetcher.wait(60)
    eventually(lambda: queries_running(live.http), "the engine to stop and free the slot",
               until=lambda n: n == 0)


@pytest.mark.parametrize("action", ["CancelFlightInfo", "CancelQuery"])
def test_cancel_ends_the_running_query_with_cancelled(live, action):
    uri, _db = live
    info = flight_info(uri, ENDLESS_COUNT)
    outcome: dict[str, BaseException] = {}

    def fetch() -> None:
        with flight.connect(uri) as client:
            try:
                client.do_get(info.endpoints[0].ticket).read_all()
            except flight.FlightError as e:
                outcome["error"] = e

    worker = threading.Thread(target=fetch)
    worker.start()
    eventually(lambda: queries_running(live.http), "the count to start", until=lambda n: n == 1)
    # CANCELLED once the stream has ended, CANCELLING if it is still ending (a busy machine)
    assert cancel(uri, info, action) in (cancel_pb.CANCEL_STATUS_CANCELLED,
                                         cancel_pb.CANCEL_STATUS_CANCELLING)
    worker.join(60)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), flight.FlightCancelledError), outcome
    assert "cancelled" in str(outcome["error"])
    eventually(lambda: queries_running(live.http), "the slot to be freed",
               until=lambda n: n == 0)
    # Done and gone: a second cancel has nothing to cancel.
    assert cancel(uri, info, action) == cancel_pb.CANCEL_STATUS_NOT_CANCELLABLE


def test_a_ticket_cancelled_before_its_doget_is_cancelled(live):
    uri, _db = live
    info = flight_info(uri, "SELECT count(*) AS n FROM logs")
    assert cancel(uri, info, "CancelFlightInfo") == cancel_pb.CANCEL_STATUS_CANCELLED
    with flight.connect(uri) as client, pytest.raises(flight.FlightCancelledError):
        client.do_get(info.endpoints[0].ticket).read_all()
    assert queries_running(live.http) == 0


def cancel(uri: str, info: flight.FlightInfo, action: str) -> int:
    """Cancel `info`'s query with Flight's CancelFlightInfo or the legacy Flight SQL
    CancelQuery action; the status answered (CancelStatus numbering for both)."""
    if action == "CancelFlightInfo":
        body = cancel_pb.CancelFlightInfoRequest(info=info.serialize()).SerializeToString()
    else:
        body = _pack(sql_pb.ActionCancelQueryRequest(info=info.serialize()))
    with flight.connect(uri) as client:
        [result] = list(client.do_action(flight.Action(action, body)))
    raw = result.body.to_pybytes()
    if action == "CancelFlightInfo":
        return cancel_pb.CancelFlightInfoResult.FromString(raw).status
    from google.protobuf import any_pb2

    legacy = sql_pb.ActionCancelQueryResult()
    assert any_pb2.Any.FromString(raw).Unpack(legacy)
    return int(legacy.result)


def test_prepared_statements_announce_their_schema(live):
    uri, _db = live
    sql = "SELECT service, count(*) AS n, max(n) AS top FROM big GROUP BY service"
    request = _pack(sql_pb.ActionCreatePreparedStatementRequest(query=sql))
    with flight.connect(uri) as client:
        [result] = list(client.do_action(flight.Action("CreatePreparedStatement", request)))
        from google.protobuf import any_pb2

        prepared = sql_pb.ActionCreatePreparedStatementResult()
        assert any_pb2.Any.FromString(result.body.to_pybytes()).Unpack(prepared)
        announced = pa.ipc.read_schema(pa.py_buffer(prepared.dataset_schema))
        assert [(f.name, f.type) for f in announced] == [
            ("service", pa.string()), ("n", pa.int64()), ("top", pa.int64())]
        assert len(pa.ipc.read_schema(pa.py_buffer(prepared.parameter_schema))) == 0
        command = _pack(sql_pb.CommandPreparedStatementQuery(
            prepared_statement_handle=prepared.prepared_statement_handle))
        info = client.get_flight_info(flight.FlightDescriptor.for_command(command))
        assert info.schema.equals(announced)
        rows = client.do_get(info.endpoints[0].ticket).read_all()
        assert rows.schema.equals(announced)
        assert sorted(rows.to_pylist(), key=lambda r: r["service"]) == [
            {"service": f"svc-{e}", "n": BIG_ROWS // 4, "top": (e + 1) * BIG_ROWS // 4 - 1}
            for e in range(4)]
    with connect(uri) as conn, conn.cursor() as cur:     # ADBC: the schema before execute
        params = cur.adbc_prepare(sql)
        assert params is None or len(params) == 0
        assert cur.adbc_execute_schema(sql).equals(announced)
        assert queries_running(live.http) == 0          # nothing ran


def test_caps_end_the_stream_and_the_last_message_says_truncated(live):
    uri, db = live
    for settings, cut in (({"query_max_rows": 150}, "query_max_rows"),
                          ({"query_max_bytes": 64 << 10}, "query_max_bytes")):
        app = create_app(db, config=replace(db.config, **settings), flight_port=free_port())
        with serve_app(app):
            capped = f"grpc://127.0.0.1:{app.state.flight.bound_port}"
            rows, stats = streamed(capped, "SELECT n FROM big ORDER BY n")
            assert stats["truncated"] is True and stats["truncated_by"] == cut, stats
            kept = rows.num_rows
            assert rows.column("n").to_pylist() == list(range(kept))      # a prefix
            assert stats["rows"] == kept
            if cut == "query_max_rows":
                assert kept == 150
            else:
                # within the cap as the server counts Arrow bytes (its batches may carry
                # a validity buffer the wire drops), and not far below it
                assert stats["bytes"] <= 64 << 10 and rows.nbytes <= 64 << 10
                assert kept * 8 > (64 << 10) // 2
            whole, stats = streamed(capped, "SELECT n FROM big WHERE n < 100 ORDER BY n")
            assert whole.column("n").to_pylist() == list(range(100))
            assert stats["truncated"] is False


def test_a_stream_holds_its_slot_and_a_busy_doget_can_be_retried(live):
    uri, db = live
    app = create_app(db, config=replace(db.config, query_concurrency=1),
                     flight_port=free_port())
    with serve_app(app) as http:
        one = f"grpc://127.0.0.1:{app.state.flight.bound_port}"
        endless, small = flight_info(one, ENDLESS_ROWS), flight_info(one, "SELECT 1 AS x")
        client = flight.connect(one)
        reader = client.do_get(endless.endpoints[0].ticket)
        assert reader.read_chunk().data.num_rows > 0
        with flight.connect(one) as other:      # the one slot is the stream's: UNAVAILABLE
            with pytest.raises(flight.FlightUnavailableError, match="query_concurrency"):
                other.do_get(small.endpoints[0].ticket).read_all()
            assert cancel(one, endless, "CancelFlightInfo") in (
                cancel_pb.CANCEL_STATUS_CANCELLED, cancel_pb.CANCEL_STATUS_CANCELLING)
            eventually(lambda: queries_running(http), "the slot to be freed",
                       until=lambda n: n == 0)
            # the refused ticket is still good
            assert other.do_get(small.endpoints[0].ticket).read_all().to_pylist() == [{"x": 1}]
        # (Not read further: pyarrow's client turns the CANCELLED status that ends this
        # stream into a KeyboardInterrupt of the main thread, as if its own signal handler had
        # cancelled the read; the cancel tests above see the status at DoGet.)
        reader.cancel()
        client.close()


def test_adbc_cancel_stops_the_query(live):
    uri, _db = live
    outcome: dict[str, BaseException] = {}
    with connect(uri) as conn, conn.cursor() as cur:
        def run() -> None:
            try:
                cur.execute(ENDLESS_COUNT)
                cur.fetchall()
            except flight_sql.Error as e:
                outcome["error"] = e

        worker = threading.Thread(target=run)
        worker.start()
        eventually(lambda: queries_running(live.http), "the count to start",
                   until=lambda n: n == 1)
        cur.adbc_cancel()           # the driver cancels its calls: the server sees it gone
        worker.join(120)
        assert not worker.is_alive()
        assert "error" in outcome, "the cancelled query answered"
        assert "cancel" in str(outcome["error"]).lower(), outcome
    eventually(lambda: queries_running(live.http), "the slot to be freed",
               until=lambda n: n == 0)
