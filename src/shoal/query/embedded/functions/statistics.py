"""Statistical aggregates on the embedded engine, each with Spark's answer or a stated rule
where Spark's own answer is an estimate or depends on how its rows were split.

- `percentile(x, p)` and `median(x)` (Spark's exact percentile): over the non-null values
  in ascending order (-0.0 before 0.0, NaN above +inf, as Spark orders them), the position
  (n - 1) * p; where the values at its floor and ceiling are equal, that value, else
  lower + (upper - lower) * (position - floor), the arithmetic order Spark uses (measured:
  bit-equal answers). A double answer, NULL over no values. The array form of the
  percentage answers an array and stays on Spark.
- `percentile_approx(x, p [, accuracy])` / `approx_percentile`: the value at rank
  max(1, ceil(p * n)) among the n non-null values in ascending order, of x's own type (a
  bigint through the nearest double, as Spark's summary holds doubles). Spark's quantile
  summary gives exactly that value while a group holds at most half the accuracy (default
  10000) values; over larger groups Spark's answer is an estimate whose rank is within
  ceil(n / accuracy) of this one (both measured: one value more than half the accuracy is
  already off by a rank), and the embedded engine answers the exact rank. A group holding a
  NaN goes to Spark: its summary places a NaN by comparisons a NaN fails, so where it lands
  depends on the order of the rows (measured: NaN answered where -1e308 was the rank).
- `approx_count_distinct(x [, rsd])`: the exact number of distinct non-null values (a
  bigint). Spark's HyperLogLog++ answer is an estimate: measured from 1 to 100,000 distinct
  values it was within three times rsd (default 0.05) of the exact count, and not always
  equal to it even for a handful of values (two values may share a register: 8 distinct
  strings came out as 7).
- `stddev` / `std` / `stddev_samp` / `stddev_pop` / `variance` / `var_samp` / `var_pop`:
  Spark merges running means and sums of squares per partition, so its last bits depend on
  how its rows are split (measured: one and four partitions of the same rows differ in the
  14th digit). The embedded engine updates a running mean and sum of squares in one pass
  (Welford) and agrees with Spark to 1e-12 of the values' mean square; the special cases
  are Spark's exactly: no values -> NULL, one value -> NULL for the sample forms and 0.0
  for the population forms, a NaN or infinity among the values -> NaN, all values equal
  -> 0.0. Values beyond 1e100 in magnitude (where the sums of squares could overflow) go to
  Spark.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPELLINGS, Function, NotLocal, T,
                                          cast_to, describe, family_of, fixed_type, int_literal,
                                          not_identical, spark_type)

_DEFAULT_ACCURACY = 10000       # Spark's, when percentile_approx names none
_NUMBERS = (*INTEGERS, T.DOUBLE, T.FLOAT)
# Beyond this magnitude a sum of squares could overflow: such a group is Spark's.
_HUGE = "1e100"


def _template(sql: str, **values: exp.Expr) -> exp.Expr:
    """The DuckDB expression `sql` with each column `__name` replaced by `values[name]`."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name.startswith("__"):
            col.replace(values[col.name[2:]].copy())
    return tree


def _expand(text: str, call: str, expand: Callable[[str], str]) -> str:
    """`text` with each `call...)` replaced by `expand` of its (balanced) argument text."""
    while (start := text.find(call)) >= 0:
        depth, end = 1, start + len(call)
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        text = text[:start] + expand(text[start + len(call):end - 1]) + text[end:]
    return text


def _ranked(x: exp.Expr, *, as_double: bool, body: str, **values: exp.Expr) -> exp.Expr:
    """`body` over the group's values of `x` sorted ascending: `s` the sorted list (NULLs
    last), `__n` the count of non-null values and `pick(i)` the value at 1-based rank i in
    Spark's order. DuckDB sorts NaN above +inf as Spark does, but -0.0 and 0.0 as equals
    (and a sort may hand back either sign): the sign of a zero at rank i is Spark's, -0.0
    while i is within the values below zero and the negative zeros."""
    v = cast_to(exp.Paren(this=x.copy()), "DOUBLE") if as_double else exp.Paren(this=x.copy())
    if spark_type(x) in INTEGERS and not as_double:
        pick = "s[{i}]"
    else:
        pick = ("(CASE WHEN s[{i}] = 0 THEN (CASE WHEN {i} <= __neg THEN CAST('-0.0' AS DOUBLE) "
                "ELSE CAST('0.0' AS DOUBLE) END) ELSE s[{i}] END)")
    text = _expand(body, "pick(", lambda i: pick.format(i=f"({i})"))
    return _template(
        f"list_transform([list_sort(list(__v), 'ASC', 'NULLS LAST')], lambda s: {text})[1]",
        v=v, n=exp.Count(this=v.copy()),
        neg=_template("count(CASE WHEN __v < 0 OR (__v = 0 AND signbit(__v)) THEN 1 END)", v=v),
        **values)


def _percentage(node: exp.Expr) -> str:
    """The percentage of the call as the text of a number in [0, 1], else `NotLocal`."""
    q = node.args.get("quantile")
    if isinstance(q, exp.Array):
        raise NotLocal(f"{describe(node)} (an array of percentages answers an array: Spark's)")
    if not (isinstance(q, exp.Literal) and not q.is_string):
        raise NotLocal(f"{describe(node)} (only one literal percentage locally)")
    if not 0 <= float(q.name) <= 1:
        raise NotLocal(f"the percentage {q.name} (outside 0 .. 1)")
    return q.name


def _no_distinct(node: exp.Expr, name: str) -> None:
    if isinstance(node.this, exp.Distinct):
        raise NotLocal(f"{name}() of DISTINCT values")


def _need_number(node: exp.Expr, name: str) -> None:
    _no_distinct(node, name)
    if spark_type(node.this) not in _NUMBERS:
        raise NotLocal(f"{name}() of {describe(node.this)} (only of integers and doubles "
                       "locally)")


def _only_args(node: exp.Expr, name: str, allowed: tuple[str, ...]) -> None:
    extra = [k for k, v in node.args.items() if v is not None and k not in allowed]
    if extra:
        raise NotLocal(f"{name}() with {', '.join(extra)}")


# ---- percentile, median ---------------------------------------------------------------------
def _vet_percentile(node: exp.Expr) -> None:
    _need_number(node, "percentile")
    _percentage(node)
    _only_args(node, "percentile", ("this", "quantile"))


def _vet_median(node: exp.Expr) -> None:
    _need_number(node, "median")
    _only_args(node, "median", ("this",))


def _interpolated(x: exp.Expr, p: str) -> exp.Expr:
    position = "CAST(__n - 1 AS DOUBLE) * __p"
    return _ranked(
        x, as_double=True, p=cast_to(exp.Literal.string(p), "DOUBLE"),
        body=f"CASE WHEN __n = 0 THEN NULL ELSE list_transform(["
             f"[pick(CAST(floor({position}) AS BIGINT) + 1), "
             f"pick(CAST(ceil({position}) AS BIGINT) + 1), "
             f"{position} - floor({position})]], "
             "lambda b: CASE WHEN b[1] = b[2] THEN b[1] ELSE b[1] + (b[2] - b[1]) * b[3] END"
             ")[1] END")


def _rewrite_percentile(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return _interpolated(node.this, _percentage(node))


def _rewrite_median(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return _interpolated(node.this, "0.5")


# ---- percentile_approx ----------------------------------------------------------------------
def _accuracy(node: exp.Expr) -> int:
    given = node.args.get("accuracy")
    if given is None:
        return _DEFAULT_ACCURACY
    value = int_literal(given)
    if value is None or value < 2:
        raise NotLocal(f"the accuracy of {describe(node)} (only an integer literal locally)")
    return value


def _vet_percentile_approx(node: exp.Expr) -> None:
    _need_number(node, "percentile_approx")
    _percentage(node)
    _accuracy(node)
    if node.args.get("weight") is not None:
        raise NotLocal("percentile_approx() with a weight")


def _rewrite_percentile_approx(node: exp.Expr, kinds: tuple) -> exp.Expr:
    p = cast_to(exp.Literal.string(_percentage(node)), "DOUBLE")
    tree = _ranked(node.this, as_double=False, p=p,
                   body="CASE WHEN __n = 0 THEN NULL "
                        "ELSE pick(greatest(1, CAST(ceil(__p * __n) AS BIGINT))) END")
    if spark_type(node.this) not in INTEGERS:
        nan = _template("bool_or(isnan(__v))", v=cast_to(exp.Paren(this=node.this.copy()),
                                                           "DOUBLE"))
        tree = exp.Paren(this=exp.Case(ifs=[exp.If(this=nan, true=not_identical(
            "percentile_approx() over a NaN (where Spark's summary places it depends on the "
            "order of the rows)"))], default=tree))
    if spark_type(node.this) == T.BIGINT:
        # Spark's summary holds doubles: a bigint comes back through the nearest double
        # (Java's conversion back saturates at the largest bigint).
        return _template("CASE WHEN CAST(__r AS DOUBLE) >= CAST('9223372036854775807' AS DOUBLE) "
                         "THEN CAST('9223372036854775807' AS BIGINT) ELSE "
                         "CAST(CAST(__r AS DOUBLE) AS BIGINT) END", r=exp.Paren(this=tree))
    return tree


# ---- approx_count_distinct ------------------------------------------------------------------
def _vet_approx_count_distinct(node: exp.Expr) -> None:
    _no_distinct(node, "approx_count_distinct")
    if family_of(node.this) in (None, "null"):
        raise NotLocal(f"approx_count_distinct() of {describe(node.this)} (not a plain scalar)")
    _only_args(node, "approx_count_distinct", ("this", "accuracy"))
    rsd = node.args.get("accuracy")
    if rsd is not None and not (isinstance(rsd, exp.Literal) and not rsd.is_string
                                and 0.01 <= float(rsd.name) <= 0.3):
        raise NotLocal(f"the relative error of {describe(node)} (only a literal in "
                       "0.01 .. 0.3 locally)")


def _rewrite_approx_count_distinct(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return exp.Count(this=exp.Distinct(expressions=[node.this.copy()]))


# ---- variances and standard deviations ------------------------------------------------------
def _vet_moment(name: str):
    def vet(node: exp.Expr) -> None:
        _need_number(node, name)
        _only_args(node, name, ("this",))
    return vet


def _moment(duckdb_fn: str, least: int):
    """Spark's special cases around DuckDB's one-pass `duckdb_fn`: NULL below `least`
    values, NaN where a value is NaN or infinite, Spark's answer beyond 1e100."""
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        v = cast_to(exp.Paren(this=node.this.copy()), "DOUBLE")
        return exp.Paren(this=_template(
            f"CASE WHEN count(__v) < {least} THEN NULL "
            "WHEN bool_or(NOT isfinite(__v)) THEN CAST('NaN' AS DOUBLE) "
            f"WHEN bool_or(abs(__v) > {_HUGE}) THEN __huge "
            f"ELSE {duckdb_fn}(CASE WHEN abs(__v) <= {_HUGE} THEN __v END) END",
            v=v, huge=not_identical(f"a value beyond {_HUGE} in a variance (the sums of "
                                    "squares could overflow)")))
    return rewrite


_MOMENT_NOTE = ("of numbers, double answer; agrees with Spark to 1e-12 of the values' mean "
                "square (Spark's last bits depend on its partitions); NULL over no values, ")

def _moment_function(names: str, spark_name: str, duck_name: str, *, sample: bool) -> Function:
    """A variance or standard deviation: the sample forms need two values, the population
    forms one."""
    one = ("NULL over one value" if sample else "0.0 over one finite value")
    return Function(names, _vet_moment(spark_name), fixed_type(T.DOUBLE),
                    _moment(duck_name, 2 if sample else 1),
                    _MOMENT_NOTE + one + ", NaN if a value is NaN or infinite")


FUNCTIONS.update({
    exp.Quantile: Function(
        "percentile", _vet_percentile, fixed_type(T.DOUBLE), _rewrite_percentile,
        "of numbers, one literal percentage p: Spark's exact percentile, bit for bit (the "
        "values at the floor and ceiling of (n - 1) * p over the sorted values, "
        "interpolated as Spark does; NaN sorts above infinity); double answer"),
    exp.Median: Function(
        "median", _vet_median, fixed_type(T.DOUBLE), _rewrite_median,
        "of numbers: percentile(x, 0.5), bit for bit"),
    exp.ApproxQuantile: Function(
        "percentile_approx, approx_percentile", _vet_percentile_approx,
        lambda n: spark_type(n.this), _rewrite_percentile_approx,
        "of numbers, one literal percentage p: the exact value at rank max(1, ceil(p * n)) "
        "of the sorted values, of x's type. That is Spark's answer while a group holds at "
        "most half the accuracy (default 10000) values; over larger groups Spark estimates, "
        "within ceil(n / accuracy) ranks of this answer. A group holding a NaN goes to Spark "
        "(where its summary places a NaN depends on the order of the rows)"),
    exp.ApproxDistinct: Function(
        "approx_count_distinct", _vet_approx_count_distinct, fixed_type(T.BIGINT),
        _rewrite_approx_count_distinct,
        "the exact number of distinct non-null values (bigint); Spark's HyperLogLog++ "
        "estimate lies within three times its relative error rsd (default 0.05) of it, and "
        "may be off by one even for a handful of values"),
    exp.Stddev: _moment_function("stddev, std", "stddev", "stddev_samp", sample=True),
    exp.StddevSamp: _moment_function("stddev_samp", "stddev_samp", "stddev_samp", sample=True),
    exp.StddevPop: _moment_function("stddev_pop", "stddev_pop", "stddev_pop", sample=False),
    exp.Variance: _moment_function("variance, var_samp", "variance", "var_samp", sample=True),
    exp.VariancePop: _moment_function("var_pop", "var_pop", "var_pop", sample=False),
})

# sqlglot reads std(x) as a plain call.
SPELLINGS["std"] = lambda args: exp.Stddev(this=args[0]) if len(args) == 1 else None
