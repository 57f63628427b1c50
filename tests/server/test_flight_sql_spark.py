"""Arrow Flight SQL on the Spark engine: a live in-process server whose queries run on
the test run's Spark session. The schema of a statement is announced at GetFlightInfo (Spark's
analysis, no job) and the rows keep it; the row cap ends the stream with `truncated` in the
last message; a prepared statement announces its schema; CancelFlightInfo cancels a cross join
running on Spark (its job tag), whose DoGet ends CANCELLED and whose slot is freed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

import shoal
from shoal.client import Shoal
from shoal.server import create_app
from shoal.frontends.flightsql import flight_cancel_pb2 as cancel_pb
from shoal.frontends.flightsql import flight_sql_pb2 as sql_pb
from tests.server.test_flight_sql import cancel, flight_info, queries_running, streamed
from tests.support.fixtures import SPARK_MASTER
from tests.support.server import free_port, serve_app
from tests.support.waiting import eventually

NUMS = 3000
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory, spark) -> Iterator[Shoal]:
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("flight-spark")),
                           spark_master=SPARK_MASTER, query_engine="spark")
    client.sql("CREATE TABLE nums (n long, label string)")
    client.ingest_arrow("nums", pa.table({"n": pa.array(range(NUMS), pa.int64()),
                                          "label": [f"n{i}" for i in range(NUMS)]}))
    client.query_engine.warm_up()
    yield client
    client.close()


@pytest.fixture(scope="module")
def live(db) -> Iterator[tuple[str, str]]:
    app = create_app(db, config=replace(db.config, query_max_rows=1000),
                     flight_port=free_port())
    with serve_app(app) as url:
        yield f"grpc://127.0.0.1:{app.state.flight.bound_port}", url


def test_spark_answers_keep_the_announced_schema_and_the_row_cap(live):
    uri, _http = live
    sql = "SELECT n, label, n * 2 AS twice FROM nums ORDER BY n"
    info = flight_info(uri, sql)
    assert json.loads(info.app_metadata)["engine"] == "spark"
    assert [(f.name, f.type) for f in info.schema] == [
        ("n", pa.int64()), ("label", pa.string()), ("twice", pa.int64())]
    rows, stats = streamed(uri, sql)
    assert rows.schema.equals(info.schema)
    assert rows.column("n").to_pylist() == list(range(1000))
    assert rows.column("label").to_pylist()[:3] == ["n0", "n1", "n2"]
    assert stats["truncated"] is True and stats["truncated_by"] == "query_max_rows"
    assert stats["engine"] == "spark" and stats["rows"] == 1000
    whole, stats = streamed(uri, "SELECT count(*) AS c FROM nums")
    assert whole.to_pylist() == [{"c": NUMS}] and stats["truncated"] is False


def test_a_prepared_statement_on_spark_announces_its_schema(live):
    uri, _http = live
    request = _pack(sql_pb.ActionCreatePreparedStatementRequest(
        query="SELECT label, max(n) AS top FROM nums GROUP BY label"))
    with flight.connect(uri) as client:
        [result] = list(client.do_action(flight.Action("CreatePreparedStatement", request)))
    prepared = sql_pb.ActionCreatePreparedStatementResult()
    assert any_pb2.Any.FromString(result.body.to_pybytes()).Unpack(prepared)
    schema = pa.ipc.read_schema(pa.py_buffer(prepared.dataset_schema))
    assert [(f.name, f.type) for f in schema] == [("label", pa.string()), ("top", pa.int64())]


def test_cancel_stops_a_cross_join_running_on_spark(live):
    uri, http = live
    info = flight_info(uri, "SELECT count(*) AS c FROM nums a, nums b, nums c")
    outcome: dict[str, BaseException] = {}

    def fetch() -> None:
        with flight.connect(uri) as client:
            try:
                client.do_get(info.endpoints[0].ticket).read_all()
            except flight.FlightError as e:
                outcome["error"] = e

    worker = threading.Thread(target=fetch)
    worker.start()
    eventually(lambda: queries_running(http), "the cross join to start",
               until=lambda n: n == 1)
    assert cancel(uri, info, "CancelFlightInfo") in (cancel_pb.CANCEL_STATUS_CANCELLED,
                                                     cancel_pb.CANCEL_STATUS_CANCELLING)
    worker.join(120)
    assert not worker.is_alive(), "the cancelled query kept running"
    assert isinstance(outcome.get("error"), flight.FlightCancelledError), outcome
    eventually(lambda: queries_running(http), "the slot to be freed", until=lambda n: n == 0)
    rows, _ = streamed(uri, "SELECT count(*) AS c FROM nums WHERE n < 10")   # Spark answers
    assert rows.to_pylist() == [{"c": 10}]


def _pack(message) -> bytes:
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


def test_on_spark_the_announced_table_schema_is_the_answers_and_parameters_bind(db, live):
    """The same conventions as on the embedded engine (test_flight_sql_conventions), with
    Spark answering: every column type, and `?` values Spark alone takes (bytes)."""
    import adbc_driver_flightsql.dbapi as flight_sql

    from tests.server.test_flight_sql_conventions import _fill

    _fill(db)
    uri, _http = live
    with flight_sql.connect(uri) as conn, conn.cursor() as cur:
        for table in ("every", "headed"):
            announced = conn.adbc_get_table_schema(table)
            cur.execute(f"SELECT * FROM {table}")
            returned = cur.fetch_arrow_table().schema
            assert announced.equals(returned), (table, announced, returned)
            assert [str(f.type) for f in announced] == [str(f.type) for f in returned]
        cur.execute("SELECT i FROM every WHERE y = ? OR s = ? ORDER BY i",
                    parameters=(bytes([3, 255]), "o'k"))
        assert cur.fetchall() == [(1,), (3,)]
