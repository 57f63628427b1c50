"""Byte-decoding SQL functions for Kafka header and payload columns (docs/kafka.md).

    int_from_bytes(b [, order])     exactly 4 bytes -> int32
    bigint_from_bytes(b [, order])  exactly 8 bytes -> int64
    double_from_bytes(b [, order])  exactly 8 bytes -> float64

`order` is 'BIG_ENDIAN' (the default) or 'LITTLE_ENDIAN', case-insensitive, a constant or a
per-row column. A value of another length, or an unknown order, gives null, so the call
yields null in a projection and drops the row in a predicate, and it is reported to the
`ProcessingLog`: one JSON line per batch and kind of failure (not per row), also logged on
the `shoal.processing` logger. A null value or a null order gives null and is not a failure.

The functions are pure and vectorised over Arrow (lengths by `pyarrow.compute`, payloads
reinterpreted by numpy), so the same code serves the Spark UDFs that
`shoal.query.spark.udfs.register_functions` installs and the embedded engine's functions.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, UTC
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_ORDER = "BIG_ENDIAN"
_ORDER_CODES = {"BIG_ENDIAN": 0, "LITTLE_ENDIAN": 1}

logger = logging.getLogger("shoal.processing")


@dataclass(frozen=True)
class ProcessingLog:
    """Where per-row failures of query functions are reported.

    Entries are appended as JSON lines to `path` (when given) with one `write` each, so the
    Spark worker processes of one machine can share a file. Picklable: UDFs carry it along.
    """

    path: str | None = None

    def record(self, function: str, error: str, count: int, **facts: Any) -> None:
        entry = {"ts": datetime.now(UTC).isoformat(), "function": function,
                 "error": error, "count": count, **facts}
        line = json.dumps(entry)
        logger.warning("%s", line)
        if self.path is not None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


@dataclass(frozen=True)
class Decoding:
    function: str
    width: int
    numpy_kind: str        # "i4", "i8", "f8"
    arrow_type: pa.DataType
    spark_type: str


INT = Decoding("int_from_bytes", 4, "i4", pa.int32(), "int")
BIGINT = Decoding("bigint_from_bytes", 8, "i8", pa.int64(), "bigint")
DOUBLE = Decoding("double_from_bytes", 8, "f8", pa.float64(), "double")


def _order_codes(order: str | pa.Array, n: int) -> np.ndarray:
    """Per row: 0 big-endian, 1 little-endian, -1 unknown order, -2 null order."""
    if isinstance(order, str):
        code = _ORDER_CODES.get(order.upper(), -1)
        return np.full(n, code, dtype=np.int8)
    upper = pc.utf8_upper(order.cast(pa.string()))
    little = pc.equal(upper, "LITTLE_ENDIAN").fill_null(False).to_numpy(zero_copy_only=False)
    big = pc.equal(upper, "BIG_ENDIAN").fill_null(False).to_numpy(zero_copy_only=False)
    codes = np.where(little, 1, np.where(big, 0, -1)).astype(np.int8)
    codes[order.is_null().to_numpy(zero_copy_only=False)] = -2
    return codes


def decode(spec: Decoding, values: pa.Array, order: str | pa.Array,
            log: ProcessingLog | None) -> pa.Array:
    values = values.cast(pa.binary())      # also takes large_binary and all-null input
    n = len(values)
    codes = _order_codes(order, n)
    present = values.is_valid().to_numpy(zero_copy_only=False)
    lengths = pc.binary_length(values)
    fits_arrow = pc.equal(lengths, spec.width)
    fits = fits_arrow.fill_null(False).to_numpy(zero_copy_only=False)
    wrong_length = present & ~fits & (codes != -2)
    bad_order = present & (codes == -1)
    log = log or ProcessingLog()
    if wrong_length.any():
        log.record(spec.function, "wrong_length", int(wrong_length.sum()),
                   expected_len=spec.width,
                   example_len=lengths[int(wrong_length.argmax())].as_py())
    if bad_order.any():
        example = order if isinstance(order, str) else order[int(bad_order.argmax())].as_py()
        log.record(spec.function, "bad_order", int(bad_order.sum()), example_order=example,
                   expected=list(_ORDER_CODES))
    valid = fits & (codes >= 0)
    # Rows of another length become null, so the rest casts to fixed-size payloads whose
    # bytes lie back to back: one buffer, reinterpreted in place.
    fixed = pc.if_else(fits_arrow, values, pa.scalar(None, pa.binary())).cast(
        pa.binary(spec.width))
    buffer = fixed.buffers()[1]
    offset = fixed.offset * spec.width

    def decoded(byte_order: str) -> np.ndarray:
        raw = np.frombuffer(buffer, dtype=np.dtype(byte_order + spec.numpy_kind), count=n,
                            offset=offset)
        return raw.astype(np.dtype(spec.numpy_kind))

    out = decoded(">")
    if (codes == 1).any():
        out = np.where(codes == 1, decoded("<"), out)
    return pa.array(out, type=spec.arrow_type, mask=~valid)


def int_from_bytes(values: pa.Array, order: str | pa.Array = DEFAULT_ORDER, *,
                   log: ProcessingLog | None = None) -> pa.Array:
    """4-byte values as int32; null for other lengths or an unknown order."""
    return decode(INT, values, order, log)


def bigint_from_bytes(values: pa.Array, order: str | pa.Array = DEFAULT_ORDER, *,
                      log: ProcessingLog | None = None) -> pa.Array:
    """8-byte values as int64; null for other lengths or an unknown order."""
    return decode(BIGINT, values, order, log)


def double_from_bytes(values: pa.Array, order: str | pa.Array = DEFAULT_ORDER, *,
                      log: ProcessingLog | None = None) -> pa.Array:
    """8-byte IEEE 754 values as float64; null for other lengths or an unknown order."""
    return decode(DOUBLE, values, order, log)


DECODINGS = (INT, BIGINT, DOUBLE)
