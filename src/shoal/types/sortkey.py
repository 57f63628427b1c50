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
commit. `sort_rows` applies a key to Arrow rows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import InvalidSchemaError
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
    empty or there is at most one row."""
    if not key or rows.num_rows < 2:
        return rows
    order = pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_end") for c in key])
    return rows.take(order)
