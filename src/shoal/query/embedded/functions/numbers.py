"""Math functions and the operators `/`, DIV and % with Spark's meaning on the embedded
engine."""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.functions.decimals import arith_result, is_decimal_operation, rewrite_arith, vet_arith
from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPARK_ONLY, T, Function, NotLocal,
                                          call, case_when, cast_to, describe, family_of, fixed_type,
                                          not_identical, number_args, same_family, same_type,
                                          spark_type, widest)


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
    if is_decimal_operation(node):
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
    "round, bround": "Spark rounds the decimal form Java prints for a double (this JVM's "
                     "Double.toString is not always the shortest form), not proven equal",
    "pow, power, exp, ln, log, log10, log2": "Java's and the C library's results may "
                                             "differ in the last bit",
})
