"""The Spark type rules the embedded engine's allow-list applies, and the vetting toolkit.

`shoal.query.embedded.transpile` accepts a statement only where the embedded engine's answer
is certainly Spark's. The pieces every part of that check shares live here: the Spark type
of an expression (`spark_type`: sqlglot's annotation, except where Spark's own rules are
applied), the type families comparisons must agree on, `NotLocal` (why a statement goes to
Spark), the not-identical mark (a row DuckDB would answer differently hands the statement to
Spark at run time), small builders of DuckDB expressions, and the registry of vetted
functions (`FUNCTIONS`, filled by the family modules of `shoal.query.embedded.functions`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from shoal.format.shred import NOT_IDENTICAL_MARK
from shoal.query.planner import _timestamp_us_as_ns

T = exp.DataType.Type
NUMERIC = {T.INT: "number", T.BIGINT: "number", T.DOUBLE: "number", T.FLOAT: "number",
            T.SMALLINT: "number", T.TINYINT: "number"}
# Spark's TIMESTAMP is a zone-aware instant (sqlglot: TIMESTAMPTZ / TIMESTAMPLTZ).
TIMESTAMPS = (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ)
FAMILY = {**NUMERIC, T.DECIMAL: "decimal", T.VARCHAR: "string", T.TEXT: "string",
           T.BOOLEAN: "boolean", T.BINARY: "binary", T.VARBINARY: "binary", T.DATE: "date",
           **dict.fromkeys(TIMESTAMPS, "timestamp")}
ARROW_TYPES = {T.INT: pa.int32(), T.BIGINT: pa.int64(), T.DOUBLE: pa.float64(),
          T.FLOAT: pa.float32(), T.VARCHAR: pa.string(), T.TEXT: pa.string(),
          T.BOOLEAN: pa.bool_(), T.BINARY: pa.binary(), T.VARBINARY: pa.binary(),
          T.DATE: pa.date32(), **dict.fromkeys(TIMESTAMPS, pa.timestamp("us", tz="UTC"))}
# Spark's numeric widening (TypeCoercion): the wider of two is the later one here.
WIDENING = [T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.FLOAT, T.DOUBLE]
BYTE_TYPES = {"int_from_bytes": T.INT, "bigint_from_bytes": T.BIGINT,
               "double_from_bytes": T.DOUBLE}
# NOT_IDENTICAL_MARK: DuckDB raises it (`error()`) where a value would not be rendered as
# Spark renders it, as the scan does for a JSON path (`shoal.format.shred`); the engine
# then hands the statement to Spark.


class NotLocal(Exception):
    """The embedded engine must not answer this statement; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Function:
    """One Spark function the embedded engine answers: its names, how a call is vetted,
    its Spark result type, and the DuckDB expression with Spark's answer (None: DuckDB's
    own function already answers as Spark does). `note` is what docs/sql.md says."""
    names: str
    vet: Callable[[exp.Expr], None]
    result: Callable[[exp.Expr], exp.DType | None]
    rewrite: Callable[[exp.Expr, tuple], exp.Expr] | None
    note: str


# The vetted functions by sqlglot node type (and, for the functions sqlglot leaves
# anonymous, by name), the precision and scale of each decimal-typed node type, and the
# everyday functions left to Spark with the reason: all filled by the modules of
# `shoal.query.embedded.functions`.
FUNCTIONS: dict[type[exp.Expr], Function] = {}
ANONYMOUS: dict[str, Function] = {}
DECIMALS: dict[type[exp.Expr], Callable[[exp.Expr], tuple[int, int] | None]] = {}
SPARK_ONLY: dict[str, str] = {}
# Spark's other names of vetted functions that sqlglot reads as plain calls: the node each
# is read as before the statement is vetted (its arguments given).
SPELLINGS: dict[str, Callable[[list[exp.Expr]], exp.Expr | None]] = {}


def rule_for(node: exp.Expr) -> Function | None:
    """The registry entry vetting `node`, if any."""
    if isinstance(node, exp.Anonymous):
        return ANONYMOUS.get(str(node.this).lower())
    return FUNCTIONS.get(type(node))


def branches_of(node: exp.Expr) -> list[exp.Expr | None]:
    """The values a COALESCE, IF or CASE may answer with (a missing ELSE as None)."""
    if isinstance(node, exp.Coalesce):
        return [node.this, *node.expressions]
    if isinstance(node, exp.If):
        return [node.args.get("true"), node.args.get("false")]
    return [*(i.args.get("true") for i in node.args.get("ifs") or []),
            node.args.get("default")]


def spark_type(node: exp.Expr) -> exp.DType | None:
    """The Spark type of `node`: sqlglot's annotation, except where Spark's rules are
    applied here (literals, shoal's functions, the branches of COALESCE / CASE / IF)."""
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in BYTE_TYPES:
        return BYTE_TYPES[str(node.this).lower()]
    if isinstance(node, exp.Paren):
        return spark_type(node.this)
    rule = rule_for(node)
    if rule is not None:
        return rule.result(node)
    if isinstance(node, exp.Neg):
        return spark_type(node.this)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        a, b = node.this, node.expression
        if isinstance(a, exp.Interval) or isinstance(b, exp.Interval):   # a time moved
            return spark_type(b if isinstance(a, exp.Interval) else a)
        if node.type is None or node.type.this == T.UNKNOWN:   # an operand sqlglot can't type
            return widest([a, b]) if {spark_type(a), spark_type(b)} <= set(WIDENING) else None
    if isinstance(node, exp.TimestampTrunc):
        return T.TIMESTAMPTZ
    if isinstance(node, exp.Column) and not node.table:
        target = _select_alias(node)        # ORDER BY / GROUP BY naming a projection
        if target is not None:
            return spark_type(target)
    if isinstance(node, exp.Column) and node.table:
        source = _derived_column(node)      # a column of a subquery or a CTE
        if source is not None:
            return spark_type(source)
    if isinstance(node, exp.Literal) and not node.is_string:
        if re.fullmatch(r"\d*\.\d*", node.name):
            return T.DECIMAL           # Spark: 100.0 is DECIMAL(4,1), 1e3 a DOUBLE
        if not re.fullmatch(r"\d+", node.name):
            return T.DOUBLE if re.fullmatch(r"[\d.]+[eE][-+]?\d+", node.name) else None
        return T.INT if int(node.name) < 2**31 else T.BIGINT
    if isinstance(node, (exp.Coalesce, exp.Case, exp.If)):
        branches = branches_of(node)
        kinds = {spark_type(b) for b in branches if b is not None and not isinstance(b, exp.Null)}
        if len(kinds) == 1:
            return kinds.pop()
        known = [k for k in kinds if k in WIDENING]
        if kinds and len(known) == len(kinds):
            return max(known, key=WIDENING.index)
        return None
    t = node.type
    if t is None or t.this in (T.UNKNOWN, T.NULL):
        return None
    return t.this


def _select_alias(col: exp.Column) -> exp.Expr | None:
    select = col.find_ancestor(exp.Select)
    if select is None:
        return None
    for e in select.selects:
        if isinstance(e, exp.Alias) and e.alias == col.name:
            return e.this
    return None


def _derived_column(col: exp.Column) -> exp.Expr | None:
    """The expression behind `col` when its table is a subquery in FROM / JOIN or a CTE of
    an enclosing WITH (sqlglot types such columns only as far as its own rules go)."""
    select = col.find_ancestor(exp.Select)
    while select is not None:
        sources: list[exp.Expr] = []
        for key in ("from_", "from"):
            if isinstance(select.args.get(key), exp.From):
                sources.append(select.args[key].this)
        sources += [j.this for j in select.args.get("joins") or []]
        body: exp.Expr | None = next(
            (s.this for s in sources if isinstance(s, exp.Subquery) and s.alias == col.table),
            None)
        if body is None:
            with_ = select.args.get("with_") or select.args.get("with")
            ctes = with_.expressions if isinstance(with_, exp.With) else []
            body = next((c.this for c in ctes if c.alias == col.table), None)
        if body is not None:
            if not isinstance(body, exp.Select):     # a union's types widen over branches
                return None
            for e in body.selects:
                if e.alias_or_name == col.name:
                    return e.this if isinstance(e, exp.Alias) else e
            return None
        select = select.parent.find_ancestor(exp.Select) if select.parent else None
    return None


def family_of(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Null):
        return "null"
    t = spark_type(node)
    return FAMILY.get(t) if t is not None else None


def describe(node: exp.Expr) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "..."


def is_ts_literal(cast: exp.Cast) -> bool:
    return (isinstance(cast.this, exp.Literal) and cast.this.is_string
            and cast.to.is_type(*TIMESTAMPS))


def is_date_literal(cast: exp.Cast) -> bool:
    """`DATE 'yyyy-mm-dd'` with a year of four digits (both engines read it alike)."""
    return (isinstance(cast.this, exp.Literal) and cast.this.is_string
            and cast.to.is_type(T.DATE) and _DATE_TEXT.fullmatch(cast.this.name) is not None
            and _valid_date(cast.this.name))


_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")


def _valid_date(text: str) -> bool:
    from datetime import date

    try:
        return date.fromisoformat(text).year >= 1
    except ValueError:
        return False


def same_family(node: exp.Expr, a: exp.Expr, b: exp.Expr | None) -> None:
    if b is None:
        return
    fa, fb = family_of(a), family_of(b)
    if fa == "null" or fb == "null":
        return
    if {fa, fb} == {"timestamp", "string"}:
        lit = b if fa == "timestamp" else a
        if isinstance(lit, exp.Literal) and lit.is_string:
            if _timestamp_us_as_ns(lit.name) is None:
                raise NotLocal(f"the timestamp literal {lit.name!r} (not a form whose "
                               "reading is certain)")
            return
    if {fa, fb} == {"number", "decimal"}:
        number = a if fa == "number" else b
        if spark_type(number) not in INTEGERS and not decimal_fits_double(a if fa == "decimal"
                                                                          else b):
            raise NotLocal(f"{describe(node)} compares a wide decimal with a double")
        return
    if fa is None or fb is None or fa != fb:
        raise NotLocal(f"{describe(node)} compares {fa or 'an untyped value'} with "
                       f"{fb or 'an untyped value'} (Spark's implicit casts)")


INTEGERS = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT)
INT_LIMIT = 2**31 - 1


def not_identical(why: str) -> exp.Expr:
    """DuckDB's `error()` carrying the not-identical mark and why: the row is one the
    embedded engine would answer differently, so the statement goes to Spark."""
    return exp.Anonymous(this="error", expressions=[exp.Literal.string(
        f"{NOT_IDENTICAL_MARK}: {why}")])


def call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def cast_to(e: exp.Expr, to: str) -> exp.Expr:
    return exp.Cast(this=e, to=exp.DataType.build(to))


def case_when(when: exp.Expr, then: exp.Expr, default: exp.Expr) -> exp.Expr:
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=when, true=then)], default=default))


def int_literal(e: exp.Expr | None) -> int | None:
    """The value of an integer literal (`-2` included), else None."""
    if isinstance(e, exp.Paren):
        return int_literal(e.this)
    if isinstance(e, exp.Neg):
        v = int_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string and re.fullmatch(r"\d+", e.name):
        return int(e.name)
    return None


def operand_kinds(node: exp.Expr) -> tuple[exp.DType | None, exp.DType | None]:
    """The Spark types of a node's first two operands (a call's first two arguments)."""
    if isinstance(node, exp.Anonymous):
        args = list(node.expressions)
        first, second = ([*args, None, None])[:2]
        return (spark_type(first) if isinstance(first, exp.Expr) else None,
                spark_type(second) if isinstance(second, exp.Expr) else None)
    a, b = node.this, node.args.get("expression")
    return (spark_type(a) if isinstance(a, exp.Expr) else None,
            spark_type(b) if isinstance(b, exp.Expr) else None)


def widest(args: list[exp.Expr]) -> exp.DType | None:
    kinds = {spark_type(a) for a in args if not isinstance(a, exp.Null)}
    if len(kinds) == 1:
        return kinds.pop()
    if kinds and all(k in WIDENING for k in kinds):
        return max(kinds, key=lambda k: WIDENING.index(k) if k is not None else -1)
    families = {FAMILY.get(k) for k in kinds if k is not None}   # STRING, VARCHAR
    if families == {"string"}:
        return T.VARCHAR
    if families == {"timestamp"}:
        return T.TIMESTAMPTZ
    return None


def need(node: exp.Expr, arg: exp.Expr | None, family: str, what: str) -> None:
    if arg is None or isinstance(arg, exp.Null):
        return
    if family_of(arg) != family:
        raise NotLocal(f"{what}() on {describe(arg)} (only on {family}s locally)")


def vet_args(name: str, family: str, count: tuple[int, int] | None = None):
    """A vetting step: `count` (min, max) arguments when given, each of `family`."""
    def vet(node: exp.Expr) -> None:
        args = list(node.iter_expressions())
        if count is not None and not count[0] <= len(args) <= count[1]:
            raise NotLocal(f"{name}() with {len(args)} arguments")
        for a in args:
            need(node, a, family, name)
    return vet


def string_args(name: str, count: tuple[int, int] | None = None):
    return vet_args(name, "string", count)


def number_args(name: str, arity: int = 1):
    return vet_args(name, "number", (arity, arity))


def same_type(node: exp.Expr) -> exp.DType | None:
    return spark_type(node.this)


def fixed_type(t: exp.DType) -> Callable[[exp.Expr], exp.DType]:
    return lambda node: t


# Spark's decimal type of an integer operand beside a decimal: a literal takes the digits it
# has, any other integer the width of its type.
_INTEGER_DIGITS = {T.TINYINT: 3, T.SMALLINT: 5, T.INT: 10, T.BIGINT: 20}


def decimal_of(node: exp.Expr) -> tuple[int, int] | None:
    """Spark's (precision, scale) of a decimal-typed `node`, or of an integer `node` taken
    as a decimal beside one; None when not known here."""
    if isinstance(node, (exp.Paren, exp.Neg)):
        return decimal_of(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        m = re.fullmatch(r"(\d*)\.(\d*)", node.name)
        if m:
            scale = len(m[2])
            return max(len(str(int(m[1] + m[2] or "0"))), scale, 1), scale
        if re.fullmatch(r"\d+", node.name):
            return len(str(int(node.name))), 0
        return None
    if isinstance(node, exp.Column) and not node.table:
        target = _select_alias(node)
        if target is not None:
            return decimal_of(target)
    if isinstance(node, exp.Cast) and node.to.is_type(T.DECIMAL):
        params = [int(p.name) for p in node.to.expressions]    # Spark's default: (10, 0)
        return (params[0] if params else 10), (params[1] if len(params) > 1 else 0)
    rule = DECIMALS.get(type(node))
    if rule is not None:
        return rule(node)
    if isinstance(node, (exp.Min, exp.Max)):
        return decimal_of(node.this)
    if isinstance(node, (exp.Coalesce, exp.Case, exp.If)):
        branches = branches_of(node)
        kinds = {decimal_of(b) for b in branches if b is not None and not isinstance(b, exp.Null)}
        return kinds.pop() if len(kinds) == 1 else None
    t = spark_type(node)
    if t in _INTEGER_DIGITS:
        return _INTEGER_DIGITS[t], 0
    return None


def decimal_fits_double(node: exp.Expr) -> bool:
    """Whether Spark's and DuckDB's double of this decimal are certainly the same: both
    divide the unscaled value by a power of ten, exact below 2**53."""
    ps = decimal_of(node)
    return ps is not None and ps[0] <= 15
