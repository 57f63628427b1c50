"""CAST with Spark's ANSI meaning on the embedded engine.

Spark (ANSI mode) raises on a value a cast cannot read (`CAST('1.5' AS INT)`, a double
beyond INT), where DuckDB would raise another error or round; and it prints values in
Java's forms (`1.0`, `NaN`, `2024-02-29 01:02:03.5`). The everyday casts run here: each
value whose reading or printing is certainly Spark's is answered, any other row goes to
Spark (which answers or raises). `try_cast` and the casts not listed stay on Spark.
"""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, TIMESTAMPS, T,
                                          Function, NotLocal, call, case_when, cast_to,
                                          decimal_fits_double, describe, is_ts_literal,
                                          not_identical, spark_type)

_STRINGS = (T.VARCHAR, T.TEXT)
_INT_RANGE = {T.TINYINT: 2**7, T.SMALLINT: 2**15, T.INT: 2**31, T.BIGINT: 2**63}
_DUCK = {T.TINYINT: "TINYINT", T.SMALLINT: "SMALLINT", T.INT: "INTEGER", T.BIGINT: "BIGINT"}
# What Spark reads as a boolean (case aside, spaces around).
_TRUE, _FALSE = ("t", "true", "y", "yes", "1"), ("f", "false", "n", "no", "0")
# Strings both engines read as the same double: Java's parseDouble and DuckDB's reader both
# round correctly; no spaces, signs only in front, no overflow.
_DOUBLE_TEXT = r"^-?[0-9]{1,200}(\.[0-9]{1,200})?([eE][-+]?[0-9]{1,2})?$"
_INT_TEXT = r"^ *[+-]?[0-9]{1,18} *$"


def _target(node: exp.Expr) -> exp.DType:
    return node.args["to"].this


def _source(node: exp.Expr) -> exp.DType | None:
    return spark_type(node.this)


def _vet_cast(node: exp.Expr) -> None:
    if node.args.get("safe"):
        raise NotLocal("try_cast (left to Spark)")
    if isinstance(node, exp.Cast) and is_ts_literal(node):
        return
    to, src = _target(node), _source(node)
    if isinstance(node.this, exp.Null):
        raise NotLocal("CAST of NULL")
    ok = False
    if to in _STRINGS:
        ok = src in (*_STRINGS, *INTEGERS, T.BOOLEAN, T.DOUBLE, *TIMESTAMPS)
    elif to == T.DOUBLE:
        ok = src in (*INTEGERS, T.DOUBLE, T.BOOLEAN, *_STRINGS) or (
            src == T.DECIMAL and decimal_fits_double(node.this))
    elif to in _INT_RANGE:
        ok = src in (*INTEGERS, T.DOUBLE, T.BOOLEAN, *_STRINGS)
    elif to == T.BOOLEAN:
        ok = src in (*INTEGERS, T.BOOLEAN, *_STRINGS)
    elif to == T.DECIMAL:
        ok = src in INTEGERS and len(node.args["to"].expressions) == 2
    if not ok:
        raise NotLocal(f"CAST ({describe(node)}): a cast whose ANSI reading or printing is "
                       "not reproduced locally")


def _double_text(x: exp.Expr) -> exp.Expr:
    """Java's Double.toString for x: plain from 1e-3 up to 1e7 (DuckDB's shortest form
    there, which Java prints too); NaN and the infinities in Java's words; any other value
    is Spark's to print (Java's scientific form)."""
    v = x.copy()
    return exp.Paren(this=exp.Case(ifs=[
        exp.If(this=call("isnan", v.copy()), true=exp.Literal.string("NaN")),
        exp.If(this=call("isinf", v.copy()), true=case_when(
            exp.GT(this=v.copy(), expression=exp.Literal.number(0)),
            exp.Literal.string("Infinity"), exp.Literal.string("-Infinity"))),
        exp.If(this=exp.EQ(this=v.copy(), expression=exp.Literal.number(0)),
               true=cast_to(v.copy(), "VARCHAR")),
        exp.If(this=exp.Not(this=exp.Paren(this=exp.And(
            this=exp.GTE(this=call("abs", v.copy()),
                         expression=cast_to(exp.Literal.string("0.001"), "DOUBLE")),
            expression=exp.LT(this=call("abs", v.copy()),
                              expression=cast_to(exp.Literal.string("1e7"), "DOUBLE"))))),
               true=not_identical("a double Java prints in its scientific form"))],
        default=cast_to(v, "VARCHAR")))


def _timestamp_text(x: exp.Expr) -> exp.Expr:
    """Spark's text of a timestamp: yyyy-MM-dd HH:mm:ss and the fraction without its
    trailing zeros; years outside 1000..9999 are Spark's to print."""
    micros = call("microsecond", x.copy())      # seconds * 1e6 + micros within the minute
    frac = exp.Mod(this=micros, expression=exp.Literal.number(1_000_000))
    fraction = case_when(
        exp.EQ(this=frac.copy(), expression=exp.Literal.number(0)), exp.Literal.string(""),
        exp.DPipe(this=exp.Literal.string("."), expression=call(
            "rtrim", call("lpad", cast_to(frac.copy(), "VARCHAR"), exp.Literal.number(6),
                          exp.Literal.string("0")), exp.Literal.string("0"))))
    text = exp.DPipe(this=call("strftime", x.copy(), exp.Literal.string("%Y-%m-%d %H:%M:%S")),
                     expression=fraction)
    year = call("year", x.copy())
    return case_when(exp.Not(this=exp.Paren(this=exp.Between(
        this=year, low=exp.Literal.number(1000), high=exp.Literal.number(9999)))),
        not_identical("a timestamp year Spark prints with a sign or padding"), text)


def _int_text(x: exp.Expr, to: exp.DType) -> exp.Expr:
    limit = _INT_RANGE[to]
    trimmed = call("trim", x.copy(), exp.Literal.string(" "))
    wide = cast_to(trimmed.copy(), "HUGEINT")
    bad = exp.Or(this=exp.Not(this=call("regexp_matches", x.copy(),
                                        exp.Literal.string(_INT_TEXT))),
                 expression=exp.Or(this=exp.GTE(this=wide.copy(),
                                                expression=exp.Literal.number(limit)),
                                   expression=exp.LT(this=wide.copy(),
                                                     expression=exp.Literal.number(-limit))))
    # CASE runs the cast only where the text is digits.
    return exp.Paren(this=exp.Case(ifs=[
        exp.If(this=exp.Not(this=call("regexp_matches", x.copy(),
                                      exp.Literal.string(_INT_TEXT))),
               true=not_identical("text Spark reads as an integer otherwise, or not")),
        exp.If(this=exp.Paren(this=bad), true=not_identical("an integer beyond its type"))],
        default=cast_to(trimmed, _DUCK[to])))


def _rewrite_cast(node: exp.Expr, kinds: tuple) -> exp.Expr:
    if isinstance(node, exp.Cast) and is_ts_literal(node):
        return node.copy()
    to, src, x = _target(node), kinds[0], node.this.copy()
    if to in _STRINGS:
        if src in _STRINGS:
            return x
        if src == T.DOUBLE:
            return _double_text(x)
        if src in TIMESTAMPS:
            return _timestamp_text(x)
        return cast_to(x, "VARCHAR")
    if to == T.DOUBLE:
        if src in _STRINGS:
            return case_when(exp.Not(this=call("regexp_matches", x.copy(),
                                               exp.Literal.string(_DOUBLE_TEXT))),
                             not_identical("text Spark reads as a double otherwise, or not"),
                             cast_to(x, "DOUBLE"))
        return cast_to(x, "DOUBLE")
    if to in _INT_RANGE:
        limit = _INT_RANGE[to]
        if src in _STRINGS:
            return _int_text(x, to)
        if src == T.DOUBLE:
            out: exp.Expr = exp.Not(this=exp.Paren(this=exp.And(
                this=exp.GT(this=x.copy(), expression=cast_to(exp.Literal.string(
                    str(-limit - 1)), "DOUBLE")),
                expression=exp.LT(this=x.copy(), expression=cast_to(exp.Literal.string(
                    str(limit)), "DOUBLE")))))
            return case_when(out, not_identical("a double beyond the integer type (or NaN)"),
                             cast_to(call("trunc", x), _DUCK[to]))
        if src in INTEGERS and _INT_RANGE.get(src, 0) > limit:
            wide: exp.Expr = exp.Or(this=exp.GTE(this=x.copy(),
                                                 expression=exp.Literal.number(limit)),
                                    expression=exp.LT(this=x.copy(),
                                                      expression=exp.Literal.number(-limit)))
            return case_when(wide, not_identical("an integer beyond the narrower type"),
                             cast_to(x, _DUCK[to]))
        return cast_to(x, _DUCK[to])
    if to == T.BOOLEAN:
        if src in _STRINGS:
            word = call("lower", call("trim", x.copy(), exp.Literal.string(" ")))
            return exp.Paren(this=exp.Case(ifs=[
                exp.If(this=exp.Is(this=x.copy(), expression=exp.Null()), true=exp.Null()),
                exp.If(this=exp.In(this=word.copy(), expressions=[
                    exp.Literal.string(w) for w in _TRUE]), true=exp.Boolean(this=True)),
                exp.If(this=exp.In(this=word, expressions=[
                    exp.Literal.string(w) for w in _FALSE]), true=exp.Boolean(this=False))],
                default=not_identical("text Spark reads as a boolean otherwise, or not")))
        return cast_to(x, "BOOLEAN")
    # An integer as DECIMAL(p, s): Spark raises where it does not fit.
    p, s = (int(e.name) for e in node.args["to"].expressions)
    limit_text = "1" + "0" * (p - s)
    big = exp.GTE(this=call("abs", cast_to(x.copy(), "HUGEINT")),
                  expression=cast_to(exp.Literal.string(limit_text), "HUGEINT"))
    return case_when(big, not_identical("an integer beyond the decimal's precision"),
                     cast_to(x, f"DECIMAL({p}, {s})"))


def _cast_result(node: exp.Expr) -> exp.DType | None:
    to = _target(node)
    return T.VARCHAR if to in _STRINGS else (T.TIMESTAMPTZ if to in TIMESTAMPS else to)


NOTE = ("to string (integers, booleans, doubles from 1e-3 to 1e7 in Java's form, NaN, "
        "timestamps), to double, int, bigint, boolean (from text Spark reads the same way) "
        "and to decimal (from integers); any other value goes to Spark, which raises where "
        "ANSI says so")

FUNCTIONS[exp.TryCast] = Function("cast", _vet_cast, _cast_result, _rewrite_cast, NOTE)
FUNCTIONS[exp.Cast] = FUNCTIONS[exp.TryCast]
