"""Aggregate functions with Spark's meaning and Spark's result types on the embedded engine:
count (bigint), sum (bigint over integers, double over doubles), avg (double), min / max and
the boolean aggregates. The statistical aggregates (percentiles, variances, distinct-count
estimates) and the rules they answer by are in `shoal.query.embedded.functions.statistics`.
"""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPARK_ONLY, SPELLINGS, T, Function,
                                          NotLocal,
                                          describe, family_of,
                                          fixed_type, same_type, spark_type)



def _vet_count(node: exp.Expr) -> None:
    arg = node.this
    if isinstance(arg, exp.Distinct) and len(arg.expressions) != 1:
        raise NotLocal("count(DISTINCT ...) over several columns")
    if node.expressions:
        raise NotLocal("count() of several values")


def _vet_number_aggregate(name: str):
    def vet(node: exp.Expr) -> None:
        arg = node.this
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise NotLocal(f"{name}(DISTINCT ...) over several columns")
            arg = arg.expressions[0]
        if family_of(arg) != "number":
            raise NotLocal(f"{name}() over {describe(arg)}")
    return vet


def _argument(node: exp.Expr) -> exp.Expr:
    arg = node.this
    return arg.expressions[0] if isinstance(arg, exp.Distinct) else arg


def _sum_type(node: exp.Expr) -> exp.DType | None:
    t = spark_type(_argument(node))
    if t in INTEGERS:
        return T.BIGINT
    return T.DOUBLE if t in (T.DOUBLE, T.FLOAT) else None


def _vet_min_max(node: exp.Expr) -> None:
    if family_of(node.this) is None:
        raise NotLocal(f"{node.key}() over {describe(node.this)} (not a plain scalar)")


def _vet_boolean_aggregate(node: exp.Expr) -> None:
    if family_of(node.this) != "boolean":
        raise NotLocal(f"{node.key}() over {describe(node.this)} (not a boolean)")


FUNCTIONS.update({
    exp.Count: Function("count", _vet_count, fixed_type(T.BIGINT), None,
                        "count(*), count(x), count(DISTINCT x); bigint answer"),
    exp.Sum: Function("sum", _vet_number_aggregate("sum"), _sum_type, None,
                      "of numbers; bigint over integers (an overflow raises in both), "
                      "double over doubles"),
    exp.Avg: Function("avg, mean", _vet_number_aggregate("avg"), fixed_type(T.DOUBLE), None,
                      "of numbers; double answer"),
    exp.Min: Function("min", _vet_min_max, same_type, None, "of plain scalar values"),
    exp.Max: Function("max", _vet_min_max, same_type, None, "of plain scalar values"),
    exp.LogicalAnd: Function("bool_and, every", _vet_boolean_aggregate, fixed_type(T.BOOLEAN),
                             None, "of booleans; NULLs skipped"),
    exp.LogicalOr: Function("bool_or, some", _vet_boolean_aggregate, fixed_type(T.BOOLEAN),
                            None, "of booleans; NULLs skipped"),
})

# sqlglot reads these as plain calls; `any(x)` it reads as the ANY of a comparison.
SPELLINGS.update({
    "every": lambda args: exp.LogicalAnd(this=args[0]) if len(args) == 1 else None,
    "some": lambda args: exp.LogicalOr(this=args[0]) if len(args) == 1 else None,
    "mean": lambda args: exp.Avg(this=args[0]) if len(args) == 1 else None,
})

SPARK_ONLY.update({
    "any": "sqlglot reads any(x) as the ANY of a comparison; bool_or(x) and some(x) are "
           "answered here",
    "percentile, percentile_approx, approx_percentile with an array of percentages":
        "an array of percentiles is not built on the embedded engine yet",
})
