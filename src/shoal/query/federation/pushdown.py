"""The part of a statement's filter a source evaluates, as the source's SQL.

Pushing is only ever a reduction: the engine still applies every filter to what the source
returns, so a conjunct is pushed only when the source keeps at least every row the engine
would keep. What is pushed (each conjunct of the reference's WHERE, or of the ON of the
inner/left join that brings it in, mentioning only its own columns):

- `col = literal`, `col IN (literals)`, `col IS NULL`, `col IS NOT NULL`, and `AND` of them;
- `<`, `<=`, `>`, `>=` and `BETWEEN` on numbers, and on timestamps at Postgres (a
  MySQL/MariaDB `TIMESTAMP` compares in the session's time zone). Never on text: a
  source's collation may order strings unlike Spark, and so drop a row Spark keeps. An
  equality on text is pushed (a case-insensitive collation returns more rows, never fewer).

Anything else (functions, OR, LIKE, `<>`, columns compared with columns) stays with the
engine. Literals are re-rendered from their parsed values, never copied as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlglot import exp

from shoal.query.federation.source import Family, Source
from shoal.types import ColumnType

_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?\Z")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?\Z")
_OPS: dict[type, str] = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIP: dict[type, type] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


class _Pusher:
    def __init__(self, source: Source, alias: str, sole: bool,
                 columns: Mapping[str, tuple[str, Family]]) -> None:
        self.source = source
        self.alias = alias.lower()
        self.sole = sole
        self.columns = columns          # shoal name -> (source name, family)

    def column(self, e: exp.Expr) -> tuple[str, Family] | None:
        if not isinstance(e, exp.Column) or isinstance(e.this, exp.Star):
            return None
        if e.table:
            if e.table.lower() != self.alias:
                return None
        elif not self.sole:
            return None
        found = self.columns.get(e.name.lower())
        if found is None:
            return None
        # compared as read (the cast included), so the source and the engine compare
        # the same values
        return found[1].select.format(self.source.quote_name(found[0])), found[1]

    def literal(self, node: exp.Expr, family: Family) -> str | None:
        if isinstance(node, exp.Paren):
            return self.literal(node.this, family)
        negative = False
        if isinstance(node, exp.Neg):
            node, negative = node.this, True
        if not isinstance(node, exp.Literal):
            return None
        kind = family.type.kind
        if kind in ("int", "long", "real"):
            if node.is_string or not _NUMBER.match(node.name):
                return None
            return ("-" if negative else "") + node.name
        if negative or not node.is_string:
            return None
        if kind == "string":
            return _string(node.name, self.source)
        if kind == "timestamp" and self.source.dialect == "postgres":
            text = node.name.strip().replace("T", " ")
            return f"{_string(text, self.source)}::timestamptz" if _TIMESTAMP.match(
                text) else None
        return None

    def push(self, e: exp.Expr) -> str | None:
        if isinstance(e, exp.Paren):
            return self.push(e.this)
        if isinstance(e, exp.And):
            parts = [p for c in e.flatten() if (p := self.push(c)) is not None]
            return " AND ".join(parts) if parts else None
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            col = self.column(e.this)
            return f"{col[0]} IS NULL" if col else None
        if isinstance(e, exp.Not) and isinstance(e.this, exp.Is) and isinstance(
                e.this.expression, exp.Null):
            col = self.column(e.this.this)
            return f"{col[0]} IS NOT NULL" if col else None
        if isinstance(e, exp.In) and not e.args.get("query"):
            col = self.column(e.this)
            if col is None or not self.comparable(col[1], ranged=False):
                return None
            values = [self.literal(v, col[1]) for v in e.expressions]
            if not values or any(v is None for v in values):
                return None
            return f"{col[0]} IN ({', '.join(v for v in values if v is not None)})"
        if isinstance(e, exp.Between):
            col = self.column(e.this)
            if col is None or not self.comparable(col[1], ranged=True):
                return None
            lo = self.literal(e.args["low"], col[1])
            hi = self.literal(e.args["high"], col[1])
            parts = ([f"{col[0]} >= {lo}"] if lo else []) + ([f"{col[0]} <= {hi}"] if hi
                                                             else [])
            return " AND ".join(parts) if parts else None
        if type(e) in _OPS:
            op: type = type(e)
            left, right = e.this, e.expression
            if self.column(left) is None:
                left, right, op = right, left, _FLIP.get(op, op)
            col = self.column(left)
            if col is None or not self.comparable(col[1], ranged=op is not exp.EQ):
                return None
            value = self.literal(right, col[1])
            return None if value is None else f"{col[0]} {_OPS[op]} {value}"
        return None

    def comparable(self, family: Family, *, ranged: bool) -> bool:
        kind = family.type.kind
        if kind == "timestamp" and self.source.dialect != "postgres":
            return False
        if kind not in ("int", "long", "real", "string", "timestamp"):
            return False
        return family.ranges or not ranged


def _string(text: str, source: Source) -> str:
    escaped = text.replace("'", "''")
    if source.dialect == "mysql":
        escaped = escaped.replace("\\", "\\\\")
    return f"'{escaped}'"


def pushed_filter(conjuncts: list[exp.Expr], *, source: Source, alias: str, sole: bool,
                  columns: Mapping[str, tuple[str, Family]]) -> list[str]:
    """The source SQL of every conjunct the source can evaluate. `columns`: shoal column
    name -> (the source's name, its `Family`)."""
    pusher = _Pusher(source, alias, sole, columns)
    return [p for c in conjuncts if (p := pusher.push(c)) is not None]


def family_types(columns: Mapping[str, tuple[str, Family]]) -> dict[str, ColumnType]:
    return {k: f.type for k, (_, f) in columns.items()}
