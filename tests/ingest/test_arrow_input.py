"""`WritePath.ingest_arrow`: Arrow rows through the shared write path (what OTLP uses).

Columns matched by name and cast up, defaults and ingest time filled, unknown columns by
mode (drop / reject / evolve with their own types), idempotent replays, and the records a
frontend refused kept in the ack.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest

import shoal
from shoal.errors import IncompatibleSchemaChangeError, LineError, PayloadError
from shoal.types import (BYTES, DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP, Column,
                         vector)

AT = 1_795_929_000  # 2026-11-29T05:10:00Z in epoch seconds


@pytest.fixture
def db(tmp_path):
    client = shoal.connect(data_dir=str(tmp_path / "data"))
    yield client
    client.close()


def test_shaping_widening_and_defaults(db):
    db.create_table("t", [Column("a", LONG), Column("s", STRING), Column("d", DYNAMIC),
                          Column("k", STRING, default="dflt"), Column("r", REAL)],
                    mode="drop")
    data = pa.table({"a": pa.array([1, 2], pa.int32()), "r": pa.array([1, None], pa.int64()),
                     "d": pa.array([b'{"x":1}', None], pa.binary()), "extra": [1, 2],
                     "_timestamp": pa.array([5, None], pa.timestamp("ns", tz="UTC"))})
    with pytest.raises(IncompatibleSchemaChangeError, match='column "a"'):
        db.ingest_arrow("t", pa.table({"a": ["x"]}))
    before = time.time_ns()
    ack = db.ingest_arrow("t", data)
    assert (ack.rows, ack.replayed, ack.new_columns) == (2, False, [])
    out, _ = db.read("t")
    rows = out.to_pylist()
    assert [r["a"] for r in rows] == [1, 2]
    assert [r["r"] for r in rows] == [1.0, None]
    assert [r["k"] for r in rows] == ["dflt", "dflt"]
    assert [r["s"] for r in rows] == [None, None]
    assert "extra" not in out.column_names
    ts = out.column("_timestamp").cast(pa.int64()).to_pylist()
    assert ts[0] == 5 and ts[1] > before          # null -> ingest time


def test_reject_and_evolve_modes(db):
    db.create_table("r", [Column("a", INT)], mode="reject")
    with pytest.raises(PayloadError, match='field "b": unknown field'):
        db.ingest_arrow("r", pa.table({"a": pa.array([1], pa.int32()), "b": [1.5]}))
    db.create_table("e", [Column("a", INT)], mode="evolve")
    ack = db.ingest_arrow("e", pa.table({"a": pa.array([1], pa.int32()), "b": [1.5],
                                         "Bad Name": [1]}))
    assert ack.new_columns == ["b"]
    assert db.describe("e")["columns"][-1] == {"name": "b", "type": "real", "nullable": True,
                                               "header": None}
    out, _ = db.read("e")
    assert out.column("b").to_pylist() == [1.5]


def test_idempotent_replay_keeps_rejections(db):
    db.create_table("i", [Column("a", LONG)], mode="drop")
    bad = [LineError(2, "span_id", "span 2: span_id must be 8 bytes, got 3")]
    first = db.ingest_arrow("i", pa.table({"a": [1]}), idempotency_key="k1", rejected=bad)
    again = db.ingest_arrow("i", pa.table({"a": [1]}), idempotency_key="k1")
    assert not first.replayed and again.replayed
    assert again.snapshot_id == first.snapshot_id and again.rows == 1
    assert again.rejected == bad
    out, _ = db.read("i")
    assert out.num_rows == 1


# -- lossless casts: what pandas and other Arrow producers hand over -----------------------

def test_a_pandas_int64_frame_goes_into_an_int_table(db):
    import pandas as pd

    db.create_table("p", [Column("n", INT), Column("r", REAL), Column("s", STRING),
                          Column("at", TIMESTAMP)], mode="reject")
    frame = pd.DataFrame({"n": [1, -2, 2**31 - 1], "r": np.array([0.5, 2, 3], np.float32),
                          "s": ["a", "b", "c"],
                          "at": pd.to_datetime(["2026-11-29 05:10:00"] * 3)})
    data = pa.Table.from_pandas(frame, preserve_index=False)
    assert data.schema.field("n").type == pa.int64()    # what pandas makes of Python ints
    ack = db.ingest_arrow("p", data)
    assert ack.rows == 3
    out, _ = db.read("p")
    assert out.column("n").to_pylist() == [1, -2, 2**31 - 1]
    assert out.column("r").to_pylist() == [0.5, 2.0, 3.0]
    assert out.column("at").cast(pa.int64()).to_pylist() == [AT * 10**9] * 3  # naive = UTC


def test_a_value_that_does_not_fit_names_its_column_row_and_value(db):
    import pandas as pd

    db.create_table("q", [Column("n", INT)])
    frame = pd.DataFrame({"n": [1, 2, 3_000_000_000, -3_000_000_000]})
    with pytest.raises(PayloadError) as caught:
        db.ingest_arrow("q", pa.Table.from_pandas(frame, preserve_index=False))
    err = caught.value
    assert err.errors[0] == LineError(3, "n", 'row 3: column "n": int expects an integer in '
                                      "[-2147483648, 2147483647], got 3000000000 (int64)")
    assert err.total_errors == 2 and str(err).startswith('row 3: column "n"')
    assert db.describe("q")["row_count"] == 0         # nothing written


@pytest.mark.parametrize(("column", "arrow", "values", "stored"), [
    (Column("x", LONG), pa.int32(), [1, None, -5], [1, None, -5]),
    (Column("x", INT), pa.int16(), [1, -300], [1, -300]),
    (Column("x", INT), pa.uint16(), [65535], [65535]),
    (Column("x", LONG), pa.uint64(), [2**63 - 1], [2**63 - 1]),
    (Column("x", REAL), pa.float32(), [0.1, None], [float(np.float32(0.1)), None]),
    (Column("x", REAL), pa.float16(), [1.5], [1.5]),
    (Column("x", REAL), pa.int64(), [2**53, -7], [float(2**53), -7.0]),
    (Column("x", STRING), pa.large_string(), ["é", None], ["é", None]),
    (Column("x", STRING), pa.string_view(), ["v"], ["v"]),
    (Column("x", STRING), pa.int64(), [5], ["5"]),
    (Column("x", BYTES), pa.large_binary(), [b"\x00\x01"], [b"\x00\x01"]),
    (Column("x", TIMESTAMP), pa.timestamp("us"), [AT * 10**6 + 1], [AT * 10**9 + 1000]),
    (Column("x", TIMESTAMP), pa.timestamp("s", tz="Europe/Paris"), [AT], [AT * 10**9]),
    (Column("x", TIMESTAMP), pa.date32(), [20_421], [20_421 * 86_400 * 10**9]),
    (Column("x", TIMESTAMP), pa.int64(), [AT * 10**9], [AT * 10**9]),
    (Column("x", TIMESTAMP), pa.string(), ["2026-11-29 05:10:00", "2026-11-29T06:10:00+01:00"],
     [AT * 10**9] * 2),
    (Column("x", vector(2)), pa.list_(pa.float64()), [[1.5, 2], None], [[1.5, 2.0], None]),
])
def test_lossless_casts(db, column, arrow, values, stored):
    db.create_table("c", [column])
    db.ingest_arrow("c", pa.table({"x": pa.array(values, arrow)}))
    out, _ = db.read("c")
    got = out.column("x")
    if pa.types.is_timestamp(got.type):
        got = got.cast(pa.int64())
    assert got.to_pylist() == stored


def test_dictionary_strings_are_decoded(db):
    db.create_table("d", [Column("x", STRING)])
    db.ingest_arrow("d", pa.table({"x": pa.array(["a", "b", "a"]).dictionary_encode()}))
    assert db.read("d")[0].column("x").to_pylist() == ["a", "b", "a"]


@pytest.mark.parametrize(("column", "arrow", "values", "message"), [
    (Column("x", LONG), pa.uint64(), [1, 2**63],
     'row 2: column "x": long expects an integer in [-9223372036854775808, '
     "9223372036854775807], got 9223372036854775808 (uint64)"),
    (Column("x", REAL), pa.int64(), [2**53 + 1],
     'row 1: column "x": real expects an integer of at most 2**53 in magnitude (exact as a '
     "double), got 9007199254740993 (int64)"),
    (Column("x", TIMESTAMP), pa.timestamp("s"), [0, 10**12],
     'row 2: column "x": timestamp expects an instant between 1677-09-21 and 2262-04-11 '
     "(nanoseconds in int64), got 1000000000000 (timestamp[s])"),
    (Column("x", TIMESTAMP), pa.string(), ["2026-11-29 05:10:00", "yesterday"],
     'row 2: column "x": timestamp expects RFC 3339 text or \'YYYY-MM-DD HH:MM:SS[.f]\' '
     '(UTC), got "yesterday" (string)'),
    (Column("x", vector(2)), pa.list_(pa.float64()), [[1, 2], [1, 2, 3]],
     'row 2: column "x": vector(2) expects 2 numbers, got [1.0, 2.0, 3.0] (list<item: '
     "double>)"),
    (Column("x", vector(2)), pa.list_(pa.float64()), [[1e39, 0]],
     "row 1: column \"x\": vector(2) expects 2 numbers within float32's range, none null, "
     "got [1e+39, 0.0] (list<item: double>)"),
])
def test_values_that_do_not_fit(db, column, arrow, values, message):
    db.create_table("f", [column])
    with pytest.raises(PayloadError) as caught:
        db.ingest_arrow("f", pa.table({"x": pa.array(values, arrow)}))
    assert caught.value.errors[0].message == message
    assert db.describe("f")["row_count"] == 0


def test_integers_into_timestamps_follow_the_table_unit(db):
    db.create_table("u", [Column("x", TIMESTAMP)], properties={"timestamp_unit": "s"})
    db.ingest_arrow("u", pa.table({"x": pa.array([AT], pa.int64()),
                                   "_timestamp": pa.array([AT], pa.int32())}))
    out, _ = db.read("u")
    assert out.column("x").cast(pa.int64()).to_pylist() == [AT * 10**9]
    assert out.column("_timestamp").cast(pa.int64()).to_pylist() == [AT * 10**9]
    with pytest.raises(PayloadError, match=r"row 1: column \"x\": timestamp expects epoch "
                                           r"seconds within int64 nanoseconds"):
        db.ingest_arrow("u", pa.table({"x": pa.array([2**40], pa.int64())}))


def test_a_type_with_no_way_in_is_still_refused(db):
    db.create_table("n", [Column("x", INT)])
    with pytest.raises(IncompatibleSchemaChangeError,
                       match='column "x" is int; cannot change it to string'):
        db.ingest_arrow("n", pa.table({"x": ["1"]}))


def test_evolution_takes_the_nearest_type(db):
    db.create_table("ev", [], mode="evolve")
    ack = db.ingest_arrow("ev", pa.table({
        "small": pa.array([1], pa.int16()), "single": pa.array([0.5], pa.float32()),
        "big": pa.array(["x"], pa.large_string()), "when": pa.array([AT], pa.timestamp("s")),
        "u32": pa.array([2**32 - 1], pa.uint32())}))
    assert ack.new_columns == ["small", "single", "big", "when", "u32"]
    types = {c["name"]: c["type"] for c in db.describe("ev")["columns"]}
    assert [types[n] for n in ack.new_columns] == ["int", "real", "string", "timestamp", "long"]
    out, _ = db.read("ev")
    assert out.column("u32").to_pylist() == [2**32 - 1]


def test_epoch_seconds_as_integers_warn_under_ns(db):
    db.create_table("w", [Column("x", TIMESTAMP)])
    ack = db.ingest_arrow("w", pa.table({"x": pa.array([AT, None, AT + 1], pa.int64())}))
    [warning] = ack.warnings
    assert (warning.column, warning.line) == ("x", 1)
    assert warning.message.startswith("2 integers read as nanoseconds (timestamp_unit='ns') "
                                      f"fall before 1971: row 1: {AT} read as nanoseconds is "
                                      "1970-01-01T00:00:01.795929000Z.")
    assert "('timestamp_unit'='s')" in warning.message
    assert db.ingest_arrow("w", pa.table({"x": pa.array([AT * 10**9])})).warnings == []


def test_props_off_refuses_columns_evolution_cannot_add(db):
    db.create_table("po", [Column("a", INT)], mode="evolve", properties={"props": "off"})
    with pytest.raises(PayloadError, match=r'field "Bad Name": is not a valid column name, '
                                           r"and the table keeps no props \(props='off'\)"):
        db.ingest_arrow("po", pa.table({"a": pa.array([1], pa.int32()), "b": [1.5],
                                        "Bad Name": [1]}))
    assert [c["name"] for c in db.describe("po")["columns"]] == ["_timestamp", "props", "a"]
    ack = db.ingest_arrow("po", pa.table({"a": pa.array([1], pa.int32()), "b": [1.5]}))
    assert ack.new_columns == ["b"]
