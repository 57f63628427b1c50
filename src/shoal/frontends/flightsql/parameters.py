"""`?` parameters of Flight SQL prepared statements: where they are, what type each one is
announced as, and the statement with bound values in their place.

A statement's parameters are its `?` tokens (sqlglot's Spark tokenizer: a `?` inside a
string literal or a comment is not one), numbered from 0 in the order they appear.

- `parameter_schema`: one field per parameter (`"0"`, `"1"`...), typed by where it stands:
  compared with a column of a table the statement reads (`=`, `<>`, `<`, `IN`, `BETWEEN`,
  `LIKE`...), the column's answer type (`shoal.query.scan_shape.answer_schema`); in `LIMIT` /
  `OFFSET`, int64; anywhere else, utf8. The schema only informs the client: any value type
  below can be bound to any parameter, and the engine casts as it would a literal.
- `bind`: each `?` token replaced by a SQL literal that sqlglot builds from the bound
  Arrow value (never pasted text): NULL, TRUE/FALSE, numbers (floats as DOUBLE), strings
  and bytes (`X'..'`) quoted by sqlglot (a string holding `'` as a CONCAT, see `_string`),
  dates as `CAST('..' AS DATE)`, timestamps as `CAST('..' AS TIMESTAMP)` in UTC with µs
  precision (what shoal's SQL timestamps hold; finer digits are truncated). Every other
  character of the statement stays as written, and the result goes through the guard like
  any statement.
- `with_samples`: every parameter as a sample value of its announced type, to plan the
  answer's schema before any value is bound.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from shoal.http.errors import BadRequestError

_DIALECT = sqlglot.Dialect.get_or_raise("spark")
_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Like,
             exp.ILike, exp.In, exp.Between)
_UNTYPED = pa.utf8()
_NAME = "shoal_param_"
_QUOTE = "\"'\""           # a string of one single quote, in double quotes


def placeholders(text: str) -> list[Token]:
    """The statement's `?` tokens, in order (none for text sqlglot cannot tokenize)."""
    try:
        tokens = _DIALECT.tokenize(text)
    except SqlglotError:
        return []
    return [t for t in tokens if t.token_type == TokenType.PLACEHOLDER]


def parameter_schema(text: str, column_types: Callable[[str], pa.Schema | None]
                     ) -> pa.Schema:
    """One field per `?` of `text` (see the module docstring); `column_types(table)` gives
    a table's answer schema, or None for a name that is not a table."""
    count = len(placeholders(text))
    if count == 0:
        return pa.schema([])
    types: list[pa.DataType] = [_UNTYPED] * count
    # Each `?` renamed (`:shoal_param_<i>`) so that its node in the tree says which it is.
    named = _splice(text, [f":{_NAME}{i}" for i in range(count)])
    try:
        tree = sqlglot.parse_one(named, read=_DIALECT)
    except SqlglotError:
        tree = None
    if tree is not None:
        columns: dict[str, set[pa.DataType]] = {}
        for table in tree.find_all(exp.Table):
            schema = column_types(table.name)
            for field in schema if schema is not None else ():
                columns.setdefault(field.name, set()).add(field.type)
        for node in tree.find_all(exp.Placeholder):
            name = str(node.this or "")
            if name.startswith(_NAME) and name[len(_NAME):].isdigit():
                i = int(name[len(_NAME):])
                if i < count:
                    types[i] = _type_at(node, columns)
    return pa.schema([pa.field(str(i), t) for i, t in enumerate(types)])


def _type_at(node: exp.Expression, columns: dict[str, set[pa.DataType]]) -> pa.DataType:
    parent = node.parent
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return pa.int64()
    while isinstance(parent, (exp.Tuple, exp.Paren)):
        parent = parent.parent
    if isinstance(parent, _COMPARED):
        column = parent.this
        if isinstance(column, exp.Column):
            candidates = columns.get(column.name, set())
            if len(candidates) == 1:
                return next(iter(candidates))
    return _UNTYPED


def with_samples(text: str, schema: pa.Schema) -> str:
    """`text` with each `?` a sample value of its announced type, written as `bind` writes
    a bound one (to plan the answer's schema before values are bound)."""
    return _splice(text, [literal(pa.array([_SAMPLES.get(f.type, "")], f.type), i)
                          for i, f in enumerate(schema)])


_SAMPLES: dict[pa.DataType, Any] = {
    pa.bool_(): False, pa.int32(): 0, pa.int64(): 1, pa.float64(): 0.0, pa.binary(): b"",
    pa.timestamp("us", tz="UTC"): 0}


def bind(text: str, values: pa.RecordBatch) -> str:
    """`text` with its `?` tokens replaced, in order, by literals of the one row of
    `values` (its columns in parameter order)."""
    count = len(placeholders(text))
    if values.num_rows != 1:
        raise BadRequestError(f"a query binds one row of parameters; got {values.num_rows} "
                              "(run the statement once per row)")
    if values.num_columns != count:
        raise BadRequestError(f"the statement has {count} parameter(s) (?), "
                              f"{values.num_columns} value(s) were bound")
    return _splice(text, [literal(values.column(i), i) for i in range(count)])


def _splice(text: str, literals: Sequence[str]) -> str:
    out, last = [], 0
    for token, sql in zip(placeholders(text), literals, strict=True):
        out.append(text[last:token.start])
        out.append(sql)
        last = token.end + 1
    out.append(text[last:])
    return "".join(out)


def literal(column: pa.Array, index: int) -> str:
    """The SQL literal (Spark's dialect) of `column[0]`, parameter number `index`."""
    t = column.type
    scalar = column[0]
    if not scalar.is_valid or pa.types.is_null(t):
        return "NULL"
    node: exp.Expression
    if pa.types.is_dictionary(t):
        return literal(column.dictionary_decode(), index)
    if pa.types.is_boolean(t):
        node = exp.Boolean(this=bool(scalar.as_py()))
    elif pa.types.is_integer(t):
        node = exp.Literal.number(int(scalar.as_py()))
    elif pa.types.is_floating(t):
        value = float(scalar.as_py())
        if math.isfinite(value):      # a DOUBLE (a bare 2.5 would be a DECIMAL in Spark)
            node = exp.cast(exp.Literal.number(repr(value)), "DOUBLE")
        else:
            spelled = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            node = exp.cast(exp.Literal.string(spelled), "DOUBLE")
    elif pa.types.is_decimal(t):
        node = exp.Literal.number(str(decimal.Decimal(scalar.as_py())))
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _string(scalar.as_py())
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        node = exp.HexString(this=scalar.as_py().hex())
    elif pa.types.is_date(t):
        day: dt.date = scalar.as_py()
        node = exp.cast(exp.Literal.string(day.isoformat()), "DATE")
    elif pa.types.is_timestamp(t):
        node = exp.cast(exp.Literal.string(_utc_text(column)), "TIMESTAMP")
    else:
        raise BadRequestError(
            f"parameter {index}: values of Arrow type {t} cannot be bound; bind booleans, "
            "integers, floats, decimals, strings, bytes, dates or timestamps")
    return node.sql(dialect=_DIALECT)


def _string(value: str) -> str:
    """A string literal. Spark escapes a quote inside one as `\\'`, which shoal's statement
    classifier (plain SQL quoting) would misread: a value holding `'` is written as a
    CONCAT of the pieces between its quotes and a double-quoted `"'"` for each."""
    if "'" not in value:
        return exp.Literal.string(value).sql(dialect=_DIALECT)
    pieces: list[str] = []
    for i, piece in enumerate(value.split("'")):
        if i:
            pieces.append(_QUOTE)
        if piece:
            pieces.append(exp.Literal.string(piece).sql(dialect=_DIALECT))
    return f"CONCAT({', '.join(pieces)})"


def _utc_text(column: pa.Array) -> str:
    """The first timestamp of `column` as UTC wall time with µs (`2026-03-01 00:00:00.5`);
    a zone-less timestamp is taken as UTC already."""
    t: Any = column.type
    micros = column.slice(0, 1).cast(pa.int64())[0].as_py()
    micros = {"s": micros * 10**6, "ms": micros * 1000, "us": micros,
              "ns": micros // 1000}[t.unit]
    when = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return when.isoformat(sep=" ")
