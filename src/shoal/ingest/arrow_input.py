"""Arrow input to the write path: shaping a frontend's Arrow rows to a table schema.

Frontends that decode their wire format to Arrow themselves (OTLP) hand the write path a
batch whose columns are matched to the table's by name:

- a column of the table present in the batch is taken as is when its shoal type (field
  metadata `shoal.type`, else the Arrow type) equals the column's; a type that widens to
  the column's (`int -> long`, scalar -> `string`, ...) is cast; any other type raises
  `IncompatibleSchemaChangeError`, naming the column, and nothing is written;
- a column the batch lacks gets its default, else null; `_timestamp` nulls get the ingest
  time;
- a batch column the table lacks is an *unknown field*: `unknown_columns()` lists them for
  the caller's mode (evolve: `plan_arrow_evolution()` adds them with their own types; drop:
  ignored; reject: `reject_unknown()` raises `PayloadError` naming the first);
- a NOT NULL column without default that ends up null in some row raises `PayloadError`
  (row numbers are 1-based, reported as lines).

`shape_batch()` returns a batch whose schema equals `schema.arrow()` exactly, which is what the
staging buffer and the extent writer require.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import IncompatibleSchemaChangeError, LineError, PayloadError
from shoal.types.columns import type_of_field
from shoal.types.schema import (TIMESTAMP_COLUMN, Column, Schema, is_identifier_safe,
                                widening_allowed)
from shoal.types.upgrade import cast_column


def as_batch(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    if isinstance(data, pa.RecordBatch):
        return data
    if isinstance(data, pa.Table):
        return data.combine_chunks().to_batches()[0] if data.num_rows else \
            pa.RecordBatch.from_pylist([], schema=data.schema)
    raise TypeError(f"expected a pyarrow RecordBatch or Table, got {type(data).__name__}")


def unknown_columns(batch: pa.RecordBatch, schema: Schema) -> list[str]:
    """Names of the batch's columns the schema lacks, in batch order."""
    return [n for n in batch.schema.names if n not in schema]


def reject_unknown(table: str, unknown: list[str]) -> None:
    if unknown:
        raise PayloadError([LineError(1, name, f'line 1: field "{name}": unknown field '
                                      f'(table "{table}" is in reject mode)')
                            for name in unknown])


def plan_arrow_evolution(batch: pa.RecordBatch, schema: Schema, *, cap: int) -> list[Column]:
    """Unknown identifier-safe columns, first `cap` in batch order, typed as in the batch."""
    out: list[Column] = []
    for name in unknown_columns(batch, schema):
        if len(out) >= cap:
            break
        if is_identifier_safe(name):
            out.append(Column(name, type_of_field(batch.schema.field(name))))
    return out


def shape_batch(batch: pa.RecordBatch, schema: Schema, *, table: str,
                ingest_time_ns: int) -> pa.RecordBatch:
    """`batch` as `schema.arrow()`: matched by name, cast up, defaults filled (see module)."""
    n = batch.num_rows
    names = batch.schema.names
    arrays: list[pa.Array] = []
    for col in schema.columns:
        if col.name in names:
            field = batch.schema.field(col.name)
            arr = batch.column(col.name)
            found = type_of_field(field)
            if found != col.type:
                if not widening_allowed(found, col.type):
                    raise IncompatibleSchemaChangeError(
                        table, col.name, str(col.type), str(found),
                        "the rows hold a type the column cannot take")
                arr = cast_column(arr, found, col.type)
            if col.default is not None and arr.null_count:
                arr = pc.fill_null(arr, col.default_scalar())
        elif col.default is not None:
            arr = pa.array([col.default_scalar().as_py()] * n, type=col.type.arrow())
        else:
            arr = pa.nulls(n, type=col.type.arrow())
        if col.name == TIMESTAMP_COLUMN and arr.null_count:
            arr = pc.fill_null(arr, pa.scalar(ingest_time_ns, type=col.type.arrow()))
        if not col.nullable and arr.null_count:
            first = pc.index(pc.is_null(arr), True).as_py() + 1
            raise PayloadError([LineError(first, col.name, f'line {first}: field "{col.name}": '
                                          "NOT NULL column is missing (no default)")],
                               total_errors=arr.null_count)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow())
