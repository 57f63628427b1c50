"""KQL scalar expressions and functions -> Spark SQL text, with KQL's semantics.

`Scalars(lets, now).translate(expr, scope)` gives `Sql`: the text, its shoal type kind
(`bool int long real string timestamp timespan dynamic array`, None when unknown), the
columns it reads, and its constant value when it folds (datetimes and timespans as ns).
Constants fold here so that `ago(1h)`, `now()` and `datetime(...) + 1d` reach the planner
as timestamp literals, which it pushes down to the pruning cascade (every `now()` of one
query is the same instant, as in Kusto).

Mappings where Spark's reading differs from KQL's, and what is done about it:

- strings have no null in KQL (an absent string is ""): a null shoal string satisfies the
  negated string operators (`!=`, `!has`, `!contains`, `!startswith`, `!endswith`, `!in`,
  `!~`) as "" would, and `isempty` is `IS NULL OR = ''`; `isnull` is SQL's `IS NULL`.
- `has` / `!has` / `has_cs`: a term of 2+ ASCII letters or digits becomes shoal's
  `has(col, 'term')` (pruned by token sets); `has_cs` adds a case-sensitive regex. Other
  needles match as a phrase bounded by non-alphanumerics (Kusto's term rule, approximated).
- `contains`, `startswith`, `endswith` (case-insensitive): a regex whose letters are
  `[xX]` classes (simple per-character folding, as `has()` does), so the embedded engine
  can answer them; the `_cs` forms use LIKE (or `contains()` when the needle has `%`/`_`).
  `=~`, `in~` use `lower()`.
- `matches regex`: Spark's Java regex (Kusto uses RE2; common patterns read alike).
- dynamic paths (`attrs.http.method`, `attrs['k']`, `a.b[0]`) are `get_json_object` on
  the JSON text: the value comes back as a string (JSON text for objects and arrays). A
  path compared with a number compares `try_cast(path AS DOUBLE)`; with a bool, 'true'.
- `dcount` is exact (`count(DISTINCT)`; Kusto's is an estimate within ~1%), `percentile`
  is `percentile_approx` at full accuracy (nearest rank, as Kusto's estimate), `make_list`
  and `make_set` are arrays (order undefined, as in Kusto).
- `toint/tolong/toreal/todatetime/tobool` are `try_cast` (null when the text does not
  convert, as in Kusto); `tostring` of a datetime is Spark's text form, not ISO 8601.
- `/` of two integers is integer division truncating toward zero, as in Kusto (`DIV`).
- `bin(ts, span)` is `date_trunc` for 1d/1h/1m/1s and exact µs arithmetic otherwise
  (bins start at the epoch, as Kusto's); `bin(n, k)` floors numbers.
- `format_datetime` maps .NET specifiers to Java's (`f` -> `S`, `tt` -> `a`).
- `substring` is 0-based as in Kusto; `indexof` answers -1 when absent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shoal.format.tokens import MIN_TOKEN_LEN
from shoal.frontends.kusto.kql import ast
from shoal.frontends.kusto.kql.functions import AGGREGATES, SCALARS
from shoal.frontends.kusto.kql.parser import MAX_KQL_EXPR_DEPTH
from shoal.frontends.kusto.kql.sqltext import (NUMERIC, SIMPLE_NAME, Sql, SqlBudget, literal,
                                               over_bound, quote_ident, quote_string, regex_literal,
                                               semantic)

_TOKEN = re.compile(r"^[A-Za-z0-9]+\Z")
# A term's bounds for `has` (Kusto's rule, approximated): a non-alphanumeric or an end.
_TERM_START, _TERM_END = "(^|[^A-Za-z0-9])", "($|[^A-Za-z0-9])"


def path_name(e: ast.Expr) -> str | None:
    """The column name KQL gives an unnamed `e`: a column's own name, `a_b_c` for a path."""
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Member):
        base = path_name(e.target)
        return None if base is None else f"{base}_{e.key}"
    return None


@dataclass
class Scalars:
    """Translates scalar expressions against a scope (column name -> kind)."""

    lets: Mapping[str, ast.Let]
    now: int
    resolving: set[str] = field(default_factory=set)
    depth: int = 0          # expressions being translated, `let` values expanded included
    budget: SqlBudget = field(default_factory=SqlBudget)

    def translate(self, e: ast.Expr, scope: Mapping[str, str | None], *,
                  aggregates: bool = False) -> Sql:
        if self.depth >= MAX_KQL_EXPR_DEPTH:
            raise over_bound(f"an expression at most {MAX_KQL_EXPR_DEPTH} operators deep "
                             "(let values expanded)", e.at)
        method = getattr(self, "_" + type(e).__name__.lower())
        self.depth += 1
        try:
            out: Sql = method(e, scope, aggregates)
        finally:
            self.depth -= 1
        if self.depth == 0:                 # a whole expression: it goes into the statement
            self.budget.spend(out.text, e.at)
        else:
            self.budget.fits(out.text, e.at)
        return out

    # ---- leaves ------------------------------------------------------------------------------
    def _literal(self, e: ast.Literal, scope, aggregates) -> Sql:
        return literal(e.kind, e.value, e.at)

    def _star(self, e: ast.Star, scope, aggregates) -> Sql:
        raise semantic("'*' is only an argument of arg_max/arg_min", e.at)

    def _name(self, e: ast.Name, scope, aggregates) -> Sql:
        if e.name in scope:
            return Sql(quote_ident(e.name), scope[e.name], frozenset({e.name}))
        let = self.lets.get(e.name)
        if let is not None and isinstance(let.value, ast.Expr):
            if e.name in self.resolving:
                raise semantic(f"let '{e.name}' refers to itself", e.at)
            self.resolving.add(e.name)
            try:
                value = self.translate(let.value, {})
            finally:
                self.resolving.discard(e.name)
            return value
        raise semantic(f"Failed to resolve scalar expression named '{e.name}'", e.at)

    def _member(self, e: ast.Member, scope, aggregates) -> Sql:
        keys: list[str | int] = []
        node: ast.Expr = e
        while isinstance(node, ast.Member):
            keys.append(node.key)
            node = node.target
        root = self.translate(node, scope, aggregates=aggregates)
        if root.kind not in ("dynamic", None):
            raise semantic(f"'.' and '[...]' read into dynamic values; this is a {root.kind}",
                           e.at)
        path = "$"
        for key in reversed(keys):
            if isinstance(key, int):
                path += f"[{key}]"
            elif SIMPLE_NAME.match(key):
                path += f".{key}"
            else:
                path += "['" + key.replace("'", "") + "']"
        return Sql(f"get_json_object({root.text}, {quote_string(path)})", "dynamic",
                   root.names, aggregate=root.aggregate)

    def _unary(self, e: ast.Unary, scope, aggregates) -> Sql:
        x = self.translate(e.operand, scope, aggregates=aggregates)
        return Sql(f"(- {x.text})", x.kind, x.names, aggregate=x.aggregate)

    # ---- operators ---------------------------------------------------------------------------
    def _binary(self, e: ast.Binary, scope, aggregates) -> Sql:
        a = self.translate(e.left, scope, aggregates=aggregates)
        b = self.translate(e.right, scope, aggregates=aggregates)
        names, agg = a.names | b.names, a.aggregate or b.aggregate
        op = e.op
        if op in ("and", "or"):
            return Sql(f"({a.text} {op.upper()} {b.text})", "bool", names, aggregate=agg)
        if op in ("+", "-", "*", "/", "%"):
            return self._arithmetic(e, op, a, b)
        if op in ("==", "!=", "<>", "<", "<=", ">", ">="):
            return _comparison(op, a, b, names, agg)
        if op in ("=~", "!~"):
            text = f"(lower({a.text}) = lower({b.text}))"
            return _negate(text, a, names, agg) if op == "!~" else Sql(text, "bool", names,
                                                                        aggregate=agg)
        if op == "matches regex":
            if not (b.is_const and isinstance(b.const, str)):
                raise semantic("matches regex takes a string literal", e.right.at)
            return Sql(f"({a.text} RLIKE {b.text})", "bool", names, aggregate=agg)
        return self._string_op(e, op, a, b, names, agg)

    def _arithmetic(self, e: ast.Binary, op: str, a: Sql, b: Sql) -> Sql:
        names, agg = a.names | b.names, a.aggregate or b.aggregate
        kinds = (a.kind, b.kind)
        if "timestamp" in kinds or "timespan" in kinds:
            if op not in ("+", "-") or (kinds == ("timespan", "timestamp") and op == "-"):
                raise semantic(f"'{op}' of {a.kind} and {b.kind}", e.at)
            if a.is_const and b.is_const:
                value = a.const + b.const if op == "+" else a.const - b.const
                kind = "timespan" if kinds == ("timespan", "timespan") else "timestamp"
                if kinds == ("timestamp", "timestamp"):
                    raise semantic("the difference of two datetimes (a timespan) is not "
                                   "supported", e.at)
                return literal(kind, value, e.at)
            if "timespan" in kinds and "timestamp" in kinds:
                ts, span = (a, b) if a.kind == "timestamp" else (b, a)
                if not span.is_const:
                    raise semantic("datetime arithmetic takes a constant timespan", e.at)
                us = span.const // 1_000
                sign = "-" if op == "-" else "+"
                return Sql(f"({ts.text} {sign} INTERVAL {us} MICROSECONDS)", "timestamp",
                           names, aggregate=agg)
            raise semantic(f"'{op}' of {a.kind} and {b.kind} is not supported", e.at)
        if a.is_const and b.is_const and isinstance(a.const, (int, float)) and isinstance(
                b.const, (int, float)) and op in "+-*":
            value = {"+": a.const + b.const, "-": a.const - b.const,
                     "*": a.const * b.const}[op]
            return literal("real" if isinstance(value, float) else "long", value, e.at)
        result: str | None = "real" if "real" in kinds else (
            "long" if set(kinds) <= NUMERIC else None)
        if op == "/" and result == "long":
            return Sql(f"({a.text} DIV {b.text})", "long", names, aggregate=agg)
        return Sql(f"({a.text} {op} {b.text})", result, names, aggregate=agg)

    def _string_op(self, e: ast.Binary, op: str, a: Sql, b: Sql, names, agg) -> Sql:
        negated = op.startswith("!")
        word = op.lstrip("!")
        if not (b.is_const and isinstance(b.const, str)):
            raise semantic(f"'{word}' takes a string literal on its right", e.right.at)
        needle: str = b.const
        if word in ("has", "has_cs"):
            text = _has(a.text, needle, case_sensitive=word == "has_cs")
        elif word in ("hasprefix", "hassuffix"):
            core = regex_literal(needle, caseless=True)
            pattern = _TERM_START + core if word == "hasprefix" else core + _TERM_END
            text = f"({a.text} RLIKE {quote_string(pattern)})"
        elif word.endswith("_cs"):
            text = _like(a.text, needle, word[:-3])
        else:
            core = regex_literal(needle, caseless=True)
            pattern = {"contains": core, "startswith": "^" + core,
                       "endswith": core + r"\z"}[word]
            text = f"({a.text} RLIKE {quote_string(pattern)})"
        if negated:
            return _negate(text, a, names, agg)
        return Sql(text, "bool", names, aggregate=agg)

    def _inlist(self, e: ast.InList, scope, aggregates) -> Sql:
        x = self.translate(e.operand, scope, aggregates=aggregates)
        values = [self.translate(v, scope, aggregates=aggregates) for v in e.values]
        names = x.names.union(*(v.names for v in values))
        if e.caseless:
            text = (f"(lower({x.text}) IN ("
                    + ", ".join(f"lower({v.text})" for v in values) + "))")
        else:
            text = f"({x.text} IN (" + ", ".join(_compared(x, v) for v in values) + "))"
        return _negate(text, x, names, x.aggregate) if e.negated else Sql(
            text, "bool", names, aggregate=x.aggregate)

    def _between(self, e: ast.Between, scope, aggregates) -> Sql:
        x = self.translate(e.operand, scope, aggregates=aggregates)
        lo = self.translate(e.low, scope, aggregates=aggregates)
        hi = self.translate(e.high, scope, aggregates=aggregates)
        if hi.kind == "timespan" and lo.kind == "timestamp":
            hi = self._arithmetic(ast.Binary(e.at, "+", e.low, e.high), "+", lo, hi)
        names = x.names | lo.names | hi.names
        text = f"({x.text} BETWEEN {_compared(x, lo)} AND {_compared(x, hi)})"
        if e.negated:
            return Sql(f"(NOT {text})", "bool", names, aggregate=x.aggregate)
        return Sql(text, "bool", names, aggregate=x.aggregate)

    def _call(self, e: ast.Call, scope, aggregates) -> Sql:
        if e.name in AGGREGATES:
            if not aggregates:
                raise semantic(f"the aggregation {e.name}() is only allowed in summarize",
                               e.at)
            args = [self._argument(a, scope) for a in e.args]
            return AGGREGATES[e.name](e, args)
        fn: Callable[..., Sql] | None = SCALARS.get(e.name)
        if fn is None:
            raise semantic(f"Unknown function: '{e.name}'", e.at)
        args = [self.translate(a, scope, aggregates=aggregates) for a in e.args]
        out = fn(self, e, args)
        if any(a.aggregate for a in args):
            return Sql(out.text, out.kind, out.names, out.const, aggregate=True)
        return out

    def _argument(self, a: ast.Expr, scope) -> Sql:
        if isinstance(a, ast.Star):
            return Sql("*", None)
        return self.translate(a, scope)


# ---- helpers ----------------------------------------------------------------------------------
def _compared(x: Sql, v: Sql) -> str:
    """`v` as compared with `x`: a dynamic path is text, so numbers and bools are written
    as Kusto would render them."""
    if x.kind == "dynamic" and v.is_const and isinstance(v.const, bool):
        return quote_string("true" if v.const else "false")
    return v.text


def _comparison(op: str, a: Sql, b: Sql, names, agg) -> Sql:
    sql_op = {"==": "=", "!=": "<>", "<>": "<>"}.get(op, op)
    left, right = a.text, b.text
    for x, y in ((a, b), (b, a)):
        if x.kind == "dynamic" and y.kind in NUMERIC:
            cast = f"try_cast({x.text} AS DOUBLE)"
            left, right = (cast, right) if x is a else (left, cast)
        elif x.kind == "dynamic" and y.is_const and isinstance(y.const, bool):
            lit = quote_string("true" if y.const else "false")
            left, right = (left, lit) if x is a else (lit, right)
    text = f"({left} {sql_op} {right})"
    if sql_op == "<>" and "string" in (a.kind, b.kind):
        col = a if a.kind == "string" and not a.is_const else b
        if not col.is_const:
            return Sql(f"({col.text} IS NULL OR {left} <> {right})", "bool", names,
                       aggregate=agg)
    return Sql(text, "bool", names, aggregate=agg)


def _negate(text: str, operand: Sql, names, agg) -> Sql:
    if operand.kind in ("string", "dynamic") and not operand.is_const:
        return Sql(f"({operand.text} IS NULL OR NOT {text})", "bool", names, aggregate=agg)
    return Sql(f"(NOT {text})", "bool", names, aggregate=agg)


def _has(column: str, needle: str, *, case_sensitive: bool) -> str:
    if len(needle) >= MIN_TOKEN_LEN and _TOKEN.match(needle):
        text = f"has({column}, {quote_string(needle)})"
        if case_sensitive:
            bounded = _TERM_START + regex_literal(needle, caseless=False) + _TERM_END
            text = f"({text} AND {column} RLIKE {quote_string(bounded)})"
        return text
    core = regex_literal(needle, caseless=not case_sensitive)
    return f"({column} RLIKE {quote_string(_TERM_START + core + _TERM_END)})"


def _like(column: str, needle: str, word: str) -> str:
    """The case-sensitive forms: LIKE when the needle has no LIKE metacharacter (`%`, `_`,
    or the escape `\\`), else Spark's `contains`/`startswith`/`endswith`, which take the
    needle as plain text (no LIKE escaping to get wrong)."""
    if any(c in needle for c in "%_\\"):
        fn = {"contains": "contains", "startswith": "startswith", "endswith": "endswith"}[word]
        return f"{fn}({column}, {quote_string(needle)})"
    pattern = {"contains": f"%{needle}%", "startswith": f"{needle}%",
               "endswith": f"%{needle}"}[word]
    return f"({column} LIKE {quote_string(pattern)})"


