"""A table's sort key: the order rows are written in inside an extent (docs/storage.md).

The table property `sort_by` names columns, comma separated (`'service, _timestamp'`).
Every extent a commit or a compaction writes holds its rows sorted by those columns,
ascending, nulls last, rows equal on the key in the order they came (a stable sort). Blocks
are cut from the sorted rows, so each block's min/max covers a narrow slice of the key and a
filter on its leading columns skips most blocks of an extent.

`parse_sort_key` validates a value against a schema (the DDL and the client call it before
the property is stored): every name must be a column of a sortable kind, once. Names fold to
lower case, as unquoted identifiers do in DDL. `sort_key_of` is the lenient reading used at
write time: a stored key whose column is missing or no longer sortable (a widening to
`dynamic`) is shortened to its usable columns, with a log line, rather than failing a
commit. `sort_order` gives the order that sorts Arrow rows by a key (None when they already
are in it), `sort_rows` applies it.

The table property `block_rows` goes with it: the most rows a block of the table's new
extents holds (default 65,536). Smaller blocks let a sorted table's min/max narrow a lookup
to fewer rows, at some cost per block on whole-table scans. `parse_block_rows` checks a
value, `block_rows_of` reads it at write time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidPropertyError, InvalidSchemaError
from shoal.types.schema import Schema

SORT_BY = "sort_by"
SORTABLE_KINDS = ("bool", "int", "long", "real", "string", "timestamp")

log = logging.getLogger(__name__)


def _names(value: Any) -> list[str]:
    if not isinstance(value, str):
        raise InvalidSchemaError(
            f"table property {SORT_BY}={value!r}: expected a string of column names like "
            "'service, _timestamp'", column=SORT_BY)
    names = [n.strip().lower() for n in value.split(",")]
    if not value.strip():
        raise InvalidSchemaError(
            f"table property {SORT_BY} is empty: name one column or more, like "
            "'service, _timestamp' (or unset the property)", column=SORT_BY)
    if "" in names:
        raise InvalidSchemaError(
            f"table property {SORT_BY}={value!r}: an empty name between commas", column=SORT_BY)
    return names


def parse_sort_key(value: Any, schema: Schema, *, table: str | None = None) -> tuple[str, ...]:
    """The columns of sort key `value` for `schema`, or `InvalidSchemaError` naming the first
    unknown, unsortable or repeated one."""
    where = f'table "{table}": ' if table else ""
    seen: list[str] = []
    for name in _names(value):
        col = schema.get(name)
        if col is None:
            known = ", ".join(schema.names)
            raise InvalidSchemaError(
                f'{where}sort key column "{name}" is not a column of the table '
                f"(columns: {known})", column=name)
        if col.type.kind not in SORTABLE_KINDS:
            raise InvalidSchemaError(
                f'{where}sort key column "{name}" is of type {col.type}, which cannot be '
                f"sorted (sortable: {', '.join(SORTABLE_KINDS)})", column=name)
        if name in seen:
            raise InvalidSchemaError(f'{where}sort key names column "{name}" twice',
                                     column=name)
        seen.append(name)
    return tuple(seen)


def format_sort_key(columns: Sequence[str]) -> str:
    """The stored spelling of a key: names joined by ", "."""
    return ", ".join(columns)


def sort_key_of(properties: Mapping[str, Any], schema: Schema) -> tuple[str, ...]:
    """The usable columns of a table's stored key (empty when it has none)."""
    value = properties.get(SORT_BY)
    if value is None:
        return ()
    try:
        names = _names(value)
    except InvalidSchemaError:
        log.warning("ignoring table property %s=%r: not a list of column names", SORT_BY, value)
        return ()
    usable: list[str] = []
    for name in names:
        col = schema.get(name)
        if col is None or col.type.kind not in SORTABLE_KINDS or name in usable:
            log.warning("sort key %r: column %r is missing or not sortable in schema version "
                        "%d; sorting by the columns before it", value, name, schema.version)
            break
        usable.append(name)
    return tuple(usable)


def sort_rows(rows: pa.Table, key: Sequence[str]) -> pa.Table:
    """`rows` sorted by `key` (ascending, nulls last, stable); unchanged when `key` is
    empty or the rows are already in order."""
    order = sort_order(rows, key)
    return rows if order is None else rows.take(order)


def sort_order(rows: pa.Table, key: Sequence[str]) -> pa.Array | None:
    """The row order that sorts `rows` by `key` (`sort_rows`), or None when they already
    are in it (or `key` is empty).

    Two shortcuts keep the sort cheap: a string column is sorted as the rank of its value
    among the column's distinct values (a hash and a sort of the distinct values, then
    integers), and a last key column that is already in order (arrival order is mostly
    time order, so `_timestamp` often is) is dropped, since the stable sort by the columns
    before it keeps it in order among their ties."""
    if not key or rows.num_rows < 2:
        return None
    arrays = [_rank(rows[c]) for c in key]
    if _ascending(arrays[-1]):
        arrays.pop()
    if not arrays:
        return None
    # numpy's lexsort is stable; its last key is the primary one, and each column's null
    # flag ranks above its values (nulls last)
    planes: list[np.ndarray] = []
    for column in reversed(arrays):
        values, nulls = _plane(column)
        planes.append(values)
        if nulls is not None:
            planes.append(nulls)
    return pa.array(np.lexsort(planes))


def _plane(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """A key column as numpy values (nulls filled) and its null flags (None: no nulls)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    nulls = None
    if column.null_count:
        nulls = column.is_null().to_numpy()
        column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
    return column.to_numpy(), nulls


def _rank(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A string column as each value's rank among its distinct values (nulls stay null);
    other columns as they are."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    encoded = pc.dictionary_encode(column).unify_dictionaries()
    if encoded.num_chunks == 0:
        return column
    rank_of_value = pc.sort_indices(pc.sort_indices(encoded.chunk(0).dictionary))
    return pa.chunked_array([pc.take(rank_of_value, c.indices) for c in encoded.chunks],
                            type=rank_of_value.type)


def _ascending(column: pa.ChunkedArray) -> bool:
    """No nulls and every value >= the one before (NaN is never in order)."""
    if column.null_count or len(column) < 2:
        return column.null_count == 0
    later = column.slice(1)
    earlier = column.slice(0, len(column) - 1)
    return bool(pc.all(pc.greater_equal(later, earlier)).as_py())


BLOCK_ROWS = "block_rows"
DEFAULT_BLOCK_ROWS = 65536
MIN_BLOCK_ROWS = 1024
MAX_BLOCK_ROWS = 1 << 20


def parse_block_rows(value: Any) -> int:
    """A `block_rows` property value as an int, or `InvalidPropertyError`."""
    try:
        rows = int(str(value).strip().replace("_", ""))
    except ValueError:
        raise InvalidPropertyError(
            f"table property block_rows={value!r} is not a whole number of rows") from None
    if not MIN_BLOCK_ROWS <= rows <= MAX_BLOCK_ROWS:
        raise InvalidPropertyError(f"table property block_rows={rows} must lie between "
                                   f"{MIN_BLOCK_ROWS:,} and {MAX_BLOCK_ROWS:,}")
    return rows


def block_rows_of(properties: Mapping[str, Any], default: int = DEFAULT_BLOCK_ROWS) -> int:
    """The rows per block of a table's new extents (`default` without the property, or with
    one that does not parse, with a log line)."""
    value = properties.get(BLOCK_ROWS)
    if value is None:
        return default
    try:
        return parse_block_rows(value)
    except InvalidPropertyError as e:
        log.warning("ignoring %s", e)
        return default
