"""Window functions and QUALIFY with Spark's meaning on the embedded engine.

Both engines give a window with ORDER BY the frame RANGE BETWEEN UNBOUNDED PRECEDING AND
CURRENT ROW (peers of the current row included) and one without ORDER BY the whole
partition; ROWS frames with integer offsets mean the same in both. Ranking functions and
lag / lead need an ORDER BY and take no frame in Spark (which refuses the statement
otherwise): such windows are left to Spark, which says so. A window over an ORDER BY with
ties numbers the tied rows in an order neither engine defines.
"""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPARK_ONLY, T, Function, NotLocal,
                                          call, case_when, cast_to, describe, family_of,
                                          fixed_type, int_literal, not_identical, spark_type)

_RANKING = (exp.RowNumber, exp.Rank, exp.DenseRank)
_OFFSET = (exp.Lag, exp.Lead)
_VALUE = (exp.FirstValue, exp.LastValue)
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def _vet_window(node: exp.Expr) -> None:
    fn = node.this
    if not isinstance(fn, _RANKING + _OFFSET + _VALUE + _AGGREGATES):
        raise NotLocal(f"the window function {describe(fn)}")
    for key in node.args:
        if key not in ("this", "partition_by", "order", "spec", "over") and \
                node.args.get(key) is not None:
            raise NotLocal(f"a window with {key} ({describe(node)})")
    for p in node.args.get("partition_by") or []:
        if family_of(p) is None:
            raise NotLocal(f"PARTITION BY {describe(p)} (not a plain scalar type)")
    ordered = node.args.get("order") is not None
    if isinstance(fn, _RANKING + _OFFSET):
        if not ordered:
            raise NotLocal(f"{fn.key}() over a window without ORDER BY (Spark refuses it)")
        if node.args.get("spec") is not None:
            raise NotLocal(f"{fn.key}() with a window frame (Spark refuses it)")
    if isinstance(fn, (exp.Sum, exp.Avg)) and spark_type(fn.this) not in INTEGERS:
        # The engines add the doubles of a frame in different orders (last bits differ).
        raise NotLocal(f"{fn.key}() of {describe(fn.this)} over a window (only of integers)")
    if isinstance(fn, exp.Count) and isinstance(fn.this, exp.Distinct):
        raise NotLocal("count(DISTINCT ...) over a window")


def _rewrite_window(node: exp.Expr, kinds: tuple) -> exp.Expr:
    window = node.copy()
    _sort_doubles_by_value(node, window)
    fn = window.this
    if isinstance(fn, _RANKING):        # DuckDB numbers rows with bigints, Spark with ints
        return cast_to(window, "INT")
    if isinstance(fn, _OFFSET + _VALUE + (exp.Min, exp.Max)) and kinds[0] in (T.DOUBLE,
                                                                              T.FLOAT):
        # A -0.0 taken from another row came back as 0.0 from one of the engines (measured
        # with lead): such a row is Spark's.
        x = fn.this
        negative_zero = exp.And(this=exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                                expression=call("signbit", x.copy()))
        fn.set("this", case_when(negative_zero, not_identical("a -0.0 in a window"), x))
    return window


def _sort_doubles_by_value(node: exp.Expr, window: exp.Expr) -> None:
    """Double PARTITION BY / ORDER BY keys of `window` (a copy of `node`) written as
    `key + 0.0`: the same partitions and order, but DuckDB hands a column that is a bare
    window key back from the key, -0.0 as 0.0, where Spark returns the stored value."""
    def plus_zero(e: exp.Expr) -> exp.Expr:
        return exp.Paren(this=exp.Add(this=exp.Paren(this=e),
                                      expression=exp.Literal.number("0.0")))

    keys = list(node.args.get("partition_by") or [])
    copies = list(window.args.get("partition_by") or [])
    for key, copy in zip(keys, copies, strict=True):
        if spark_type(key) in (T.DOUBLE, T.FLOAT):
            copy.replace(plus_zero(copy.copy()))
    order, order_copy = node.args.get("order"), window.args.get("order")
    if isinstance(order, exp.Order) and isinstance(order_copy, exp.Order):
        for key, copy in zip(order.expressions, order_copy.expressions, strict=True):
            if spark_type(key.this) in (T.DOUBLE, T.FLOAT):
                copy.set("this", plus_zero(copy.this))


def _vet_spec(node: exp.Expr) -> None:
    kind = str(node.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE"):
        raise NotLocal(f"the window frame {describe(node)}")
    if node.args.get("exclude") is not None:
        raise NotLocal("a window frame with EXCLUDE")
    for bound in ("start", "end"):
        value = node.args.get(bound)
        text = (value if isinstance(value, str) else getattr(value, "name", "")).upper()
        if text in ("UNBOUNDED", "CURRENT ROW"):
            continue
        if kind == "RANGE":
            raise NotLocal("a RANGE frame with offsets (only UNBOUNDED and CURRENT ROW)")
        n = int_literal(value) if isinstance(value, exp.Expr) else None
        if n is None or n < 0:
            raise NotLocal(f"the frame bound {describe(node)} (only integer literals)")


def _in_window(name: str):
    def vet(node: exp.Expr) -> None:
        if not isinstance(node.parent, exp.Window):
            raise NotLocal(f"{name}() outside a window")
        if isinstance(node, _OFFSET):
            offset = node.args.get("offset")
            n = int_literal(offset) if offset is not None else 0
            if n is None or n < 0:
                raise NotLocal(f"{name}() with an offset that is not an integer literal")
            default = node.args.get("default")
            if default is not None and not isinstance(default, exp.Null) and (
                    family_of(default) != family_of(node.this) or (
                        family_of(default) == "number"
                        and spark_type(default) != spark_type(node.this))):
                raise NotLocal(f"{name}() with a default of another type than its value")
        if not isinstance(node, _RANKING) and family_of(node.this) is None:
            raise NotLocal(f"{name}() of {describe(node.this)} (not a plain scalar)")
        if isinstance(node, _VALUE) and node.expressions:
            raise NotLocal(f"{name}() ignoring nulls")
    return vet


def _value_type(node: exp.Expr) -> exp.DType | None:
    return spark_type(node.this)


def _no_type(node: exp.Expr) -> exp.DType | None:
    return None


def _vet_nothing(node: exp.Expr) -> None:
    return None


FUNCTIONS.update({
    exp.Window: Function("OVER (PARTITION BY ... ORDER BY ... frame)", _vet_window,
                         lambda n: spark_type(n.this), _rewrite_window,
                         "Spark's default frames; ROWS frames with integer offsets, RANGE "
                         "frames without offsets; sum/avg over a window only of integers"),
    exp.WindowSpec: Function("ROWS / RANGE BETWEEN", _vet_spec, _no_type, None,
                             "UNBOUNDED, CURRENT ROW, integer offsets (ROWS only)"),
    exp.Qualify: Function("QUALIFY", _vet_nothing, _no_type, None,
                          "filters on window functions (Spark accepts QUALIFY)"),
    exp.RowNumber: Function("row_number", _in_window("row_number"), fixed_type(T.INT), None,
                            "int answer; needs ORDER BY"),
    exp.Rank: Function("rank", _in_window("rank"), fixed_type(T.INT), None,
                       "int answer; needs ORDER BY"),
    exp.DenseRank: Function("dense_rank", _in_window("dense_rank"), fixed_type(T.INT), None,
                            "int answer; needs ORDER BY"),
    exp.Lag: Function("lag", _in_window("lag"), _value_type, None,
                      "integer literal offset; a default of the value's type"),
    exp.Lead: Function("lead", _in_window("lead"), _value_type, None,
                       "integer literal offset; a default of the value's type"),
    exp.FirstValue: Function("first_value", _in_window("first_value"), _value_type, None,
                             "nulls included (Spark's default)"),
    exp.LastValue: Function("last_value", _in_window("last_value"), _value_type, None,
                            "nulls included; with ORDER BY the frame ends at the current "
                            "row's last peer"),
})

SPARK_ONLY.update({
    "ntile, percent_rank, cume_dist, nth_value": "not yet compared with Spark",
})
