"""Table schemas, schema versions and the widen-only rule (docs/sql.md, docs/ingest.md).

A `Schema` is an immutable, versioned list of `Column`s that always starts with the reserved
`_timestamp` and `props` columns. Every change goes through `Schema.evolve()`, which returns
the next version or raises `IncompatibleSchemaChangeError` and changes nothing. Allowed
changes: add a nullable column (or one with a default); widen `int -> long`,
`int|long -> real`, any scalar `-> string`, any typed column `-> dynamic`; relax `NOT NULL`.
Never narrow. Renaming and dropping a column are explicit operations of their own
(`rename_column`, `drop_column`, `alter_column_type`), never a side effect of `evolve()`.

Column identity: every column of a version carries a stable id (`Schema.ids`), kept by a
rename and never reused, so a dropped name added again is a new column. Extents store the
names of the version they were written under; `stored_names()` maps the columns of the
version read to those names (None: the extent has no values for it). A schema that never had
a rename or drop keeps positional ids (`_timestamp` 1, `props` 2, then in order of addition),
which is what every version written before ids existed means, so their JSON does not change.
`reshaped` is the last version that renamed or dropped a column: extents written at or after
it need no mapping.

`merge_concurrent()` is the rebase of a live-schema change onto a schema that moved meanwhile:
disjoint or identical additions merge; one name with conflicting types fails clearly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pyarrow as pa

from shoal.errors import (IncompatibleSchemaChangeError, InvalidSchemaError,
                          ProtectedColumnError, SchemaConflictError)
from shoal.types.columns import (DYNAMIC, FIELD_TYPE_KEY, HEADERS_DDL, STRING, TIMESTAMP,
                                 ColumnType, default_to_arrow_scalar, parse_type)

TIMESTAMP_COLUMN = "_timestamp"
PROPS_COLUMN = "props"
RESERVED_COLUMNS = (TIMESTAMP_COLUMN, PROPS_COLUMN)
IDENTIFIER_RE = re.compile(r"^[a-z_][a-z0-9_]*\Z")
MAX_NAME_CHARS = 128  # table and column names; a name becomes part of object paths
# A data table `t` may get a companion `t__rejects` (shoal.commit.rejects): that name may
# pass the limit by its suffix, so every valid table can have one.
REJECTS_SUFFIX = "__rejects"
# Names the query lane makes up, so no table or column may take them: the virtual column
# `_timestamp_ns` (`shoal.query.scan_plan.TIMESTAMP_NS`) and anything starting `__shoal`
# (the planner's temporary views are `__shoal_scan_<n>`).
TIMESTAMP_NS_COLUMN = "_timestamp_ns"
QUERY_RESERVED_NAMES = (TIMESTAMP_NS_COLUMN,)
QUERY_RESERVED_PREFIX = "__shoal"

SchemaMode = Literal["evolve", "drop", "reject"]
SCHEMA_MODES: tuple[SchemaMode, ...] = ("evolve", "drop", "reject")

# Header binding of a Kafka header column: "*" = all headers (HEADERS), else one key.
HeaderBinding = str | None


def is_query_reserved(name: str) -> bool:
    """A name the query lane synthesises (`_timestamp_ns`, `__shoal...`)."""
    return name in QUERY_RESERVED_NAMES or name.startswith(QUERY_RESERVED_PREFIX)


def is_identifier_safe(name: str) -> bool:
    """A name evolution may turn into a column (else the field goes to `props`)."""
    return (len(name) <= MAX_NAME_CHARS and bool(IDENTIFIER_RE.match(name))
            and name not in RESERVED_COLUMNS and not is_query_reserved(name))


def _shown(name: str) -> str:
    """A name for an error message: long ones are cut (the limit is the point)."""
    return name if len(name) <= 64 else name[:60] + "..."


def _check_name(kind: str, name: str, column: str | None, limit: int = MAX_NAME_CHARS
                ) -> None:
    if len(name) > limit:
        raise InvalidSchemaError(
            f'{kind} name "{_shown(name)}" is {len(name):,} characters long (at most '
            f"{MAX_NAME_CHARS})", column=column)
    if not IDENTIFIER_RE.match(name):
        raise InvalidSchemaError(
            f'{kind} name "{_shown(name)}" is not identifier-safe (expected '
            "^[a-z_][a-z0-9_]*$)", column=column)
    if is_query_reserved(name):
        raise InvalidSchemaError(
            f'{kind} name "{name}" is reserved: queries use it (_timestamp_ns and names '
            f'starting with "{QUERY_RESERVED_PREFIX}")', column=column)


MAX_VECTOR_DIM = 65_536  # a vector column's dimension, at most (rows are allocated whole)


def check_column_type(col: Column) -> None:
    """A new column's type is within bounds (a vector's dimension)."""
    if col.type.kind == "vector" and (col.type.dim or 0) > MAX_VECTOR_DIM:
        raise InvalidSchemaError(
            f'column "{col.name}": vector dimension {col.type.dim:,} is over the limit of '
            f"{MAX_VECTOR_DIM:,}", column=col.name)


def check_column_name(name: str) -> None:
    if name in RESERVED_COLUMNS:
        raise InvalidSchemaError(f'column name "{name}" is reserved', column=name)
    _check_name("column", name, _shown(name))


def check_table_name(name: str) -> None:
    extra = len(REJECTS_SUFFIX) if name.endswith(REJECTS_SUFFIX) else 0
    _check_name("table", name, None, MAX_NAME_CHARS + extra)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True
    default: Any = None  # a JSON-like literal; None = no default
    header: HeaderBinding = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "type": str(self.type),
                               "nullable": self.nullable}
        if self.default is not None:
            doc["default"] = self.default
        if self.header is not None:
            doc["header"] = self.header
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Column:
        return cls(name=doc["name"], type=parse_type(doc["type"]),
                   nullable=doc.get("nullable", True), default=doc.get("default"),
                   header=doc.get("header"))

    def arrow_field(self) -> pa.Field:
        return pa.field(self.name, self.type.arrow(), nullable=True,
                        metadata={FIELD_TYPE_KEY: str(self.type).encode()})

    def default_scalar(self) -> pa.Scalar:
        return default_to_arrow_scalar(self.type, self.default)


DEFAULT_COLUMNS = (Column(TIMESTAMP_COLUMN, TIMESTAMP), Column(PROPS_COLUMN, DYNAMIC))


def widening_allowed(old: ColumnType, new: ColumnType) -> bool:
    """True when values of `old` can be read as `new` without loss of meaning."""
    if old == new:
        return True
    if new == DYNAMIC:
        return old.kind != "headers"
    if new == STRING:
        return old.is_scalar
    if old.kind == "int":
        return new.kind in ("long", "real")
    if old.kind == "long":
        return new.kind == "real"
    return False


def _check_default(col: Column) -> None:
    if col.default is None:
        return
    try:
        col.default_scalar()
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
        raise InvalidSchemaError(
            f'column "{col.name}": default {json.dumps(col.default)} is not a valid '
            f"{col.type}: {e}", column=col.name) from None


def header_type_error(column: str, header: str, found: str) -> InvalidSchemaError:
    """The error for a header column (`header` "*" for HEADERS, else the key) of another type.

    `found` is the type as spelled; DDL passes its text when it is not a type at all, so an
    `ARRAY<STRUCT<k STRING, v BYTES>> HEADERS` column gets this error, not "unknown type".
    """
    if header == "*":
        return InvalidSchemaError(
            f'HEADERS column "{column}" must have type {HEADERS_DDL}, got {found}', column=column)
    return InvalidSchemaError(
        f"HEADER('{header}') column \"{column}\" must have type BYTES, got {found}",
        column=column)


def _check_headers(columns: Sequence[Column]) -> None:
    """Kafka header column rules (docs/kafka.md), checked whenever a schema is built."""
    all_headers = [c for c in columns if c.header == "*"]
    keyed = [c for c in columns if c.header not in (None, "*")]
    if len(all_headers) > 1:
        raise InvalidSchemaError(
            "at most one HEADERS column is allowed, found "
            + ", ".join(f'"{c.name}"' for c in all_headers), column=all_headers[1].name)
    if all_headers and keyed:
        raise InvalidSchemaError(
            f'HEADERS column "{all_headers[0].name}" cannot be combined with '
            f'HEADER(\'{keyed[0].header}\') column "{keyed[0].name}"', column=keyed[0].name)
    for c in all_headers:
        if c.type.kind != "headers":
            raise header_type_error(c.name, "*", str(c.type))
    seen: dict[str, str] = {}
    for c in keyed:
        if c.type.kind != "bytes":
            raise header_type_error(c.name, c.header, str(c.type))  # type: ignore[arg-type]
        if c.header in seen:
            raise InvalidSchemaError(
                f"HEADER('{c.header}') is bound twice: columns \"{seen[c.header]}\" and "
                f'"{c.name}"', column=c.name)
        seen[c.header] = c.name  # type: ignore[index]
    for c in columns:
        if c.type.kind == "headers" and c.header != "*":
            raise InvalidSchemaError(
                f'column "{c.name}" of type {c.type} must be declared HEADERS', column=c.name)


@dataclass(frozen=True)
class Schema:
    """One version of a table's schema. `columns` always starts with the reserved columns."""

    columns: tuple[Column, ...]
    version: int = 1
    ids: tuple[int, ...] = ()     # stable column ids, one per column; () = positional
    next_id: int = 0              # the id the next added column gets; 0 = after the last
    reshaped: int = 0             # the last version that renamed or dropped a column
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        ids = self.ids or tuple(range(1, len(self.columns) + 1))
        if len(ids) != len(self.columns) or len(set(ids)) != len(ids) or ids[:2] != (1, 2):
            raise ValueError("a Schema has one distinct id per column (_timestamp 1, props 2)")
        object.__setattr__(self, "ids", tuple(ids))
        object.__setattr__(self, "next_id", max(self.next_id, max(ids) + 1))
        if tuple(names[:2]) != RESERVED_COLUMNS or self.columns[:2] != DEFAULT_COLUMNS:
            raise ValueError("a Schema starts with the reserved _timestamp and props columns; "
                             "use Schema.create()")
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise InvalidSchemaError(f'duplicate column "{sorted(dup)[0]}"',
                                     column=sorted(dup)[0])
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    @classmethod
    def create(cls, columns: Iterable[Column], *, version: int = 1) -> Schema:
        """Validate user columns and prepend the reserved ones."""
        cols = list(columns)
        for c in cols:
            check_column_name(c.name)
            check_column_type(c)
            if not c.nullable and c.default is None and c.header is not None:
                raise InvalidSchemaError(f'header column "{c.name}" cannot be NOT NULL',
                                         column=c.name)
            _check_default(c)
        _check_headers(cols)
        return cls(DEFAULT_COLUMNS + tuple(cols), version)

    def _positional(self) -> bool:
        return (self.ids == tuple(range(1, len(self.columns) + 1))
                and self.next_id == len(self.columns) + 1)

    # -- lookup -----------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def column(self, name: str) -> Column:
        return self.columns[self._index[name]]

    def get(self, name: str) -> Column | None:
        i = self._index.get(name)
        return None if i is None else self.columns[i]

    def column_id(self, name: str) -> int:
        return self.ids[self._index[name]]

    def name_of(self, column_id: int) -> str | None:
        """The name the column with id `column_id` has in this version (None: absent)."""
        for c, i in zip(self.columns, self.ids, strict=True):
            if i == column_id:
                return c.name
        return None

    @property
    def user_columns(self) -> tuple[Column, ...]:
        return self.columns[2:]

    def arrow(self) -> pa.Schema:
        return pa.schema([c.arrow_field() for c in self.columns],
                         metadata={b"shoal.schema_version": str(self.version).encode()})

    # -- serialisation ----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"version": self.version,
                               "columns": [c.to_json() for c in self.columns]}
        if not self._positional():
            doc["ids"] = list(self.ids)
            doc["next_id"] = self.next_id
        if self.reshaped:
            doc["reshaped"] = self.reshaped
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Schema:
        return cls(tuple(Column.from_json(c) for c in doc["columns"]), doc["version"],
                   tuple(doc.get("ids", ())), int(doc.get("next_id", 0)),
                   int(doc.get("reshaped", 0)))

    def _next(self, columns: Sequence[Column], ids: Sequence[int], *, next_id: int | None = None,
              reshaped: bool = False) -> Schema:
        return Schema(tuple(columns), self.version + 1, tuple(ids),
                      self.next_id if next_id is None else next_id,
                      self.version + 1 if reshaped else self.reshaped)

    # -- explicit column changes ------------------------------------------------------------
    def _changeable(self, name: str, action: str, *, table: str | None) -> int:
        """The index of user column `name`, which `action` may change."""
        if name in RESERVED_COLUMNS:
            raise ProtectedColumnError(table, name, action, "it is a reserved column")
        i = self._index.get(name)
        if i is None:
            where = f'table "{table}": ' if table else ""
            raise InvalidSchemaError(f'{where}cannot {action} column "{_shown(name)}": the '
                                     "table has no such column", column=name)
        col = self.columns[i]
        if col.header is not None:
            what = "HEADERS" if col.header == "*" else f"HEADER('{col.header}')"
            raise ProtectedColumnError(table, name, action,
                                       f"it is a Kafka header column ({what})")
        return i

    def rename_column(self, old: str, new: str, *, table: str | None = None) -> Schema:
        """The next version with column `old` named `new` (same id: old rows follow)."""
        i = self._changeable(old, "rename", table=table)
        if new == old:
            return self
        if new in RESERVED_COLUMNS:
            raise ProtectedColumnError(table, new, "take the name of",
                                       "it is a reserved column")
        check_column_name(new)
        if new in self._index:
            where = f'table "{table}": ' if table else ""
            raise InvalidSchemaError(f'{where}cannot rename column "{old}" to "{new}": '
                                     f'column "{new}" already exists', column=new)
        cols = list(self.columns)
        cols[i] = replace(cols[i], name=new)
        return self._next(cols, self.ids, reshaped=True)

    def drop_column(self, name: str, *, table: str | None = None) -> Schema:
        """The next version without column `name`; its id is never used again."""
        i = self._changeable(name, "drop", table=table)
        cols = list(self.columns)
        ids = list(self.ids)
        del cols[i], ids[i]
        return self._next(cols, ids, reshaped=True)

    def alter_column_type(self, name: str, new_type: ColumnType, *,
                          table: str | None = None) -> Schema:
        """The next version with column `name` widened to `new_type` (the widen-only rule);
        the same type changes nothing."""
        i = self._changeable(name, "change the type of", table=table)
        cur = self.columns[i]
        if cur.type == new_type:
            return self
        if not widening_allowed(cur.type, new_type):
            raise IncompatibleSchemaChangeError(table, name, str(cur.type), str(new_type))
        check_column_type(replace(cur, type=new_type))
        cols = list(self.columns)
        cols[i] = replace(cur, type=new_type)
        return self._next(cols, self.ids)

    # -- evolution --------------------------------------------------------------------------
    def evolve(self, changes: Iterable[Column], *, table: str | None = None) -> Schema:
        """The next version with `changes` applied: new columns added, existing ones widened.

        A change equal to the current column is a no-op; if every change is a no-op the same
        schema (same version) is returned.
        """
        cols = list(self.columns)
        ids = list(self.ids)
        next_id = self.next_id
        index = dict(self._index)
        changed = False
        for ch in changes:
            if ch.name in RESERVED_COLUMNS:
                if ch == self.get(ch.name):
                    continue
                raise InvalidSchemaError(f'column name "{ch.name}" is reserved: it cannot be '
                                         "added or changed", column=ch.name)
            cur_i = index.get(ch.name)
            if cur_i is None:
                check_column_name(ch.name)
                check_column_type(ch)
                if not ch.nullable and ch.default is None:
                    raise IncompatibleSchemaChangeError(
                        table, ch.name, "absent", f"{ch.type} NOT NULL",
                        "a new column must be nullable or have a default")
                _check_default(ch)
                index[ch.name] = len(cols)
                cols.append(ch)
                ids.append(next_id)
                next_id += 1
                changed = True
                continue
            cur = cols[cur_i]
            if cur.header != ch.header:
                raise IncompatibleSchemaChangeError(
                    table, ch.name, _describe(cur), _describe(ch), "header binding is fixed")
            if not widening_allowed(cur.type, ch.type):
                raise IncompatibleSchemaChangeError(table, ch.name, str(cur.type), str(ch.type))
            if cur.nullable and not ch.nullable:
                raise IncompatibleSchemaChangeError(
                    table, ch.name, f"{cur.type} NULL", f"{ch.type} NOT NULL",
                    "a column cannot become NOT NULL")
            if ch.default != cur.default and ch.default is not None:
                raise IncompatibleSchemaChangeError(
                    table, ch.name, _describe(cur), _describe(ch),
                    "a column's default cannot change")
            new = replace(cur, type=ch.type, nullable=cur.nullable or ch.nullable)
            if new != cur:
                cols[cur_i] = new
                changed = True
        if not changed:
            return self
        new_cols = tuple(cols)
        _check_headers(new_cols[2:])
        return self._next(new_cols, ids, next_id=next_id)

    def merge_concurrent(self, base: Schema, mine: Schema, *, table: str) -> Schema:
        """Rebase `mine` (made from `base`) onto `self` (the schema that landed meanwhile).

        The changes of `mine` relative to `base` are re-applied on `self`. An addition that
        `self` already has with the same type merges; a conflicting type fails with
        `SchemaConflictError`.
        """
        changes: list[Column] = []
        for c in mine.columns:
            before = base.get(c.name)
            if before == c:
                continue
            landed = self.get(c.name)
            if before is None and landed is not None and landed.type != c.type:
                raise SchemaConflictError(table, c.name, str(landed.type), str(c.type))
            changes.append(c)
        try:
            return self.evolve(changes, table=table)
        except IncompatibleSchemaChangeError as e:
            raise SchemaConflictError(table, e.column, e.current, e.requested) from None


def stored_names(read: Schema, written: Schema) -> dict[str, str | None]:
    """Where the columns of `read` are in an extent written under `written` (same table),
    for the columns whose stored name is not their own: the name they had then, or None
    when the extent holds no values of theirs (added later, or a dropped column's name
    taken again). Empty when nothing was renamed or dropped in between."""
    if written.version >= read.reshaped:
        return {}
    out: dict[str, str | None] = {}
    for col, cid in zip(read.columns, read.ids, strict=True):
        then = written.name_of(cid)
        if then != col.name and (then is not None or col.name in written):
            out[col.name] = then
    return out


def _describe(c: Column) -> str:
    s = str(c.type)
    if not c.nullable:
        s += " NOT NULL"
    if c.default is not None:
        s += f" DEFAULT {json.dumps(c.default)}"
    if c.header == "*":
        s += " HEADERS"
    elif c.header is not None:
        s += f" HEADER('{c.header}')"
    return s
