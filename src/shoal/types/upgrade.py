"""Upgrading Arrow data written under an older schema version to a newer one (docs/ingest.md).

Reads never rewrite extents: a batch written under version k is shaped into version n on the
way out. Columns added later read as their default (else null); widened types are cast up:
`int -> long`, `int|long -> real`, scalar -> `string` (the CAST of the old value, in the same
text form coercion gives: `true`, `5`, `1.5`, RFC 3339 for timestamps) and any typed column
-> `dynamic` (the value's JSON bytes). A column renamed since is found under the name it was
written with, and a dropped one is left behind (`shoal.types.schema.stored_names` says where
each column is; a dropped name taken again by a new column reads as that column's default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from shoal.types.columns import ColumnType, type_of_field
from shoal.types.schema import Schema, widening_allowed
from datetime import UTC


def _timestamps_to_rfc3339(arr: pa.Array) -> pa.Array:
    return pa.array([None if v is None else _ns_to_rfc3339(v)
                     for v in arr.cast(pa.int64()).to_pylist()], type=pa.string())


def _ns_to_rfc3339(ns: int) -> str:
    from datetime import datetime
    sec, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(sec, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z" if frac else f"{base}Z"


def _json_value(ctype: ColumnType, v: Any) -> Any:
    if v is None:
        return None
    if ctype.kind == "timestamp":
        return _ns_to_rfc3339(v)
    if ctype.kind == "bytes":
        return v.decode("utf-8", "replace")
    return v


def cast_column(arr: pa.Array, old: ColumnType, new: ColumnType) -> pa.Array:
    """Cast one column from `old` to the wider `new` type."""
    if old == new:
        return arr
    if not widening_allowed(old, new):
        raise ValueError(f"{old} does not widen to {new}")
    if new.kind == "dynamic":
        if old.kind == "dynamic":
            return arr
        src = arr.cast(pa.int64()) if old.kind == "timestamp" else arr
        out = [None if v is None else json.dumps(_json_value(old, v), separators=(",", ":"),
                                                 ensure_ascii=False).encode()
               for v in src.to_pylist()]
        return pa.array(out, type=pa.binary())
    if new.kind == "string":
        if old.kind == "timestamp":
            return _timestamps_to_rfc3339(arr)
        return arr.cast(pa.string())
    return arr.cast(new.arrow())


def upgrade_batch(batch: pa.RecordBatch, target: Schema,
                  columns: Sequence[str] | None = None, *,
                  sources: Mapping[str, str | None] | None = None) -> pa.RecordBatch:
    """Shape `batch` (any older version of the same table) into `target`'s columns and order,
    or into just `columns` of `target` (in that order) when given. `sources`: the stored name
    of each target column whose name in `batch` is not its own (None: not in `batch`), as
    `stored_names(target, written)` gives it."""
    n = batch.num_rows
    names = batch.schema.names
    wanted = target.columns if columns is None else [target.column(c) for c in columns]
    arrays = []
    for col in wanted:
        stored = col.name if sources is None else sources.get(col.name, col.name)
        if stored is not None and stored in names:
            i = names.index(stored)
            arr = batch.column(i)
            old = type_of_field(batch.schema.field(i))
            arrays.append(cast_column(arr, old, col.type))
        elif col.default is not None:
            arrays.append(pa.array([col.default_scalar().as_py()] * n, type=col.type.arrow())
                          if n else pa.array([], type=col.type.arrow()))
        else:
            arrays.append(pa.nulls(n, type=col.type.arrow()))
    if columns is None:
        return pa.RecordBatch.from_arrays(arrays, schema=target.arrow())
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema([c.arrow_field() for c in wanted]))
