"""Conditional expressions with Spark's meaning on the embedded engine: CASE / IF, coalesce
(nvl, ifnull), nullif, nvl2, count_if and an aggregate's FILTER (WHERE ...)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, WIDENING, T, Function, NotLocal, describe,
                                          family_of, fixed_type, same_family, spark_type)


def branch_type(branches: Sequence[exp.Expr | None]) -> exp.DType | None:
    """Spark's type of a value taken from one of `branches` (NULL branches take the others'
    type; numbers widen); None where the branches do not agree."""
    kinds = {spark_type(b) for b in branches if b is not None and not isinstance(b, exp.Null)}
    if len(kinds) == 1:
        return kinds.pop()
    known = [k for k in kinds if k in WIDENING]
    if kinds and len(known) == len(kinds):
        return max(known, key=WIDENING.index)
    families = {family_of(b) for b in branches if b is not None and not isinstance(b, exp.Null)}
    if families == {"string"}:
        return T.VARCHAR
    return None


def _need_condition(node: exp.Expr, cond: exp.Expr | None) -> None:
    if cond is not None and family_of(cond) not in ("boolean", "null"):
        raise NotLocal(f"the condition {describe(cond)} is not a boolean (Spark's implicit "
                       "casts)")


def _need_branches(node: exp.Expr, branches: list[exp.Expr | None]) -> None:
    present = [b for b in branches if b is not None and not isinstance(b, exp.Null)]
    if present and branch_type(present) is None:
        kinds = sorted({family_of(b) or "untyped" for b in present})
        raise NotLocal(f"{describe(node)} mixes {', '.join(kinds)} values (Spark's implicit "
                       "casts)")


def _case_branches(node: exp.Expr) -> list[exp.Expr | None]:
    return [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")]


def _vet_case(node: exp.Expr) -> None:
    if node.this is not None:                       # CASE x WHEN v ...: x = v
        for i in node.args.get("ifs") or []:
            same_family(node, node.this, i.this)
    _need_branches(node, _case_branches(node))


def _vet_if(node: exp.Expr) -> None:
    if isinstance(node.parent, exp.Case):           # a WHEN ... THEN of a CASE
        if node.parent.this is None:
            _need_condition(node, node.this)
        return
    _need_condition(node, node.this)
    _need_branches(node, [node.args.get("true"), node.args.get("false")])


def _if_type(node: exp.Expr) -> exp.DType | None:
    if isinstance(node.parent, exp.Case):
        return spark_type(node.args["true"]) if node.args.get("true") is not None else None
    return branch_type([node.args.get("true"), node.args.get("false")])


def _vet_coalesce(node: exp.Expr) -> None:
    args = [node.this, *node.expressions]
    for a in args[1:]:
        same_family(node, args[0], a)
    _need_branches(node, args)


def _vet_nullif(node: exp.Expr) -> None:
    same_family(node, node.this, node.expression)
    if family_of(node.this) in (None, "null"):
        raise NotLocal(f"nullif() of {describe(node.this)}")


def _vet_nvl2(node: exp.Expr) -> None:
    _need_branches(node, [node.args.get("true"), node.args.get("false")])


def _vet_count_if(node: exp.Expr) -> None:
    if family_of(node.this) != "boolean":
        raise NotLocal(f"count_if() of {describe(node.this)} (not a boolean)")


def _rewrite_count_if(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # DuckDB's count_if answers NULL where every condition is NULL, Spark's 0.
    return exp.Count(this=exp.Case(ifs=[exp.If(this=node.this, true=exp.Literal.number(1))]))


def _vet_filter(node: exp.Expr) -> None:
    if not isinstance(node.this, exp.AggFunc):
        raise NotLocal(f"FILTER on {describe(node.this)} (not an aggregate)")
    where = node.expression
    _need_condition(node, where.this if isinstance(where, exp.Where) else where)


def _rewrite_filter(node: exp.Expr, kinds: tuple) -> exp.Expr:
    """An aggregate rewritten into an expression over several aggregates (the statistical
    ones) takes the FILTER on each of them; DuckDB's FILTER follows an aggregate call."""
    if isinstance(node.this, exp.AggFunc):
        return node.copy()
    inner = node.this.copy()
    for agg in list(inner.find_all(exp.AggFunc)):
        if agg.find_ancestor(exp.Subquery, exp.Filter) is None:
            agg.replace(exp.Filter(this=agg.copy(), expression=node.expression.copy()))
    return inner


FUNCTIONS.update({
    exp.Case: Function("case", _vet_case, lambda n: branch_type(_case_branches(n)), None,
                       "CASE [x] WHEN ... THEN ... ELSE ... END; branches of one type family "
                       "(numbers widen)"),
    exp.If: Function("if", _vet_if, _if_type, None,
                     "a boolean condition; branches of one type family (numbers widen)"),
    exp.Coalesce: Function("coalesce, nvl, ifnull", _vet_coalesce,
                           lambda n: branch_type([n.this, *n.expressions]), None,
                           "arguments of one type family (numbers widen)"),
    exp.Nullif: Function("nullif", _vet_nullif, lambda n: spark_type(n.this), None,
                         "two values of one type family; the first's type"),
    exp.Nvl2: Function("nvl2", _vet_nvl2,
                       lambda n: branch_type([n.args.get("true"), n.args.get("false")]), None,
                       "branches of one type family (numbers widen)"),
    exp.CountIf: Function("count_if", _vet_count_if, fixed_type(T.BIGINT), _rewrite_count_if,
                          "of a boolean; bigint answer, 0 where no row counts"),
    exp.Filter: Function("FILTER (WHERE ...)", _vet_filter, lambda n: spark_type(n.this),
                         _rewrite_filter,
                         "on every aggregate the embedded engine answers"),
})
