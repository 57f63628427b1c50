"""Arrow input to the write path: shaping a frontend's Arrow rows to a table schema.

Frontends that decode their wire format to Arrow themselves (OTLP) hand the write path a
batch whose columns are matched to the table's by name:

- a column of the table present in the batch is taken as is when its shoal type (field
  metadata `shoal.type`, else the Arrow type) equals the column's; a type that widens to
  the column's (`int -> long`, scalar -> `string`, ...) is cast; any other type raises
  `IncompatibleSchemaChangeError`, naming the column, and nothing is written;
- Arrow types shoal has no column type for are read as the nearest one first, losslessly
  (`_natural`): smaller integers as `int`, `uint32` as `long`, `float16`/`float32` as
  `real`, `large_string`/`string_view`/dictionaries as `string`, `large_binary` as `bytes`,
  timestamps of any unit as nanoseconds (a zoneless one, what pandas makes of a naive
  datetime, is read as UTC), dates as midnight UTC;
- values that may or may not fit are checked one by one, so that what pandas hands over
  works: `long` into `int` (pandas' int64 for an int column), integers into `real` (exact
  up to 2**53), `uint64` as `long`, integers into `timestamp` as epoch numbers in the
  table's `timestamp_unit`, strings into `timestamp` as the NDJSON text forms. The first
  value that does not fit raises `PayloadError` naming the row (1-based), the column and
  the value, with the count of such rows, and nothing is written;
- a column the batch lacks gets its default, else null; `_timestamp` nulls get the ingest
  time;
- a batch column the table lacks is an *unknown field*: `unknown_columns()` lists them for
  the caller's mode (evolve: `plan_arrow_evolution()` adds them with their own types, and
  one it cannot add is dropped, or refused by `reject_no_props()` when the table's props
  are off; drop: ignored; reject: `reject_unknown()` raises `PayloadError` naming the first);
- under `timestamp_unit='ns'`, integers sent for a timestamp column that land before 1971
  earn the ack a warning (`arrow_epoch_warnings()`), as on the NDJSON path;
- a NOT NULL column without default that ends up null in some row raises `PayloadError`
  (row numbers are 1-based, reported as lines).

`shape_batch()` returns a batch whose schema equals `schema.arrow()` exactly, which is what the
staging buffer and the extent writer require.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import IncompatibleSchemaChangeError, LineError, PayloadError
from shoal.ingest._values import INT_RANGES, no_props_message
from shoal.types.columns import (BYTES, FIELD_TYPE_KEY, INT, LONG, REAL, STRING, TIMESTAMP,
                                 ColumnType, type_of_field)
from shoal.types.conventions import (DEFAULT_CONVENTIONS, NS_1971, IngestConventions,
                                     IngestWarning)
from shoal.types.schema import (TIMESTAMP_COLUMN, Column, Schema, is_identifier_safe,
                                widening_allowed)
from shoal.types.upgrade import cast_column

MAX_SHOWN = 100  # errors listed; the count covers every row


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


def reject_no_props(names: list[str]) -> None:
    """A table with props off refuses the columns evolution could not add (the NDJSON path
    refuses such fields the same way), before anything changes."""
    if names:
        raise PayloadError([LineError(1, name, f'line 1: field "{name}": '
                                      f"{no_props_message(name)}") for name in names])


def arrow_epoch_warnings(batch: pa.RecordBatch, schema: Schema,
                         conventions: IngestConventions) -> list[IngestWarning]:
    """Under `ns`, integer columns sent for timestamp columns whose values land before 1971
    (epoch seconds read as nanoseconds): the NDJSON path's warning, for Arrow rows."""
    if conventions.unit_ns != 1:
        return []
    out: list[IngestWarning] = []
    for col in schema.columns:
        if col.type.kind != "timestamp" or col.name not in batch.schema.names:
            continue
        arr = batch.column(col.name)
        if not pa.types.is_integer(arr.type) or arr.null_count == len(arr):
            continue
        early = pc.less(arr.cast(pa.int64()), NS_1971).fill_null(False)
        if not pc.any(early).as_py():
            continue
        row = pc.index(early, True).as_py()
        count = pc.sum(early).as_py()
        value = arr[row].as_py()
        unit = "s" if abs(value) < 10**11 else "ms" if abs(value) < 10**14 else "us"
        from shoal.types.upgrade import _ns_to_rfc3339

        out.append(IngestWarning(col.name, (
            f"{count} integer{'s' if count > 1 else ''} read as nanoseconds "
            f"(timestamp_unit='ns') fall{'' if count > 1 else 's'} before 1971: row {row + 1}: "
            f"{value} read as nanoseconds is {_ns_to_rfc3339(value)}. If they are seconds, "
            f"set timestamp_unit='s' (milliseconds: 'ms', microseconds: 'us'), e.g. ALTER "
            f"TABLE ... SET TBLPROPERTIES ('timestamp_unit'='{unit}')"), row + 1))
    return out


def plan_arrow_evolution(batch: pa.RecordBatch, schema: Schema, *, cap: int) -> list[Column]:
    """Unknown identifier-safe columns, first `cap` in batch order, typed as in the batch
    (an Arrow type of no shoal type as its nearest one, `_natural_type`)."""
    out: list[Column] = []
    for name in unknown_columns(batch, schema):
        if len(out) >= cap:
            break
        if is_identifier_safe(name):
            out.append(Column(name, _natural_type(batch.schema.field(name))))
    return out


# Arrow types read as a shoal type's Arrow type without any loss.
_EXACT_INTS = {pa.int8(): INT, pa.int16(): INT, pa.uint8(): INT, pa.uint16(): INT,
               pa.uint32(): LONG}
_UNIT_NAMES = {1: "nanoseconds", 1_000: "microseconds", 1_000_000: "milliseconds",
               1_000_000_000: "seconds"}


def _natural_type(field: pa.Field) -> ColumnType:
    """The shoal type a batch column is read as (see `_natural`)."""
    if (field.metadata or {}).get(FIELD_TYPE_KEY) is not None:
        return type_of_field(field)
    t = field.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if t in _EXACT_INTS:
        return _EXACT_INTS[t]
    if t == pa.uint64():
        return LONG
    if pa.types.is_floating(t):
        return REAL
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BYTES
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return TIMESTAMP
    return type_of_field(pa.field(field.name, t, metadata=field.metadata))


def _natural(arr: pa.Array, field: pa.Field, table: str) -> tuple[pa.Array, ColumnType]:
    """A batch column as the Arrow type of its natural shoal type, losslessly; `uint64`
    values past int64 raise `PayloadError`."""
    found = _natural_type(field)
    if arr.type.equals(found.arrow()) or found.kind in ("vector", "headers", "dynamic"):
        return arr, found
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.type == pa.uint64():
        _check_rows(arr, field.name, pc.greater(arr, pa.scalar(2**63 - 1, pa.uint64())), "long",
                    "an integer in [-9223372036854775808, 9223372036854775807]")
    if pa.types.is_timestamp(arr.type) or pa.types.is_date(arr.type):
        return _to_ns(arr, field.name, table), found
    return arr.cast(found.arrow()), found


def _to_ns(arr: pa.Array, name: str, table: str) -> pa.Array:
    """Timestamps of any unit (zoneless: read as UTC) or dates as ns UTC timestamps."""
    target = pa.timestamp("ns", tz="UTC")
    if pa.types.is_date(arr.type):
        arr = arr.cast(pa.timestamp("s"))
    if pa.types.is_timestamp(arr.type) and arr.type.unit != "ns":
        per = {"s": 10**9, "ms": 10**6, "us": 10**3}[arr.type.unit]
        raw = arr.cast(pa.int64())
        out = pc.or_(pc.greater(raw, (2**63 - 1) // per), pc.less(raw, -((2**63) // per)))
        _check_rows(arr, name, out, "timestamp",
                    "an instant between 1677-09-21 and 2262-04-11 (nanoseconds in int64)")
    return arr.cast(target)


def _fit(arr: pa.Array, field: pa.Field, col: Column, *, table: str,
         conventions: IngestConventions) -> pa.Array:
    """A batch column as `col`'s Arrow type (see the module docstring)."""
    if col.type.kind == "vector" and _is_number_list(arr.type):
        return _vectors(arr, col)
    arr, found = _natural(arr, field, table)
    if found == col.type:
        return arr
    want = col.type.kind
    if want == "int" and found.kind == "long":
        lo, hi = INT_RANGES["int"]
        _check_rows(arr, col.name, pc.or_(pc.less(arr, lo), pc.greater(arr, hi)), "int",
                    f"an integer in [{lo}, {hi}]")
        return arr.cast(pa.int32())
    if want == "real" and found.kind in ("int", "long"):
        limit = 2**53
        _check_rows(arr, col.name, pc.or_(pc.less(arr, -limit), pc.greater(arr, limit)), "real",
                    "an integer of at most 2**53 in magnitude (exact as a double)")
        return arr.cast(pa.float64())
    if want == "timestamp" and found.kind in ("int", "long"):
        per = conventions.unit_ns
        raw = arr.cast(pa.int64())
        if per != 1:
            out = pc.or_(pc.greater(raw, (2**63 - 1) // per), pc.less(raw, -((2**63) // per)))
            _check_rows(arr, col.name, out, "timestamp",
                        f"epoch {_UNIT_NAMES[per]} within int64 nanoseconds "
                        f"(timestamp_unit='{conventions.timestamp_unit}')")
            raw = pc.multiply(raw, per)
        return raw.cast(pa.timestamp("ns", tz="UTC"))
    if want == "timestamp" and found.kind == "string":
        from shoal.ingest._columns import rfc3339_array

        ns, ok = rfc3339_array(arr)
        bad = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool) & ~ok
        _check_rows(arr, col.name, pa.array(bad), "timestamp",
                    "RFC 3339 text or 'YYYY-MM-DD HH:MM:SS[.f]' (UTC)")
        return pa.array(ns, pa.int64(), mask=~ok).cast(pa.timestamp("ns", tz="UTC"))
    if not widening_allowed(found, col.type):
        raise IncompatibleSchemaChangeError(
            table, col.name, str(col.type), f"{found} (Arrow {field.type})",
            "the rows hold a type the column cannot take")
    return cast_column(arr, found, col.type)


def _is_number_list(t: pa.DataType) -> bool:
    return ((pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))
            and (pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type))
            and not t.equals(pa.list_(pa.float32())) and t != pa.float32())


def _vectors(arr: pa.Array, col: Column) -> pa.Array:
    """Lists of numbers (pandas' lists of floats) as `vector(N)`: N components each, every
    one finite as a float32."""
    dim = col.type.dim
    assert dim is not None
    if pa.types.is_fixed_size_list(arr.type) and arr.type.list_size == dim:
        lengths = pc.if_else(arr.is_valid(), dim, None)
    else:
        lengths = pc.list_value_length(arr)
    _check_rows(arr, col.name, pc.not_equal(lengths, dim), str(col.type), f"{dim} numbers")
    flat = pc.list_flatten(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.asarray(flat.cast(pa.float64()).to_numpy(zero_copy_only=False),
                            np.float64).astype(np.float32)
    finite = np.isfinite(values) & np.asarray(flat.is_valid().to_numpy(zero_copy_only=False),
                                              bool)
    valid = np.flatnonzero(np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool))
    bad = np.zeros(len(arr), bool)
    bad[valid] = ~finite.reshape(-1, dim).all(axis=1)
    _check_rows(arr, col.name, pa.array(bad), str(col.type),
                f"{dim} numbers within float32's range, none null")
    full = np.zeros((len(arr), dim), np.float32)
    full[valid] = values.reshape(-1, dim)
    return pa.FixedSizeListArray.from_arrays(pa.array(full.ravel(), pa.float32()), dim,
                                             mask=arr.is_null()).cast(col.type.arrow())


def _check_rows(arr: pa.Array, name: str, bad: pa.Array, kind: str, expects: str) -> None:
    """`PayloadError` naming the first row where `bad` is true (nulls are fine)."""
    mask = np.asarray(bad.fill_null(False).to_numpy(zero_copy_only=False), bool)
    if not mask.any():
        return
    rows = np.flatnonzero(mask)
    errors = [LineError(int(r) + 1, name, f'row {int(r) + 1}: column "{name}": {kind} '
                        f"expects {expects}, got {_shown(arr, int(r))} ({arr.type})")
              for r in rows[:MAX_SHOWN]]
    raise PayloadError(errors, total_errors=len(rows))


def _shown(arr: pa.Array, row: int) -> str:
    try:
        value = arr[row].as_py()
    except (OverflowError, ValueError):  # a timestamp past Python's datetime: its number
        return str(arr[row].cast(pa.int64()).as_py())
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:40] + "..."


def shape_batch(batch: pa.RecordBatch, schema: Schema, *, table: str,
                ingest_time_ns: int,
                conventions: IngestConventions = DEFAULT_CONVENTIONS) -> pa.RecordBatch:
    """`batch` as `schema.arrow()`: matched by name, cast up, defaults filled (see module).
    `conventions`: the table's `timestamp_unit` (integers sent for a timestamp column)."""
    n = batch.num_rows
    names = batch.schema.names
    arrays: list[pa.Array] = []
    for col in schema.columns:
        if col.name in names:
            field = batch.schema.field(col.name)
            arr = _fit(batch.column(col.name), field, col, table=table,
                       conventions=conventions)
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
