"""The Spark SQL text of KQL expressions: the translated-expression record (`Sql`), quoting,
literals and the errors' constructor, shared by `scalar` and `functions`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from shoal.errors import KqlSemanticError
from shoal.query.kql.lexer import NS_PER_UNIT, Token
from shoal.query.kql.values import spark_timestamp

_NOCONST: Any = object()
SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words sqlglot or Spark would read as syntax where a name is meant: quoted when used.
_RESERVED = frozenset({"all", "and", "any", "array", "as", "asc", "between", "both", "by", "case",
                       "cast", "create", "cross", "current", "date", "day", "desc", "distinct",
                       "div", "else", "end", "except", "exists", "false", "fetch", "filter",
                       "for", "from", "full", "group", "having", "hour", "if", "in", "inner",
                       "intersect", "interval", "is", "join", "lateral", "left", "like", "limit",
                       "minus", "minute", "month", "not", "null", "nulls", "of", "on", "or",
                       "order", "outer", "over", "partition", "right", "rlike", "second",
                       "select", "semi", "some", "table", "then", "time", "timestamp", "to",
                       "true", "union", "unknown", "using", "when", "where", "window", "with",
                       "year"})
SPARK_TYPES = {"bool": "BOOLEAN", "int": "INT", "long": "BIGINT", "real": "DOUBLE",
               "string": "STRING", "timestamp": "TIMESTAMP", "dynamic": "STRING"}
NUMERIC = frozenset({"int", "long", "real"})
_DAY, _HOUR, _MIN, _SEC = (NS_PER_UNIT[u] for u in ("d", "h", "m", "s"))
_TRUNC = {_DAY: "DAY", _HOUR: "HOUR", _MIN: "MINUTE", _SEC: "SECOND"}


def quote_ident(name: str) -> str:
    if SIMPLE_NAME.match(name) and name.lower() not in _RESERVED:
        return name
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes, as Spark reads them by default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


@dataclass(frozen=True)
class Sql:
    text: str
    kind: str | None
    names: frozenset[str] = frozenset()
    const: Any = _NOCONST
    aggregate: bool = False

    @property
    def is_const(self) -> bool:
        return self.const is not _NOCONST


def semantic(message: str, at: Token) -> KqlSemanticError:
    return KqlSemanticError(message, line=at.line, column=at.column)


class Context(Protocol):
    """What functions read from the translation: the query's `now` (ns, UTC)."""

    now: int


def literal(kind: str, value: Any, at: Token) -> Sql:
    if kind == "string":
        return Sql(quote_string(value), "string", const=value)
    if kind == "long":
        return Sql(str(value) if value >= 0 else f"({value})", "long", const=value)
    if kind == "real":
        return Sql(f"CAST({value!r} AS DOUBLE)", "real", const=value)
    if kind == "bool":
        return Sql("TRUE" if value else "FALSE", "bool", const=value)
    if kind == "datetime" or kind == "timestamp":
        return Sql(spark_timestamp(value), "timestamp", const=value)
    if kind == "timespan":
        return Sql(f"INTERVAL {value // 1_000} MICROSECONDS", "timespan", const=value)
    if kind == "null":
        return Sql("NULL", None, const=None)
    raise semantic(f"a {kind} literal", at)


def trunc_unit(span_ns: int) -> str | None:
    return _TRUNC.get(span_ns)
