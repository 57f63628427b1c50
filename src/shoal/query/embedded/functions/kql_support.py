"""What the KQL front end's translations need beyond the other families.

KQL's `percentile(x, p)` is translated to `percentile_approx(x, p, 1000000)`. Spark's
quantile summary keeps every value it sees while the count stays below half the accuracy
(no two entries are merged), and then answers the value at rank max(1, ceil(p * n)) among the
n non-null values in ascending order (measured on Spark over groups of 1 to 2,500 values
split over several partitions, p from 0 to 1); the summary holds doubles, so a bigint
answer is that value through the nearest double. Here that value is read from the sorted list
of the group's values; a group as large as half the accuracy goes to Spark.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPARK_ONLY, Function, NotLocal, T,
                                          cast_to, describe, int_literal, not_identical,
                                          spark_type)

_DEFAULT_ACCURACY = 10000       # Spark's, when the call names none


def _quantile(node: exp.Expr) -> str:
    """The percentage of the call as the text of a number in [0, 1], else `NotLocal`."""
    q = node.args.get("quantile")
    if not (isinstance(q, exp.Literal) and not q.is_string):
        raise NotLocal(f"{describe(node)} (only one literal percentage locally)")
    if not 0 <= float(q.name) <= 1:
        raise NotLocal(f"the percentage {q.name} (outside 0 .. 1)")
    return q.name


def _accuracy(node: exp.Expr) -> int:
    given = node.args.get("accuracy")
    if given is None:
        return _DEFAULT_ACCURACY
    value = int_literal(given)
    if value is None or value < 2:
        raise NotLocal(f"the accuracy of {describe(node)} (only an integer literal locally)")
    return value


def _vet_percentile_approx(node: exp.Expr) -> None:
    if spark_type(node.this) not in INTEGERS:
        raise NotLocal(f"percentile_approx() of {describe(node.this)} (only of integers "
                       "locally)")
    _quantile(node)
    _accuracy(node)
    if node.args.get("weight") is not None:
        raise NotLocal("percentile_approx() with a weight")


def _rewrite_percentile_approx(node: exp.Expr, kinds: tuple) -> exp.Expr:
    p, accuracy = _quantile(node), _accuracy(node)
    template = ("list_transform([list_sort(list_filter(list(__x), lambda v: v IS NOT NULL))], "
                f"lambda s: CASE WHEN len(s) * 2 >= {accuracy} THEN __big "
                "ELSE s[greatest(1, CAST(ceil(__p * len(s)) AS BIGINT))] END)[1]")
    tree = sqlglot.parse_one(template, read="duckdb")
    for col in list(tree.find_all(exp.Column)):
        if col.name == "__x":
            col.replace(exp.Paren(this=node.this.copy()))
        elif col.name == "__p":
            col.replace(cast_to(exp.Literal.string(p), "DOUBLE"))
        elif col.name == "__big":
            col.replace(not_identical("percentile_approx() over a group as large as half "
                                      "its accuracy (Spark's summary merges values there)"))
    if spark_type(node.this) == T.BIGINT:
        # Spark's summary holds doubles: a bigint comes back through the nearest double
        # (Java's conversion back saturates at the largest bigint).
        as_double = cast_to(exp.Paren(this=tree), "DOUBLE")
        back = sqlglot.parse_one("CASE WHEN __d >= CAST('9223372036854775807' AS DOUBLE) THEN "
                                 "CAST('9223372036854775807' AS BIGINT) ELSE CAST(__d AS BIGINT) "
                                 "END", read="duckdb")
        for col in list(back.find_all(exp.Column)):
            col.replace(as_double.copy())
        return back
    return tree


FUNCTIONS[exp.ApproxQuantile] = Function(
    "percentile_approx, approx_percentile", _vet_percentile_approx,
    lambda n: spark_type(n.this), _rewrite_percentile_approx,
    "of integers, one literal percentage: the value at rank ceil(p * n), exact while a group "
    "holds fewer values than half the accuracy (larger groups go to Spark)")

SPARK_ONLY["percentile_approx, approx_percentile"] = (
    "of doubles, with an array of percentages, or over groups of half the accuracy or more: "
    "Spark's summary is not reproduced")
