"""`WritePath.ingest_arrow`: Arrow rows through the shared write path (what OTLP uses).

Columns matched by name and cast up, defaults and ingest time filled, unknown columns by
mode (drop / reject / evolve with their own types), idempotent replays, and the records a
frontend refused kept in the ack.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import shoal
from shoal.errors import IncompatibleSchemaChangeError, LineError, PayloadError
from shoal.types import DYNAMIC, INT, LONG, REAL, STRING, Column


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
