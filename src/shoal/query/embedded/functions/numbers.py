"""Math functions and the operators `/`, DIV and % with Spark's meaning on the embedded
engine."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from shoal.query.embedded.functions.decimals import arith_result, rewrite_arith, vet_arith
from shoal.query.embedded.vetting import (ANONYMOUS, DECIMALS, FUNCTIONS, INTEGERS,
                                          NOT_IDENTICAL_MARK, SPARK_ONLY, T, Function, NotLocal,
                                          call, case_when, cast_to, decimal_of, describe,
                                          family_of, fixed_type, int_literal, not_identical,
                                          number_args, same_family, same_type, spark_type,
                                          WIDENING, widest)


def _rewrite_ceil_floor(fn: str):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        x = node.this
        if kinds[0] in INTEGERS:
            return cast_to(x, "BIGINT")
        # Spark answers a bigint; past its range (and NaN) the answers differ: Spark's.
        out = exp.Not(this=exp.Paren(this=exp.Between(
            this=x.copy(), low=exp.Literal.number("-9.2e18"),
            high=exp.Literal.number("9.2e18"))))
        return case_when(out, not_identical(f"{fn}() beyond bigint"),
                         cast_to(call(fn, x), "BIGINT"))
    return rewrite


def _rewrite_sign(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this
    if kinds[0] in INTEGERS:
        return cast_to(call("sign", x), "DOUBLE")
    # Java's signum keeps -0.0 and NaN; DuckDB's sign answers 0 for both.
    keep = exp.Or(this=exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                  expression=call("isnan", x.copy()))
    return case_when(keep, cast_to(x.copy(), "DOUBLE"), cast_to(call("sign", x), "DOUBLE"))


def _rewrite_sqrt(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this       # Spark: NaN below zero; DuckDB raises
    return case_when(exp.LT(this=x.copy(), expression=exp.Literal.number(0)),
                 cast_to(exp.Literal.string("NaN"), "DOUBLE"), call("sqrt", cast_to(x, "DOUBLE")))


def _vet_least(node: exp.Expr) -> None:
    args = [node.this, *node.expressions]
    if len(args) < 2:
        raise NotLocal("least/greatest of one value")
    for a in args[1:]:
        same_family(node, args[0], a)
    if family_of(args[0]) not in ("number", "string", "timestamp"):
        raise NotLocal(f"least/greatest of {describe(args[0])}")
    if widest(args) is None:
        raise NotLocal("least/greatest over mixed types")


def _vet_binary_numbers(name: str, integers: bool = False):
    def vet(node: exp.Expr) -> None:
        for side in (node.this, node.expression):
            if family_of(side) != "number" or (integers and spark_type(side) not in INTEGERS):
                raise NotLocal(f"{name} on {describe(side)} (only on "
                               f"{'integers' if integers else 'numbers'} locally)")
    return vet


def _zero_divisor(node: exp.Expr, answer: exp.Expr, what: str) -> exp.Expr:
    # Spark (ANSI) raises on a zero divisor, DuckDB answers null: Spark's to say.
    return case_when(exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(0)),
                 not_identical(f"{what} by zero"), answer)


def _vet_divide(node: exp.Expr) -> None:
    if T.DECIMAL in (spark_type(node.this), spark_type(node.expression)):
        vet_arith(node)
        return
    _vet_binary_numbers("/")(node)


def _rewrite_divide(node: exp.Expr, kinds: tuple) -> exp.Expr:
    if T.DECIMAL in kinds and T.DOUBLE not in kinds:
        return rewrite_arith(node, kinds)
    q = exp.Div(this=cast_to(node.this.copy(), "DOUBLE"),
                expression=cast_to(node.expression.copy(), "DOUBLE"))
    return _zero_divisor(node, q, "division")


def _rewrite_intdiv(node: exp.Expr, kinds: tuple) -> exp.Expr:
    q = exp.IntDiv(this=cast_to(node.this.copy(), "BIGINT"),
                   expression=cast_to(node.expression.copy(), "BIGINT"))
    return _zero_divisor(node, q, "div")


def _rewrite_mod(node: exp.Expr, kinds: tuple) -> exp.Expr:
    r: exp.Expr = exp.Mod(this=node.this.copy(), expression=node.expression.copy())
    if kinds[0] in INTEGERS and kinds[1] in INTEGERS:
        # Java answers 0 for MIN % -1, DuckDB raises an overflow.
        r = case_when(exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(-1)),
                  exp.Sub(this=node.this.copy(), expression=node.this.copy()), r)
    return _zero_divisor(node, r, "remainder")


FUNCTIONS.update({
    exp.Abs: Function("abs", number_args("abs"), same_type, None,
                      "an overflow (abs of the smallest integer) raises in both"),
    exp.Ceil: Function("ceil, ceiling", number_args("ceil"), fixed_type(T.BIGINT),
                       _rewrite_ceil_floor("ceil"),
                       "bigint answer; without a scale; a double beyond bigint or NaN goes "
                       "to Spark"),
    exp.Floor: Function("floor", number_args("floor"), fixed_type(T.BIGINT),
                        _rewrite_ceil_floor("floor"),
                        "bigint answer; without a scale; a double beyond bigint or NaN goes "
                        "to Spark"),
    exp.Sign: Function("sign, signum", number_args("sign"), fixed_type(T.DOUBLE),
                       _rewrite_sign, "double answer; keeps -0.0 and NaN as Java does"),
    exp.Sqrt: Function("sqrt", number_args("sqrt"), fixed_type(T.DOUBLE), _rewrite_sqrt,
                       "NaN below zero, as Spark"),
    exp.Least: Function("least", _vet_least, lambda n: widest([n.this, *n.expressions]),
                        None, "nulls skipped; NaN above every number"),
    exp.Greatest: Function("greatest", _vet_least,
                           lambda n: widest([n.this, *n.expressions]), None,
                           "nulls skipped; NaN above every number"),
    exp.Div: Function("/", _vet_divide, arith_result, _rewrite_divide,
                      "a double answer, or Spark's decimal quotient where an operand is a "
                      "decimal (half up); a zero divisor goes to Spark (which raises)"),
    exp.IntDiv: Function("div", _vet_binary_numbers("DIV", integers=True), fixed_type(T.BIGINT),
                         _rewrite_intdiv,
                         "integers, bigint answer; a zero divisor goes to Spark"),
    exp.Mod: Function("%, mod", _vet_binary_numbers("%"),
                      lambda n: widest([n.this, n.expression]), _rewrite_mod,
                      "sign of the dividend; a zero divisor goes to Spark"),
})

SPARK_ONLY.update({
    "pow, power, exp, ln, log, log10, log2": "Spark computes them with Java's StrictMath "
                                             "(fdlibm), DuckDB with the C library: over 2.6 "
                                             "million generated arguments 0.5-4% of the "
                                             "answers differ in the last bit (log2 30%)",
})


# ---- round and bround -------------------------------------------------------------------------
# Spark rounds a double through the decimal Java prints for it (Double.toString), half up
# (round) or half even (bround), and answers the double of that decimal. DuckDB prints a
# double's shortest decimal; the two print the same decimal for every double measured below
# 2**54 (millions of generated doubles against this JVM), and from 2**52 on a double is an
# integer, which rounding to a scale of zero or more keeps. So a double below 2**52 is
# rounded here through its shortest decimal, one from 2**52 on is kept, and one from 1e16
# on with a negative scale goes to Spark. A decimal is rounded as a decimal; an integer with
# a negative scale on its integers, an overflow going to Spark.
_ODD = "('1', '3', '5', '7', '9')"
_ROUNDED, _KIND = "shoal_rounded_type", "shoal_rounded_kind"


def _round_parts(node: exp.Expr) -> tuple[exp.Expr, exp.Expr | None]:
    if isinstance(node, exp.Anonymous):
        args = list(node.expressions)
        return args[0], (args[1] if len(args) > 1 else None)
    return node.this, node.args.get("decimals")


def _round_scale(node: exp.Expr) -> int:
    d = _round_parts(node)[1]
    v = int_literal(d) if d is not None else 0
    assert v is not None        # vetted
    return v


def _vet_round(name: str):
    def vet(node: exp.Expr) -> None:
        if isinstance(node, exp.Anonymous) and not 1 <= len(node.expressions) <= 2:
            raise NotLocal(f"{name}() with {len(node.expressions)} arguments")
        if isinstance(node, exp.Round) and node.args.get("truncate") is not None:
            raise NotLocal(f"{name}() with a third argument")
        x, d = _round_parts(node)
        scale = int_literal(d) if d is not None else 0
        if scale is None:
            raise NotLocal(f"{name}() with a scale that is not an integer literal")
        kind = spark_type(x)
        node.meta[_KIND] = kind           # read after x is rewritten
        if kind in INTEGERS:
            if scale < -18:
                raise NotLocal(f"{name}() to {scale} digits")
            return
        if kind == T.DOUBLE:
            if not (0 if name == "bround" else -15) <= scale <= 20:
                raise NotLocal(f"{name}() of a double to {scale} digits")
            return
        if kind == T.DECIMAL:
            ps = decimal_of(x)
            if ps is None or not 0 <= scale < ps[1]:
                raise NotLocal(f"{name}() of {describe(x)} to {scale} digits")
            node.meta[_ROUNDED] = _round_decimal_type(node)    # read after x is rewritten
            return
        raise NotLocal(f"{name}() of {describe(x)} (only of integers, doubles and decimals "
                       "locally)")
    return vet


def _round_result(node: exp.Expr) -> exp.DType | None:
    kind = spark_type(_round_parts(node)[0])
    return kind if kind in (*INTEGERS, T.DOUBLE, T.DECIMAL) else None


def _round_decimal_type(node: exp.Expr) -> tuple[int, int] | None:
    if isinstance(node, exp.Anonymous) and str(node.this).lower() != "bround":
        return None
    x, d = _round_parts(node)
    ps = decimal_of(x)
    scale = int_literal(d) if d is not None else 0
    if ps is None or scale is None or spark_type(x) != T.DECIMAL:
        return None
    return min(ps[0] - ps[1] + scale + 1, 38), scale


DECIMALS[exp.Round] = _round_decimal_type
DECIMALS[exp.Anonymous] = _round_decimal_type


def _decimal_round_sql(e: str, d: int, even: bool) -> str:
    """DuckDB SQL rounding the decimal `e` (of a scale above `d`) half up or half even."""
    if not even:
        return f"round({e}, {d})"
    half = "0." + "0" * d + "5" if d > 0 else "0.5"
    unit = "0." + "0" * (d - 1) + "1" if d > 0 else "1"
    return (f"list_transform([{{'e': {e}, 'r': round({e}, {d})}}], lambda z: CASE "
            f"WHEN abs(z.e - z.r) = CAST('{half}' AS DECIMAL(38, {d + 1})) "
            f"AND right(CAST(z.r AS VARCHAR), 1) IN {_ODD} "
            f"THEN CAST(z.r - sign(z.e) * CAST('{unit}' AS DECIMAL(38, {d})) AS DECIMAL(38, {d})) "
            f"ELSE CAST(z.r AS DECIMAL(38, {d})) END)[1]")


def _bind(template: str, x: exp.Expr) -> exp.Expr:
    tree = sqlglot.parse_one(template, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name == "__x":
            col.replace(exp.Paren(this=x.copy()))
    return exp.Paren(this=tree)


def _rewrite_round(even: bool):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        x, _ = _round_parts(node)
        d = _round_scale(node)
        kind = node.meta[_KIND]
        if kind in INTEGERS:
            if d >= 0:
                return x.copy()
            m = 10 ** -d
            bump = ("2 * v.r > v.m OR (2 * v.r = v.m AND v.q % 2 = 1)" if even
                    else "2 * v.r >= v.m")
            sql_type = {T.TINYINT: "TINYINT", T.SMALLINT: "SMALLINT", T.INT: "INTEGER",
                        T.BIGINT: "BIGINT"}[kind]
            bits = {T.TINYINT: 7, T.SMALLINT: 15, T.INT: 31, T.BIGINT: 63}[kind]
            template = (
                f"list_transform([{{'q': abs(CAST(__x AS HUGEINT)) // {m}, "
                f"'r': abs(CAST(__x AS HUGEINT)) % {m}, 'm': CAST('{m}' AS HUGEINT), "
                f"'s': sign(__x)}}], lambda v: list_transform([v.s * (v.q + CASE WHEN {bump} "
                f"THEN 1 ELSE 0 END) * v.m], lambda w: CASE WHEN w >= {2 ** bits} OR w < "
                f"-{2 ** bits} THEN error('{NOT_IDENTICAL_MARK}: round() beyond the "
                f"integer type') ELSE CAST(w AS {sql_type}) END)[1])[1]")
            return _bind(template, x.copy())
        if kind == T.DECIMAL:
            p, s = node.meta[_ROUNDED]
            return cast_to(_bind(_decimal_round_sql("__x", d, even), x.copy()),
                           f"DECIMAL({p}, {s})")
        shortest = "CAST(CAST(v AS VARCHAR) AS DECIMAL(38, {}))"

        def through(scale: int) -> str:
            return f"CAST(CAST({_decimal_round_sql(shortest.format(scale), d, even)} " \
                   "AS VARCHAR) AS DOUBLE)"
        big = "v" if d >= 0 else (
            f"CASE WHEN abs(v) >= CAST('1e16' AS DOUBLE) THEN error('{NOT_IDENTICAL_MARK}: "
            f"round() of a double from 1e16 on to a negative scale') ELSE {through(16)} END")
        small = (f"WHEN abs(v) < CAST('1e-{d + 1}' AS DOUBLE) THEN CAST(0 AS DOUBLE) "
                 f"WHEN abs(v) < 1 THEN {through(d + 17)} " if d >= 0 else
                 f"WHEN abs(v) < CAST('1e{-d - 1}' AS DOUBLE) THEN CAST(0 AS DOUBLE) ")
        template = (f"list_transform([__x], lambda v: CASE WHEN isnan(v) OR isinf(v) THEN v "
                    f"WHEN abs(v) >= CAST('4503599627370496' AS DOUBLE) THEN {big} "
                    f"{small}ELSE {through(16)} END)[1]")
        return _bind(template, cast_to(x.copy(), "DOUBLE"))
    return rewrite


FUNCTIONS[exp.Round] = Function(
    "round", _vet_round("round"), _round_result, _rewrite_round(even=False),
    "half up; a double through the decimal Java prints for it (its shortest form below "
    "2**54); an integer stays an integer, a decimal gets Spark's decimal type; an overflow "
    "goes to Spark")
ANONYMOUS["bround"] = Function(
    "bround", _vet_round("bround"), _round_result, _rewrite_round(even=True),
    "half even, otherwise as round; a double to a negative scale goes to Spark")


# ---- pmod -------------------------------------------------------------------------------------
def _vet_pmod(node: exp.Expr) -> None:
    args = list(node.expressions)
    if len(args) != 2:
        raise NotLocal(f"pmod() with {len(args)} arguments")
    for a in args:
        if family_of(a) != "number":
            raise NotLocal(f"pmod() of {describe(a)} (only of integers and doubles locally)")
    if widest(args) is None:
        raise NotLocal("pmod() over mixed types")


def _rewrite_pmod(node: exp.Expr, kinds: tuple) -> exp.Expr:
    a, n = node.expressions
    # The operands' types as vetted (an operand may itself be rewritten by now).
    known = [k for k in kinds if k is not None]
    kind = (max(known, key=WIDENING.index) if known and all(k in WIDENING for k in known)
            else widest([a, n]))
    assert kind is not None     # vetted
    integral = kind in INTEGERS
    # Java: r = a % n; r < 0 ? (r + n) % n : r. Integers: MIN % -1 is 0, and r + n may
    # wrap below the smallest integer for a divisor near it: Spark's to answer.
    low = {T.INT: -(2 ** 30), T.BIGINT: -(2 ** 62), T.SMALLINT: -(2 ** 14),
           T.TINYINT: -(2 ** 6)}.get(kind)
    guard = (f"WHEN v.n < {low} THEN error('{NOT_IDENTICAL_MARK}: pmod() by a divisor "
             "near the smallest integer') WHEN v.n = -1 THEN v.a - v.a " if integral else "")
    template = (f"list_transform([{{'a': __a, 'n': __n}}], lambda v: CASE WHEN v.n = 0 THEN "
                f"error('{NOT_IDENTICAL_MARK}: pmod() by zero') {guard}"
                "WHEN v.a % v.n < 0 THEN ((v.a % v.n) + v.n) % v.n ELSE v.a % v.n END)[1]")
    tree = sqlglot.parse_one(template, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name in ("__a", "__n"):
            col.replace(exp.Paren(this=a.copy() if col.name == "__a" else n.copy()))
    sql_type = {T.INT: "INTEGER", T.BIGINT: "BIGINT", T.DOUBLE: "DOUBLE", T.SMALLINT: "SMALLINT",
                T.TINYINT: "TINYINT", T.FLOAT: "FLOAT"}[kind]
    return cast_to(exp.Paren(this=tree), sql_type)


ANONYMOUS["pmod"] = Function("pmod", _vet_pmod, lambda n: widest(list(n.expressions)),
                             _rewrite_pmod,
                             "integers and doubles; the sign of the divisor; a zero divisor "
                             "goes to Spark")
