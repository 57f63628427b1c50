"""The Arrow shapes every query engine reads a scan in, and the stored columns a scan reads.

Spark's Arrow path accepts timestamps in µs UTC (truncated from ns; `_timestamp_ns` keeps the
nanoseconds as a BIGINT), vectors as `list<float>` and `dynamic` as JSON text: both readers
(`shoal.query.scan_read`, block by block, and `shoal.query.scan_fast`, whole datasets) shape
their batches with `to_spark_batch`, and catalog metadata announces `answer_schema`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from shoal.format.shred import parse_hidden
from shoal.query.scan_plan import TIMESTAMP_NS
from shoal.types.schema import Schema

TS_US = pa.timestamp("us", tz="UTC")
FLOAT_LIST = pa.list_(pa.float32())


def to_spark_batch(batch: pa.RecordBatch, schema: Schema, columns: list[str]) -> pa.RecordBatch:
    """`batch` (already upgraded to `schema`) as the Arrow shapes Spark's reader accepts."""
    arrays = []
    for name in columns:
        if name == TIMESTAMP_NS:
            arrays.append(batch.column("_timestamp").cast(pa.int64()))
            continue
        if parse_hidden(name) is not None:
            arrays.append(batch.column(name))
            continue
        arr = batch.column(name)
        kind = schema.column(name).type.kind
        if kind == "timestamp":
            arr = arr.cast(TS_US, safe=False)
        elif kind == "vector":
            arr = arr.cast(FLOAT_LIST)
        elif kind == "dynamic":
            arr = arr.cast(pa.string())
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=columns)


def answer_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema of `SELECT *` over a table of `schema`, as both engines answer it:
    the reader's shapes (`to_spark_batch`: µs UTC timestamps, `list<float>` vectors,
    `dynamic` as JSON text), every field nullable, and list items named `element`, the name
    Spark's Arrow answers give them (the embedded engine conforms to it). Catalog metadata
    that announces column types (Flight SQL's GetTables, `get_table_schema`) uses this, so
    what a client is told is what a query returns."""
    names = schema.names
    empty = pa.RecordBatch.from_arrays(
        [pa.nulls(0, schema.column(n).type.arrow()) for n in names], names=names)
    shaped = to_spark_batch(empty, schema, names).schema
    return pa.schema([pa.field(f.name, _element_named(f.type)) for f in shaped])


def _element_named(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t):
        return pa.list_(pa.field("element", _element_named(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _element_named(f.type), f.nullable) for f in t])
    return t


def stored_columns(columns: Sequence[str]) -> list[str]:
    """The stored columns a scan of `columns` reads (`_timestamp_ns` comes from
    `_timestamp`)."""
    real = [c for c in columns if c != TIMESTAMP_NS and parse_hidden(c) is None]
    if TIMESTAMP_NS in columns and "_timestamp" not in real:
        real.append("_timestamp")
    return real
