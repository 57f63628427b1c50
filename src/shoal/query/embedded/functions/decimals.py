"""Decimal literals and `+ - * /` with Spark's decimal types on the embedded engine.

Spark types `100.0` as DECIMAL(4,1) and `0.95` as DECIMAL(2,2); an integer beside a decimal
becomes one (a literal with the digits it has, an INT as DECIMAL(10,0), a BIGINT as
DECIMAL(20,0)); a double beside a decimal makes the operation a double one. The result of
`+ - * /` on decimals has the precision and scale Spark's rules give it (capped at 38 digits,
the scale giving way down to 6), rounded half up; an overflow raises in Spark, so such a
row goes to Spark. DuckDB's own decimal division answers a double, so the quotient is
computed here on the unscaled integers.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from shoal.query.embedded.vetting import (DECIMALS, FUNCTIONS, INTEGERS, NOT_IDENTICAL_MARK,
                                          T, Function, NotLocal,
                                          call, case_when, cast_to, decimal_fits_double,
                                          decimal_of, describe, family_of, not_identical,
                                          spark_type, widest)

MAX_PRECISION = 38
_FLOATS = (T.DOUBLE, T.FLOAT)


def bounded(p: int, s: int) -> tuple[int, int]:
    """Spark's result type when precision passes 38: the integer digits are kept and the
    scale gives way, down to 6 (or the scale itself when smaller)."""
    if p <= MAX_PRECISION:
        return p, s
    return MAX_PRECISION, max(MAX_PRECISION - (p - s), min(s, 6))


def _operation(node: exp.Expr) -> str:
    names: dict[type[exp.Expr], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
    return names[type(node)]


def exact_type(node: exp.Expr) -> tuple[int, int] | None:
    """The Spark type of `a op b` on decimals before the cap at 38 digits."""
    a, b = decimal_of(node.this), decimal_of(node.expression)
    if a is None or b is None:
        return None
    (p1, s1), (p2, s2) = a, b
    op = _operation(node)
    if op in "+-":
        s = max(s1, s2)
        return max(p1 - s1, p2 - s2) + s + 1, s
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    s = max(6, s1 + p2 + 1)
    return p1 - s1 + s2 + s, s


def is_decimal_operation(node: exp.Expr) -> bool:
    """A decimal result: a decimal operand and no double one."""
    kinds = (spark_type(node.this), spark_type(node.expression))
    return T.DECIMAL in kinds and not any(k in _FLOATS for k in kinds)


def _arith_decimal(node: exp.Expr) -> tuple[int, int] | None:
    if not is_decimal_operation(node):
        return None
    t = exact_type(node)
    return bounded(*t) if t is not None else None


for _op in (exp.Add, exp.Sub, exp.Mul, exp.Div):
    DECIMALS[_op] = _arith_decimal


def arith_result(node: exp.Expr) -> exp.DType | None:
    kinds = (spark_type(node.this), spark_type(node.expression))
    if T.DECIMAL in kinds:
        return T.DOUBLE if any(k in _FLOATS for k in kinds) else T.DECIMAL
    if isinstance(node, exp.Div):
        return T.DOUBLE
    return widest([node.this, node.expression])


def vet_arith(node: exp.Expr) -> None:
    """Numbers (integers, doubles, decimals) on both sides; decimals only where the
    embedded engine computes Spark's exact answer."""
    name = _operation(node)
    for side in (node.this, node.expression):
        if family_of(side) not in ("number", "decimal"):
            raise NotLocal(f"arithmetic {name} on {describe(side)} (only on numbers locally)")
    kinds = (spark_type(node.this), spark_type(node.expression))
    if T.DECIMAL not in kinds:
        return
    if any(k in _FLOATS for k in kinds):
        dec = node.this if kinds[0] == T.DECIMAL else node.expression
        if not decimal_fits_double(dec):
            raise NotLocal(f"{describe(dec)} as a double (a decimal of more than 15 digits)")
        return
    t = exact_type(node)
    a, b = decimal_of(node.this), decimal_of(node.expression)
    if t is None or a is None or b is None:
        raise NotLocal(f"{describe(node)}: a decimal operand of unknown precision")
    (p1, s1), (p2, s2) = a, b
    p, s = bounded(*t)
    # The rewrite runs after the operands' own rewrites: it reads the types from here.
    node.meta[_TYPES] = (a, b, t, (p, s))
    if name in "+-" and t[0] >= MAX_PRECISION:
        raise NotLocal(f"{describe(node)}: a decimal sum of {t[0]} digits")
    if name == "*" and p1 + p2 > MAX_PRECISION:
        raise NotLocal(f"{describe(node)}: a decimal product of {p1 + p2} digits")
    if name == "/" and (s - s1 + s2 < 0 or p1 + s - s1 + s2 > MAX_PRECISION
                        or p2 > MAX_PRECISION - 1):
        raise NotLocal(f"{describe(node)}: a decimal quotient beyond 38 digits")


_TYPES = "shoal_decimal_types"


def _as_decimal(e: exp.Expr, kind: exp.DType | None, ps: tuple[int, int]) -> exp.Expr:
    return cast_to(e, f"DECIMAL({ps[0]}, {ps[1]})") if kind in INTEGERS else e


def _power(n: int) -> exp.Expr:
    return cast_to(exp.Literal.string("1" + "0" * n), "HUGEINT")


def _unscaled(e: exp.Expr, kind: exp.DType | None, ps: tuple[int, int]) -> exp.Expr:
    """The unscaled integer of a decimal (its digits without the point), as a HUGEINT."""
    if kind in INTEGERS:
        return cast_to(e, "HUGEINT")
    p, s = ps
    text = cast_to(cast_to(e, f"DECIMAL({p}, {s})"), "VARCHAR")
    return cast_to(call("replace", text, exp.Literal.string("."), exp.Literal.string("")),
                   "HUGEINT")


# Spark's decimal quotient on the unscaled integers n (the dividend's digits times the power
# of ten the result's scale asks for) and d, bound once each through DuckDB lambdas: half
# up, the sign of n/d, written out digit by digit as DECIMAL(p, s). Spark may round the
# quotient to 39 digits before rounding it to the scale: where that could tip a remainder
# just under one half to a half (counting the quotient's integer digits generously), the
# row is Spark's, as are a zero divisor and a quotient beyond the precision.
_QUOTIENT = """list_transform([{{'n': __n, 'd': __d}}], lambda v: list_transform([{{
  'q': abs(v.n) // abs(v.d), 'r': abs(v.n) % abs(v.d), 'ad': abs(v.d),
  'neg': (v.n < 0) <> (v.d < 0)}}], lambda w: list_transform([{{
  'aq': w.q + CASE WHEN 2 * w.r >= w.ad THEN 1 ELSE 0 END, 'r': w.r, 'ad': w.ad,
  'neg': w.neg}}], lambda u: CASE
  WHEN u.ad = 0 THEN error('{mark}: decimal division by zero')
  WHEN abs(2 * u.r - u.ad) > 0 AND CAST(abs(2 * u.r - u.ad) AS DOUBLE)
       * pow(10, {window} - length(CAST(u.aq // {unit} AS VARCHAR))) < CAST(u.ad AS DOUBLE)
    THEN error('{mark}: a decimal quotient Spark may round twice')
  WHEN u.aq >= {limit} THEN error('{mark}: a decimal quotient beyond its precision')
  ELSE CAST(CASE WHEN u.neg AND u.aq > 0 THEN '-' ELSE '' END
            || CAST(u.aq // {unit} AS VARCHAR) {fraction} AS DECIMAL({p}, {s})) END
  )[1])[1])[1]"""


def _hugeint(n: int) -> str:
    return f"CAST('{n}' AS HUGEINT)"


def _rewrite_divide_decimal(node: exp.Expr, kinds: tuple) -> exp.Expr:
    a, b, _, (p, s) = node.meta[_TYPES]
    s1, s2 = a[1], b[1]
    unit = _hugeint(10 ** s)
    fraction = (f"|| '.' || lpad(CAST(u.aq % {unit} AS VARCHAR), {s}, '0')" if s > 0 else "")
    sql = _QUOTIENT.format(mark=NOT_IDENTICAL_MARK, window=MAX_PRECISION - s, unit=unit,
                           limit=_hugeint(10 ** p), fraction=fraction, p=p, s=s)
    tree = sqlglot.parse_one(sql, read="duckdb")
    n = exp.Mul(this=_unscaled(node.this.copy(), kinds[0], a),
                expression=cast_to(exp.Literal.string(str(10 ** (s - s1 + s2))), "HUGEINT"))
    d = _unscaled(node.expression.copy(), kinds[1], b)
    for col in list(tree.find_all(exp.Column)):
        if col.name == "__n":
            col.replace(exp.Paren(this=n))
        elif col.name == "__d":
            col.replace(exp.Paren(this=d))
    return exp.Paren(this=tree)


def rewrite_arith(node: exp.Expr, kinds: tuple) -> exp.Expr:
    """Spark's answer for `a op b` where an operand is a decimal (else `node` as it is)."""
    if T.DECIMAL not in kinds:
        return node.copy()
    if any(k in _FLOATS for k in kinds):
        return type(node)(this=cast_to(node.this.copy(), "DOUBLE"),
                          expression=cast_to(node.expression.copy(), "DOUBLE"))
    if isinstance(node, exp.Div):
        return _rewrite_divide_decimal(node, kinds)
    ta, tb, t, (p, s) = node.meta[_TYPES]
    a = _as_decimal(node.this.copy(), kinds[0], ta)
    b = _as_decimal(node.expression.copy(), kinds[1], tb)
    if isinstance(node, exp.Mul):
        r: exp.Expr = exp.Mul(this=a, expression=b)
        if t[0] > MAX_PRECISION:      # the scale gave way: half up
            r = call("round", r, exp.Literal.number(s))
            return case_when(exp.GTE(this=call("abs", r.copy()),
                                     expression=cast_to(exp.Literal.string(
                                         "1" + "0" * (p - s)), "DECIMAL(38, 0)")),
                             not_identical("a decimal product beyond its precision"),
                             cast_to(r, f"DECIMAL({p}, {s})"))
        return cast_to(r, f"DECIMAL({p}, {s})")
    a = cast_to(a, f"DECIMAL({p}, {s})")
    b = cast_to(b, f"DECIMAL({p}, {s})")
    return cast_to(type(node)(this=a, expression=b), f"DECIMAL({p}, {s})")


NOTE = ("Spark's decimal types (literals, integers beside decimals, the result's precision "
        "and scale, half-up rounding); a double operand makes it a double; an overflow or a "
        "zero divisor goes to Spark")

FUNCTIONS.update({
    exp.Add: Function("+", vet_arith, arith_result, rewrite_arith, NOTE),
    exp.Sub: Function("-", vet_arith, arith_result, rewrite_arith, NOTE),
    exp.Mul: Function("*", vet_arith, arith_result, rewrite_arith, NOTE),
})
