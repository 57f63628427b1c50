"""Column types of shoal tables and their Arrow storage types (docs/sql.md).

A `ColumnType` is a frozen value: its `kind`, and for `vector` its dimension. `str()` gives
the canonical DDL spelling, `parse_type()` reads it back (case-insensitive), `arrow()` gives
the storage type. Arrow fields written by shoal carry the DDL spelling in their metadata
under `FIELD_TYPE_KEY`, so a reader can tell a `dynamic` column (JSON bytes) from `bytes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from shoal.errors import InvalidSchemaError

Kind = Literal["bool", "int", "long", "real", "string", "timestamp", "vector", "dynamic",
               "bytes", "headers"]

FIELD_TYPE_KEY = b"shoal.type"

HEADERS_DDL = "ARRAY<STRUCT<key STRING, value BYTES>>"
HEADERS_ARROW = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

_SCALAR_ARROW: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "real": pa.float64(),
    "string": pa.string(),
    "timestamp": pa.timestamp("ns", tz="UTC"),
    "dynamic": pa.binary(),
    "bytes": pa.binary(),
}

# Accepted spellings -> kind. Spark/SQL aliases are accepted so DDL feels familiar.
_ALIASES: dict[str, str] = {
    "bool": "bool", "boolean": "bool",
    "int": "int", "integer": "int", "int32": "int",
    "long": "long", "bigint": "long", "int64": "long",
    "real": "real", "double": "real", "float64": "real",
    "string": "string", "text": "string", "varchar": "string",
    "timestamp": "timestamp", "datetime": "timestamp",
    "dynamic": "dynamic", "json": "dynamic",
    "bytes": "bytes", "binary": "bytes",
}

_VECTOR_RE = re.compile(r"^vector\s*\(\s*(\d+)\s*\)$", re.IGNORECASE)
_HEADERS_RE = re.compile(
    r"^array\s*<\s*struct\s*<\s*key\s*:?\s*string\s*,\s*value\s*:?\s*bytes\s*>\s*>$",
    re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ColumnType:
    kind: Kind
    dim: int | None = None  # vector dimension

    def __post_init__(self) -> None:
        if (self.kind == "vector") != (self.dim is not None):
            raise ValueError("dim is required for vector and only for vector")
        if self.dim is not None and self.dim <= 0:
            raise ValueError("vector dimension must be positive")

    def __str__(self) -> str:
        if self.kind == "vector":
            return f"vector({self.dim})"
        if self.kind == "headers":
            return HEADERS_DDL
        return self.kind

    def arrow(self) -> pa.DataType:
        if self.kind == "vector":
            assert self.dim is not None
            return pa.list_(pa.field("item", pa.float32()), self.dim)
        if self.kind == "headers":
            return HEADERS_ARROW
        return _SCALAR_ARROW[self.kind]

    @property
    def is_scalar(self) -> bool:
        """Scalar types are the ones that may widen to `string` by CAST."""
        return self.kind in ("bool", "int", "long", "real", "string", "timestamp")


BOOL = ColumnType("bool")
INT = ColumnType("int")
LONG = ColumnType("long")
REAL = ColumnType("real")
STRING = ColumnType("string")
TIMESTAMP = ColumnType("timestamp")
DYNAMIC = ColumnType("dynamic")
BYTES = ColumnType("bytes")
HEADERS = ColumnType("headers")


def vector(dim: int) -> ColumnType:
    return ColumnType("vector", dim)


def parse_type(text: str) -> ColumnType:
    """Read a DDL type name (`long`, `vector(3)`, `ARRAY<STRUCT<key STRING, value BYTES>>`)."""
    spelled = text.strip()
    kind = _ALIASES.get(spelled.lower())
    if kind is not None:
        return ColumnType(kind)  # type: ignore[arg-type]
    m = _VECTOR_RE.match(spelled)
    if m:
        dim = int(m.group(1))
        if dim <= 0:
            raise InvalidSchemaError(f"vector dimension must be positive, got {dim}")
        return vector(dim)
    if _HEADERS_RE.match(spelled):
        return HEADERS
    raise InvalidSchemaError(
        f'unknown column type "{spelled}" (expected one of bool, int, long, real, string, '
        f"timestamp, vector(N), dynamic, bytes, {HEADERS_DDL})")


def type_of_field(field: pa.Field) -> ColumnType:
    """The shoal type of an Arrow field written by shoal (metadata first, then the Arrow type)."""
    meta = field.metadata or {}
    if FIELD_TYPE_KEY in meta:
        return parse_type(meta[FIELD_TYPE_KEY].decode())
    t = field.type
    for kind, arrow in _SCALAR_ARROW.items():
        if kind != "dynamic" and t.equals(arrow):
            return ColumnType(kind)  # type: ignore[arg-type]
    if pa.types.is_fixed_size_list(t) and pa.types.is_float32(t.value_type):
        return vector(t.list_size)
    if t.equals(HEADERS_ARROW):
        return HEADERS
    raise InvalidSchemaError(f'Arrow type {t} of field "{field.name}" has no shoal column type')


def default_to_arrow_scalar(ctype: ColumnType, value: Any) -> pa.Scalar:
    """The Arrow scalar for a column default given as a JSON-like literal."""
    import json

    if value is None:
        return pa.scalar(None, type=ctype.arrow())
    if ctype.kind == "dynamic":
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return pa.scalar(text.encode(), type=pa.binary())
    if ctype.kind == "timestamp" and isinstance(value, str):
        return pa.scalar(value).cast(pa.timestamp("ns", tz="UTC"))
    return pa.scalar(value, type=ctype.arrow())
