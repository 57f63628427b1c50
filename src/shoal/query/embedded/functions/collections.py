"""Collecting aggregates and the picking aggregates, answered on the embedded engine only in
the forms whose answer Spark defines.

Arrays: `collect_list(x)` and `collect_set(x)` skip NULLs and answer `array<T>` whose
elements are never NULL (Arrow `list<element: T not null>`, an empty list for a group
without values). Their order is the order rows arrive in, which neither engine defines, so
an array is an answer here only sorted (`sort_array(.., true | false)`, `array_sort`), or
reduced to something order-free: `size(..)`, `array_contains(.., v)`, and
`array_join(sort_array(..), sep)` of strings, integers or booleans. A bare collect is
Spark's, which answers in whatever order it collected. Doubles: Spark's `collect_set` keeps
0.0 for -0.0 (measured), which adding 0.0 reproduces; NaN sorts above every number in
both; a sorted `collect_list` holding -0.0 is handed to Spark at run time (Spark keeps the
arrival order of -0.0 and 0.0, which compare equal, and DuckDB's sort may drop the sign).
Strings sort by their UTF-8 bytes in both engines.

`max_by(x, ord)` / `min_by(x, ord)`: rows whose `ord` is NULL are skipped, a NULL `x` of the
extreme row is the answer (DuckDB's `arg_max_null`); when two rows share the extreme `ord`
(-0.0 and 0.0 count as equal, as do two NaNs), the row picked is not defined, and the group
hands the statement to Spark at run time.

`first(x)`, `last(x)`, `any_value(x)` (`IGNORE NULLS` / a second argument `true`): the row
they pick is not defined without an order, so a group answers here only when every row
gives the same answer: all of its values equal (and, without ignoring NULLs, none NULL), or
all NULL. Any other group hands the statement to Spark at run time.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from shoal.query.embedded.vetting import (ARROW_TYPES, FAMILY, FUNCTIONS, INTEGERS, SPARK_ONLY, T,
                                          Function, NotLocal, call, case_when, cast_to,
                                          describe, family_of, fixed_type, not_identical,
                                          spark_type)

_COLLECTS = (exp.ArrayAgg, exp.ArrayUniqueAgg)
_PICKS = (exp.First, exp.Last, exp.AnyValue)
_ELEMENT_FAMILIES = ("number", "string", "boolean")
_DUCK_TYPES = {T.TINYINT: "TINYINT", T.SMALLINT: "SMALLINT", T.INT: "INTEGER",
               T.BIGINT: "BIGINT", T.DOUBLE: "DOUBLE", T.VARCHAR: "VARCHAR",
               T.TEXT: "VARCHAR", T.BOOLEAN: "BOOLEAN"}
_ORDERABLE = ("number", "string", "boolean", "timestamp", "date")


def _collect_name(node: exp.Expr) -> str:
    return "collect_set" if isinstance(node, exp.ArrayUniqueAgg) else "collect_list"


def _element_type(node: exp.Expr) -> exp.DType | None:
    """The Spark element type of a collected array (through a sort), if vetted."""
    if isinstance(node, exp.ArraySort):
        node = node.this
    return spark_type(node.this) if isinstance(node, _COLLECTS) else None


def array_arrow_type(node: exp.Expr) -> pa.DataType | None:
    """The Arrow type Spark's answer has for a sorted collect in a select list."""
    if not isinstance(node, exp.ArraySort):
        return None
    t = _element_type(node)
    if t is None or t not in ARROW_TYPES:
        return None
    return pa.list_(pa.field("element", ARROW_TYPES[t], nullable=False))


def _is_sort_array(node: exp.Expr) -> bool:
    """`sort_array(a[, true|false])` or `array_sort(a)` (no comparator)."""
    asc = node.args.get("asc")
    if asc is not None and not isinstance(asc, exp.Boolean):
        return False
    return not any(node.args.get(k) is not None for k in node.args
                   if k not in ("this", "asc", "nulls_first"))


def _descending(node: exp.Expr) -> bool:
    asc = node.args.get("asc")
    return isinstance(asc, exp.Boolean) and not asc.this


def _vet_collect(node: exp.Expr) -> None:
    name = _collect_name(node)
    parent = node.parent
    if not isinstance(parent, (exp.ArraySort, exp.ArraySize, exp.ArrayContains)) or (
            isinstance(parent, exp.ArrayContains) and parent.this is not node):
        raise NotLocal(f"{name}() without sort_array(): the order of its elements is not "
                       "defined (only sorted, size() or array_contains() locally)")
    if node.args.get("order") is not None or node.expressions:
        raise NotLocal(f"{name}() with more than one argument")
    if isinstance(node.this, exp.Distinct):
        raise NotLocal(f"{name}(DISTINCT ...)")
    fam = family_of(node.this)
    t = spark_type(node.this)
    if fam not in _ELEMENT_FAMILIES or t not in _DUCK_TYPES:
        raise NotLocal(f"{name}() of {describe(node.this)} (only of numbers, strings and "
                       "booleans locally)")


def _rewrite_collect(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this.copy()
    duck_type = _DUCK_TYPES[kinds[0]]
    double = kinds[0] == T.DOUBLE
    if isinstance(node, exp.ArrayUniqueAgg):
        # -0.0 + 0.0 is 0.0: Spark's collect_set keeps 0.0 for -0.0
        value = exp.Add(this=x, expression=cast_to(exp.Literal.number(0), "DOUBLE")) \
            if double else x
        collected: exp.Expr = call("list", exp.Distinct(expressions=[value]))
    else:
        collected = call("list", x)
    kept = exp.Filter(this=collected, expression=exp.Where(
        this=exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.Null()))))
    empty = cast_to(exp.Array(expressions=[]), f"{duck_type}[]")
    answer: exp.Expr = exp.Coalesce(this=kept, expressions=[empty])
    if double and isinstance(node, exp.ArrayAgg) and isinstance(node.parent, exp.ArraySort):
        negative_zero = call("bool_or", exp.And(
            this=exp.EQ(this=node.this.copy(), expression=exp.Literal.number(0)),
            expression=call("signbit", node.this.copy())))
        answer = case_when(negative_zero, not_identical("a -0.0 in a sorted collect_list"),
                           answer)
    return answer


def _vet_sort(node: exp.Expr) -> None:
    if not isinstance(node.this, _COLLECTS):
        raise NotLocal(f"sort_array() of {describe(node.this)} (only of collect_list / "
                       "collect_set locally)")
    if not _is_sort_array(node):
        raise NotLocal(f"{describe(node)}: the order is not a true / false literal")
    parent = node.parent
    if isinstance(parent, exp.ArrayToString | exp.ArraySize) or (
            isinstance(parent, exp.ArrayContains) and parent.this is node):
        return
    holder = parent.parent if isinstance(parent, exp.Alias) else parent
    if not isinstance(holder, exp.Select) or holder.parent is not None or \
            holder.args.get("distinct") is not None or node not in (
                [s.this if isinstance(s, exp.Alias) else s for s in holder.selects]):
        raise NotLocal(f"{describe(node)} other than as a column of the answer")


def _rewrite_sort(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return call("list_sort", node.this.copy(),
                exp.Literal.string("DESC" if _descending(node) else "ASC"))


def _array_type(node: exp.Expr) -> exp.DType | None:
    return T.ARRAY


# size() of split() is vetted by the regex family, registered before this module.
_SIZE_OF_SPLIT = FUNCTIONS[exp.ArraySize]


def _vet_size(node: exp.Expr) -> None:
    if not isinstance(node.this, (*_COLLECTS, exp.ArraySort)):
        _SIZE_OF_SPLIT.vet(node)


def _rewrite_size(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return cast_to(call("len", node.this.copy()), "INT")


def _vet_contains(node: exp.Expr) -> None:
    if not isinstance(node.this, (*_COLLECTS, exp.ArraySort)):
        raise NotLocal(f"array_contains() of {describe(node.this)} (only of collect_list / "
                       "collect_set locally)")
    value = node.expression
    element = _element_type(node.this)
    if isinstance(value, exp.Null):
        raise NotLocal("array_contains() of NULL (Spark refuses it)")
    kind = spark_type(value)
    same = kind is not None and element is not None and (
        kind == element or FAMILY.get(kind) == "string" == FAMILY.get(element)
        or (kind in INTEGERS and element in (*INTEGERS, T.DOUBLE)))
    if not same:
        raise NotLocal(f"array_contains() of {describe(value)} in an array of another type "
                       "(Spark's implicit casts)")


def _rewrite_contains(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return call("list_contains", node.this.copy(), node.expression.copy())


def _vet_join(node: exp.Expr) -> None:
    if not isinstance(node.this, exp.ArraySort) or not isinstance(node.this.this, _COLLECTS):
        raise NotLocal(f"array_join() of {describe(node.this)} (only of a sorted "
                       "collect_list / collect_set locally)")
    sep = node.expression
    if not (isinstance(sep, exp.Literal) and sep.is_string) or node.args.get("null"):
        raise NotLocal("array_join() other than with a string literal separator")
    element = _element_type(node.this)
    if element not in (*INTEGERS, T.VARCHAR, T.TEXT, T.BOOLEAN):
        raise NotLocal("array_join() of doubles (Spark's text form of a double)")


def _rewrite_join(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return call("array_to_string", node.this.copy(), node.expression.copy())


def _vet_by(node: exp.Expr) -> None:
    name = "max_by" if isinstance(node, exp.ArgMax) else "min_by"
    _plain_aggregate(node, name)
    if node.args.get("count") is not None:
        raise NotLocal(f"{name}() with a count")
    if family_of(node.this) not in _ORDERABLE:
        raise NotLocal(f"{name}() of {describe(node.this)} (not a plain scalar)")
    if family_of(node.expression) not in _ORDERABLE:
        raise NotLocal(f"{name}() ordered by {describe(node.expression)} (not a plain "
                       "scalar)")


def _plain_aggregate(node: exp.Expr, name: str) -> None:
    if isinstance(node.this, exp.Distinct):
        raise NotLocal(f"{name}(DISTINCT ...)")
    parent = node.parent.parent if isinstance(node.parent, exp.IgnoreNulls) else node.parent
    if isinstance(parent, exp.Window):
        raise NotLocal(f"{name}() over a window")
    if isinstance(parent, exp.Filter):
        raise NotLocal(f"{name}() with FILTER")


def _rewrite_by(node: exp.Expr, kinds: tuple) -> exp.Expr:
    most = isinstance(node, exp.ArgMax)
    x, order = node.this, node.expression
    top = call("max" if most else "min", order.copy(), exp.Literal.number(2))
    tied = exp.EQ(this=call("list_extract", top, exp.Literal.number(1)),
                  expression=call("list_extract", top.copy(), exp.Literal.number(2)))
    picked = call("arg_max_null" if most else "arg_min_null", x.copy(), order.copy())
    return case_when(tied, not_identical(f"a tie of the ordering value of "
                                         f"{'max_by' if most else 'min_by'}"), picked)


_PICK_NAMES: dict[type[exp.Expr], str] = {exp.First: "first", exp.Last: "last",
                                          exp.AnyValue: "any_value"}


def _vet_pick(node: exp.Expr) -> None:
    name = _PICK_NAMES[type(node)]
    _plain_aggregate(node, name)
    if node.expressions or node.args.get("expression") is not None:
        raise NotLocal(f"{name}() with an argument that is not a literal")
    if family_of(node.this) not in _ORDERABLE:
        raise NotLocal(f"{name}() of {describe(node.this)} (not a plain scalar)")


def _rewrite_pick(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this
    ignoring = isinstance(node.parent, exp.IgnoreNulls)
    alike: exp.Expr = exp.EQ(this=exp.Min(this=x.copy()), expression=exp.Max(this=x.copy()))
    if kinds[0] in (T.DOUBLE, T.FLOAT):     # -0.0 and 0.0 are equal, but not alike
        alike = exp.And(this=alike, expression=exp.EQ(
            this=call("bool_and", call("signbit", x.copy())),
            expression=call("bool_or", call("signbit", x.copy()))))
    if not ignoring:
        alike = exp.And(this=alike, expression=exp.EQ(
            this=exp.Count(this=x.copy()), expression=exp.Count(this=exp.Star())))
    none = exp.EQ(this=exp.Count(this=x.copy()), expression=exp.Literal.number(0))
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=none, true=exp.Null()),
                                        exp.If(this=alike, true=exp.Min(this=x.copy()))],
                                   default=not_identical(
                                       f"{_PICK_NAMES[type(node)]}() over differing values")))


def _vet_ignore_nulls(node: exp.Expr) -> None:
    if not isinstance(node.this, _PICKS):
        raise NotLocal(f"IGNORE NULLS on {describe(node.this)}")


def _rewrite_ignore_nulls(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return node.this.copy()


def _value_type(node: exp.Expr) -> exp.DType | None:
    return spark_type(node.this)


_PICK_NOTE = ("local where every row of the group gives the same answer (all values equal, "
              "or all NULL; NULLs skipped with IGNORE NULLS or a second argument true); any "
              "other group is handed to Spark")

FUNCTIONS.update({
    exp.ArrayAgg: Function("collect_list, array_agg", _vet_collect, _array_type,
                           _rewrite_collect,
                           "only inside sort_array(), size() or array_contains() (its order "
                           "is not defined); of numbers, strings, booleans; NULLs skipped"),
    exp.ArrayUniqueAgg: Function("collect_set", _vet_collect, _array_type, _rewrite_collect,
                                 "only inside sort_array(), size() or array_contains(); of "
                                 "numbers, strings, booleans; NULLs skipped, -0.0 kept as "
                                 "0.0"),
    exp.ArraySort: Function("sort_array, array_sort", _vet_sort, _array_type, _rewrite_sort,
                            "of collect_list / collect_set, as an answer column or inside "
                            "size(), array_contains(), array_join(); a -0.0 in a sorted "
                            "collect_list is Spark's"),
    exp.ArraySize: Function("size", _vet_size, fixed_type(T.INT), _rewrite_size,
                            f"{_SIZE_OF_SPLIT.note}; of collect_list / collect_set"),
    exp.ArrayContains: Function("array_contains", _vet_contains, fixed_type(T.BOOLEAN),
                                _rewrite_contains,
                                "of collect_list / collect_set, a value of the elements' type"),
    exp.ArrayToString: Function("array_join", _vet_join, fixed_type(T.VARCHAR), _rewrite_join,
                                "of a sorted collect of strings, integers or booleans; a "
                                "string literal separator"),
    exp.ArgMax: Function("max_by", _vet_by, _value_type, _rewrite_by,
                         "rows with a NULL ordering value skipped; a tie of the largest "
                         "ordering value is handed to Spark"),
    exp.ArgMin: Function("min_by", _vet_by, _value_type, _rewrite_by,
                         "rows with a NULL ordering value skipped; a tie of the smallest "
                         "ordering value is handed to Spark"),
    exp.First: Function("first", _vet_pick, _value_type, _rewrite_pick, _PICK_NOTE),
    exp.Last: Function("last", _vet_pick, _value_type, _rewrite_pick, _PICK_NOTE),
    exp.AnyValue: Function("any_value", _vet_pick, _value_type, _rewrite_pick, _PICK_NOTE),
    exp.IgnoreNulls: Function("IGNORE NULLS", _vet_ignore_nulls, _value_type,
                              _rewrite_ignore_nulls, "of first, last, any_value"),
})

SPARK_ONLY.update({
    "collect_list, collect_set, array_agg (bare)":
        "the order of a collected array is the order rows arrive in, which is not defined; "
        "sorted, sized or searched they are answered here",
})
