"""Byte functions (docs/kafka.md): the vectorised Arrow kernels against `struct.unpack`, the
processing log, and the registered Spark SQL functions in projections and predicates."""

from __future__ import annotations

import json
import logging
import math
import random
import struct

import pyarrow as pa
import pytest

from shoal.query.byte_functions import (ProcessingLog, bigint_from_bytes, double_from_bytes,
                                        int_from_bytes)
from shoal.query.spark.udfs import register_functions

FUNCTIONS = [  # function, width, struct code, Arrow type
    (int_from_bytes, 4, "i", pa.int32()),
    (bigint_from_bytes, 8, "q", pa.int64()),
    (double_from_bytes, 8, "d", pa.float64()),
]
ORDERS = [("BIG_ENDIAN", ">"), ("LITTLE_ENDIAN", "<"), ("little_endian", "<"),
          ("Big_Endian", ">")]


def entries(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def same(a: float | None, b: float | None) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float)
                      and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("fn, width, code, arrow_type", FUNCTIONS)
@pytest.mark.parametrize("order, prefix", ORDERS)
def test_decodes_like_struct_unpack(fn, width, code, arrow_type, order, prefix, tmp_path):
    rng = random.Random(width)
    raw = [rng.randbytes(width) for _ in range(200)] + [b"\x00" * width, b"\xff" * width,
                                                        b"\x7f" + b"\xff" * (width - 1)]
    log = ProcessingLog(str(tmp_path / "processing.jsonl"))
    result = fn(pa.array(raw, pa.binary()), order, log=log)
    assert result.type == arrow_type
    expected = [struct.unpack(prefix + code, r)[0] for r in raw]
    assert all(same(a, b) for a, b in zip(result.to_pylist(), expected, strict=True))
    assert not (tmp_path / "processing.jsonl").exists()


def test_default_order_is_big_endian_and_order_may_vary_per_row():
    raw = [struct.pack(">i", 258), struct.pack("<i", 258), struct.pack(">i", -7)]
    assert int_from_bytes(pa.array(raw)).to_pylist() == [258, struct.unpack(">i", raw[1])[0],
                                                         -7]
    orders = pa.array(["BIG_ENDIAN", "little_endian", "BIG_ENDIAN"])
    assert int_from_bytes(pa.array(raw), orders).to_pylist() == [258, 258, -7]
    doubles = [struct.pack("<d", 1.5), struct.pack(">d", -2.25)]
    assert double_from_bytes(pa.array(doubles), pa.array(["LITTLE_ENDIAN", "BIG_ENDIAN"])
                             ).to_pylist() == [1.5, -2.25]


def test_sliced_and_large_binary_input():
    raw = pa.array([b"\x00\x00\x00\x01", b"\x00\x00\x00\x02", b"\x00\x00\x00\x03"],
                   pa.large_binary())
    assert int_from_bytes(raw.slice(1)).to_pylist() == [2, 3]


@pytest.mark.parametrize("fn, width, code, arrow_type", FUNCTIONS)
def test_wrong_length_gives_null_and_one_log_entry_per_batch(fn, width, code, arrow_type,
                                                             tmp_path, caplog):
    path = tmp_path / "logs" / "processing.jsonl"
    good = struct.pack(">" + code, 5)
    values = pa.array([good, b"\x01\x02\x03", None, b"", good + b"\x00", good])
    with caplog.at_level(logging.WARNING, logger="shoal.processing"):
        result = fn(values, log=ProcessingLog(str(path)))
    assert result.type == arrow_type
    assert result.to_pylist() == [5, None, None, None, None, 5]
    [entry] = entries(path)
    assert {k: v for k, v in entry.items() if k != "ts"} == {
        "function": fn.__name__, "error": "wrong_length", "count": 3, "expected_len": width,
        "example_len": 3}
    assert [r.name for r in caplog.records] == ["shoal.processing"]
    assert "wrong_length" in caplog.records[0].getMessage()


def test_bad_order_gives_null_and_a_log_entry(tmp_path):
    path = tmp_path / "processing.jsonl"
    log = ProcessingLog(str(path))
    values = pa.array([b"\x00\x00\x00\x01", None, b"\x00\x00\x00\x02"])
    assert int_from_bytes(values, "MIDDLE_ENDIAN", log=log).to_pylist() == [None, None, None]
    per_row = pa.array(["BIG_ENDIAN", "BIG_ENDIAN", "sideways"])
    assert int_from_bytes(values, per_row, log=log).to_pylist() == [1, None, None]
    first, second = entries(path)
    assert {k: v for k, v in first.items() if k != "ts"} == {
        "function": "int_from_bytes", "error": "bad_order", "count": 2,
        "example_order": "MIDDLE_ENDIAN", "expected": ["BIG_ENDIAN", "LITTLE_ENDIAN"]}
    assert (second["count"], second["example_order"]) == (1, "sideways")


def test_nulls_in_give_nulls_out_without_log_entries(tmp_path):
    path = tmp_path / "processing.jsonl"
    log = ProcessingLog(str(path))
    for fn, _, _, arrow_type in FUNCTIONS:
        assert fn(pa.array([None, None], pa.binary()), log=log).to_pylist() == [None, None]
        assert fn(pa.nulls(2), log=log).type == arrow_type
        assert fn(pa.array([], pa.binary()), log=log).to_pylist() == []
    null_order = pa.array([None, "BIG_ENDIAN"], pa.string())
    assert int_from_bytes(pa.array([b"\x00\x00\x00\x09"] * 2), null_order,
                          log=log).to_pylist() == [None, 9]
    assert not path.exists()


# -- Spark ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_spark_functions_in_projection_and_predicate(spark, tmp_path):
    """`spark` is the shared session of tests/query/conftest.py; registering again points
    the functions' processing log at this test's file."""
    path = tmp_path / "processing.jsonl"
    register_functions(spark, str(path))
    row = spark.sql("""
        SELECT int_from_bytes(X'00000102', 'BIG_ENDIAN') AS be,
               int_from_bytes(X'02010000', 'little_endian') AS le,
               int_from_bytes(X'00000102') AS one_arg,
               int_from_bytes(X'000102', 'BIG_ENDIAN') AS short,
               int_from_bytes(X'00000102', 'MIDDLE_ENDIAN') AS bad_order,
               bigint_from_bytes(X'FFFFFFFFFFFFFFFE') AS big,
               double_from_bytes(X'000000000000F83F', 'LITTLE_ENDIAN') AS dbl,
               double_from_bytes(CAST(NULL AS BINARY)) AS null_in
    """).collect()[0].asDict()
    assert row == {"be": 258, "le": 258, "one_arg": 258, "short": None, "bad_order": None,
                   "big": -2, "dbl": 1.5, "null_in": None}
    kept = spark.sql("""
        SELECT id FROM VALUES (1, X'00000005'), (2, X'0005'), (3, NULL), (4, X'FFFFFFFF')
            AS t(id, b)
        WHERE int_from_bytes(b) > 0
    """).collect()
    assert [r.id for r in kept] == [1]
    errors = sorted((e["function"], e["error"]) for e in entries(path))
    assert ("int_from_bytes", "bad_order") in errors
    assert ("int_from_bytes", "wrong_length") in errors
    assert all(e["function"] == "int_from_bytes" for e in entries(path))
