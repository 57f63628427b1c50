"""Flight SQL as ADBC (adbc-driver-flightsql, the real Go driver) and DB-API clients expect
it, against a live in-process server on the embedded engine: the schema metadata announces
is the schema queries return, for every column type; `?` parameters of several types bound
as values (never as SQL); a connection opened the DB-API way (autocommit off) without a
warning, committing and rolling back; errors with a status code and a message, no
traceback."""

from __future__ import annotations

import json
import warnings

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

import shoal
from shoal.frontends.flightsql import flight_sql_pb2 as sql_pb
from shoal.server import create_app
from tests.support.server import free_port, serve_app

BASE_NS = 1_772_323_200 * 10**9          # 2026-03-01T00:00:00Z
ALL_TYPES = ("CREATE TABLE every (b bool, i int, l long, r real, s string, ts timestamp, "
             "v vector(3), d dynamic, y bytes, hn binary HEADER('n'))")
HEADERS = "CREATE TABLE headed (k string, ha ARRAY<STRUCT<key STRING, value BYTES>> HEADERS)"


def _fill(db) -> None:
    db.sql(ALL_TYPES)
    db.sql(HEADERS)
    schema = db.catalog.load_table("every").schema.arrow()
    n = 4
    db.append("every", pa.table({
        "_timestamp": pa.array([BASE_NS + i * 10**9 for i in range(n)], pa.int64()).cast(
            pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(n, pa.binary()),
        "b": [i % 2 == 0 for i in range(n)],
        "i": list(range(n)),
        "l": [10 * i for i in range(n)],
        "r": [i + 0.5 for i in range(n)],
        "s": ["plain", "o'k", "back\\slash", "x' OR '1'='1"],
        "ts": pa.array([BASE_NS + i * 3600 * 10**9 for i in range(n)], pa.int64()).cast(
            pa.timestamp("ns", tz="UTC")),
        "v": [[float(i)] * 3 for i in range(n)],
        "d": [json.dumps({"k": i}).encode() for i in range(n)],
        "y": [bytes([i, 255]) for i in range(n)],
        "hn": [bytes([0, 0, 0, i]) for i in range(n)],
    }).cast(schema))
    headed = db.catalog.load_table("headed").schema.arrow()
    db.append("headed", pa.table({
        "_timestamp": pa.array([BASE_NS], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(1, pa.binary()),
        "k": ["a"],
        "ha": [[{"key": "n", "value": b"\x01"}]],
    }).cast(headed))


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("flight-conventions")),
                       query_engine="local")
    try:
        _fill(db)
        app = create_app(db, config=db.config, flight_port=free_port())
        with serve_app(app):
            yield f"grpc://127.0.0.1:{app.state.flight.bound_port}"
    finally:
        db.close()


def test_table_schema_is_the_schema_queries_return_for_every_type(uri):
    with flight_sql.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        for table in ("every", "headed"):
            announced = conn.adbc_get_table_schema(table)
            cur.execute(f"SELECT * FROM {table}")
            returned = cur.fetch_arrow_table().schema
            assert announced.equals(returned), (table, announced, returned)
            # list items named as the answer names them, too (equals() ignores the name)
            assert [str(f.type) for f in announced] == [str(f.type) for f in returned]
        announced = conn.adbc_get_table_schema("every")
        assert announced.field("ts").type == pa.timestamp("us", tz="UTC")
        assert announced.field("_timestamp").type == pa.timestamp("us", tz="UTC")
        assert announced.field("d").type == pa.string()         # dynamic: JSON text
        assert announced.field("props").type == pa.string()
        assert announced.field("y").type == pa.binary()
        assert announced.field("v").type == pa.list_(pa.field("element", pa.float32()))
        assert announced.field("d").metadata[b"ARROW:FLIGHT:SQL:TYPE_NAME"] == b"dynamic"
        # GetObjects (what DBeaver-like tools list) reports the same shoal type names
        objects = conn.adbc_get_objects(table_name_filter="every").read_all().to_pylist()
        columns = objects[0]["catalog_db_schemas"][0]["db_schema_tables"][0]["table_columns"]
        assert {c["column_name"]: c["xdbc_type_name"] for c in columns}["v"] == "vector(3)"


def test_question_mark_parameters_of_several_types(uri):
    with flight_sql.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT i, s FROM every WHERE l >= ? AND r < ? AND b = ? AND ts >= ? "
                    "AND s <> ? ORDER BY i",
                    parameters=(10, 3.0, False, pa.scalar(BASE_NS + 3600 * 10**9,
                                                         pa.timestamp("ns", tz="UTC")).as_py(),
                                "nothing"))
        assert cur.fetchall() == [(1, "o'k")]
        cur.execute("SELECT i FROM every WHERE s = ? OR s = ? ORDER BY i",
                    parameters=("o'k", "back\\slash"))
        assert cur.fetchall() == [(1,), (2,)]
        # a value is a value: quotes in it are no SQL
        cur.execute("SELECT count(*) AS n FROM every WHERE s = ?", parameters=("x' OR '1'='1",))
        assert cur.fetchall() == [(1,)]
        cur.execute("SELECT count(*) AS n FROM every WHERE s = ?", parameters=("' OR 1=1 --",))
        assert cur.fetchall() == [(0,)]
        cur.execute("SELECT ? AS s, ? AS n, ? AS x",
                    parameters=("it's a \\ test \"", 7, 1.25))
        assert cur.fetchall() == [("it's a \\ test \"", 7, 1.25)]
        cur.execute("SELECT count(*) AS n FROM every WHERE s = ?", parameters=(None,))
        assert cur.fetchall() == [(0,)]
        # a prepared statement runs again with other values
        cur.adbc_prepare("SELECT i FROM every WHERE l = ?")
        for l_value, expected in ((0, [(0,)]), (30, [(3,)]), (5, [])):
            cur.execute("SELECT i FROM every WHERE l = ?", parameters=(l_value,))
            assert cur.fetchall() == expected


def test_parameter_schema_and_a_wrong_number_of_values(uri):
    with flight_sql.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        params = cur.adbc_prepare("SELECT i FROM every WHERE l = ? AND ts > ? LIMIT ?")
        assert [(f.name, f.type) for f in params] == [
            ("0", pa.int64()), ("1", pa.timestamp("us", tz="UTC")), ("2", pa.int64())]
        with pytest.raises(flight_sql.Error) as e:
            cur.execute("SELECT i FROM every WHERE l = ?", parameters=(1, 2))
        assert "1 parameter(s) (?), 2 value(s) were bound" in str(e.value)
        assert "Traceback" not in str(e.value)


def test_a_dbapi_connection_has_transactions_and_no_autocommit_warning(uri):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conn = flight_sql.connect(uri)          # DB-API default: autocommit off
    try:
        assert [str(w.message) for w in caught] == []
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) AS n FROM every")
            assert cur.fetchall() == [(4,)]
            conn.commit()
            cur.execute("SELECT count(*) AS n FROM every WHERE i = ?", parameters=(2,))
            assert cur.fetchall() == [(1,)]
            conn.rollback()
        info = conn.adbc_get_info()
        assert info["vendor_name"] == "shoal"
    finally:
        conn.close()


def _pack(message) -> bytes:
    wrapped = any_pb2.Any()
    wrapped.Pack(message)
    return wrapped.SerializeToString()


def test_errors_carry_a_code_and_a_message_without_a_traceback(uri):
    with flight_sql.connect(uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(flight_sql.Error) as e:
            cur.execute("SELECT no_such_column FROM every")
        assert "no_such_column" in str(e.value) and "Traceback" not in str(e.value)
    descriptor = flight.FlightDescriptor.for_command(
        _pack(sql_pb.CommandStatementQuery(query="SELECT reflect('java.lang.System', 'exit')")))
    with flight.connect(uri) as client:
        with pytest.raises(flight.FlightServerError) as raised:
            client.get_flight_info(descriptor)
        error = raised.value
        assert "reflect" in str(error)
        assert "Traceback" not in str(error) and ".py" not in str(error)
        document = json.loads(error.extra_info)
        assert document["error"]["code"] and "reflect" in document["error"]["message"]
        unprepared = flight.FlightDescriptor.for_command(
            _pack(sql_pb.CommandStatementQuery(query="SELECT i FROM every WHERE l = ?")))
        with pytest.raises(flight.FlightServerError) as raised:
            client.get_flight_info(unprepared)
        assert "runs as a prepared statement" in str(raised.value)
        with pytest.raises(flight.FlightServerError) as raised:
            list(client.do_action(flight.Action("EndTransaction", _pack(
                sql_pb.ActionEndTransactionRequest(transaction_id=b"nope", action=1)))))
        assert "unknown transaction" in str(raised.value)
        forged = flight.FlightDescriptor.for_command(_pack(sql_pb.CommandStatementQuery(
            query="SELECT count(*) AS n FROM every", transaction_id=b"\x00" * 32)))
        with pytest.raises(flight.FlightServerError, match="unknown transaction"):
            client.get_flight_info(forged)
        assert "Traceback" not in str(raised.value)
