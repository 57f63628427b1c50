"""The Spark SQL text of KQL expressions: the translated-expression record (`Sql`), quoting,
literals and the errors' constructor, shared by `scalar` and `functions`.

Every value of the query that becomes SQL text goes through one of three functions here,
never through string concatenation: `quote_string` (text values: string literals, regex
patterns, JSON paths, format strings), `quote_ident` (column and table names) and
`regex_literal` (a needle as a regex that matches it literally, itself then quoted by
`quote_string`). Numbers and times are written from Python ints and floats.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from shoal.errors import KqlSemanticError, KqlSyntaxError
from shoal.frontends.kusto.kql.lexer import NS_PER_UNIT, Token
from shoal.frontends.kusto.kql.values import spark_timestamp

_NOCONST: Any = object()
# The most SQL one KQL query may become (twice the largest query body the server reads),
# and the most SQL text its translation may write in all (the statement and the pieces it
# is built from). `let`s and functions that repeat an argument (`bin`, `isempty`) can double
# the text per level of a small query; the translation stops at these sizes instead.
MAX_KQL_SQL_CHARS = 2 << 20
MAX_KQL_SQL_WRITTEN = 8 * MAX_KQL_SQL_CHARS
SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
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
    """A Spark SQL identifier: as is when it is a plain word, else back-quoted with its
    back quotes doubled (the only escape inside back quotes, in Spark and in sqlglot)."""
    _no_nul(name)
    if SIMPLE_NAME.match(name) and name.lower() not in _RESERVED:
        return name
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """`value` as one Spark SQL string literal, whatever it holds.

    Spark reads backslash escapes inside '...' (`spark.sql.parser.escapedStringLiterals` is
    false by default): a backslash is written doubled, so no escape (`\\'`, `\\uXXXX`,
    `\\%`, octal) can form from the value's own text, and a quote is written `\\u0027`.
    Not `\\'`: the guard's tokenizer (`shoal.query.guard`) does not read backslash escapes
    and would end the literal there; not `''`: Spark reads that as two adjacent literals
    and drops the quote. Every other character, a line break included, stands for itself.
    sqlglot's Spark dialect reads the literal back as the same value and writes it for the
    embedded engine in DuckDB's quoting (`''`, no escapes). NUL cannot be written in a
    DuckDB statement: the lexer refuses it in KQL text, and it is refused here again.
    """
    _no_nul(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\u0027") + "'"


def _no_nul(value: str) -> None:
    if "\0" in value:
        raise KqlSemanticError("a NUL character cannot be part of a string or a name")


# Regex metacharacters (Java's and RE2's) escaped with a backslash in `regex_literal`, and
# punctuation written as a one-character class (both engines read `[c]` alike).
_REGEX_META = frozenset(".^$*+?()[]{}|\\/-")
_CLASS_SAFE = frozenset(" _:/=,;@#%&\"<>~!.")


def regex_literal(needle: str, *, caseless: bool) -> str:
    """A regex matching `needle` literally (as a regex, not SQL: it becomes SQL through
    `quote_string`); letters as `[Xx]` classes when `caseless` (simple per-character
    folding: a letter whose other case is one character). The forms used are read alike
    by Java's regex (Spark) and RE2 (the embedded engine)."""
    out = []
    for c in needle:
        lo, up = c.lower(), c.upper()
        if caseless and lo != up and len(lo) == 1 and len(up) == 1:
            out.append("[" + "".join(dict.fromkeys((up, lo, c))) + "]")
        elif c.isalnum():
            out.append(c)
        elif c in _CLASS_SAFE:
            out.append(f"[{c}]")
        elif c in _REGEX_META:
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        else:
            out.append(c)
    return "".join(out)


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


def over_bound(expected: str, at: Token) -> KqlSyntaxError:
    """A query past one of the bounds on its size, at the token where it went over (the same
    400 `kql_syntax` as the parser's own bounds)."""
    return KqlSyntaxError(line=at.line, column=at.column, expected=expected,
                          found=at.describe())


class SqlBudget:
    """What SQL text a translation may still write (`MAX_KQL_SQL_WRITTEN` in all)."""

    def __init__(self) -> None:
        self.left = MAX_KQL_SQL_WRITTEN

    def fits(self, text: str, at: Token) -> str:
        """`text`, if it fits in what is left (a piece that will be spent with its parent)."""
        if len(text) > self.left:
            raise over_bound(f"a query whose SQL takes at most {MAX_KQL_SQL_WRITTEN >> 20} MiB "
                             "to write (let values and functions expanded)", at)
        return text

    def spend(self, text: str, at: Token) -> str:
        self.left -= len(self.fits(text, at))
        return text

    @staticmethod
    def statement(text: str, at: Token) -> str:
        """The whole statement, if it is at most `MAX_KQL_SQL_CHARS` long."""
        if len(text) > MAX_KQL_SQL_CHARS:
            raise over_bound(f"a query whose SQL is at most {MAX_KQL_SQL_CHARS >> 20} MiB "
                             "(let values and functions expanded)", at)
        return text


class Context(Protocol):
    """What functions read from the translation: the query's `now` (ns, UTC)."""

    now: int


def literal(kind: str, value: Any, at: Token) -> Sql:
    if kind == "string":
        return Sql(quote_string(value), "string", const=value)
    if kind == "long":
        return Sql(str(value) if value >= 0 else f"({value})", "long", const=value)
    if kind == "real":
        if not math.isfinite(value):            # inf/nan have no numeric literal
            text = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return Sql(f"CAST({quote_string(text)} AS DOUBLE)", "real", const=value)
        return Sql(f"CAST({value!r} AS DOUBLE)", "real", const=value)
    if kind == "bool":
        return Sql("TRUE" if value else "FALSE", "bool", const=value)
    if kind == "datetime" or kind == "timestamp":
        try:
            return Sql(spark_timestamp(value), "timestamp", const=value)
        except (ValueError, OverflowError, OSError):
            raise semantic("a datetime outside years 1..9999", at) from None
    if kind == "timespan":
        return Sql(f"INTERVAL {value // 1_000} MICROSECONDS", "timespan", const=value)
    if kind == "null":
        return Sql("NULL", None, const=None)
    raise semantic(f"a {kind} literal", at)


def trunc_unit(span_ns: int) -> str | None:
    return _TRUNC.get(span_ns)
