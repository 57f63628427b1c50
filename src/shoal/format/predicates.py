"""Block-level evaluation of `BlockPredicate` against one block's stats (pruning stage 2).

`evaluate(predicate, block_stat)` answers "may this block hold a matching row?". It is
conservative: False only when the stats prove that no row matches; anything it cannot decide
keeps the block. The rules:

- `TimeRange`, `Equals`, `InSet` use the column's `{min, max, nulls}` entry. Without an entry
  (column absent from the extent, or a type without stats) -> keep. A block whose values
  are all null holds no match. Otherwise min/max decide, and only when the looked-up value
  has the stats' type (int vs int/timestamp stats, str vs str stats; never bool) -- a column
  widened from int to string keeps int stats in old extents, so a str value keeps them.
  Bounds are inclusive; an empty `InSet` and a `TimeRange` with lo > hi match nothing.
- `StringHas`: a block whose column is all null holds no match; otherwise keep, unless
  `has_token(column, token)` (the block's token filter, see `shoal.format.blockfilters`)
  rules out a token of the looked-up word (`tokens.tokenize`, lower-cased, so the test is
  as case-insensitive as `has`). A word without tokens keeps the block.
- `DynamicPathEquals` with a string value: where the block holds a valid shredded
  sub-column of the path (`shoal.format.shred`), like `Equals` on it; else keep.
- `DynamicPathExists`: keep (no block-level index; the exec layer
  applies them).
- `And`: all children may match (empty: True); `Or`: any (empty: False); `Not`: keep.
- With `might_contain(column, value)` (the block's membership filters, see
  `shoal.format.blockfilters`), an `Equals` and an `InSet` of at most `MAX_FILTER_VALUES`
  values also need the filter to admit a looked-up value. It, and `has_token`, must answer
  True whenever they cannot decide.

The caller (Spark, the exec layer) still applies every filter: pruning only skips.

`rename_columns` looks a predicate's columns up under other names: the names an extent
written before a rename stores (its block stats are keyed by them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from shoal.format.base import (And, BlockPredicate, DynamicPathEquals, DynamicPathExists, Equals,
                               InSet, Not, Or, StringHas, TimeRange)
from shoal.format.shred import block_has, hidden_name
from shoal.format.tokens import tokenize


MAX_FILTER_VALUES = 256      # longer IN lists are not looked up in membership filters
MightContain = Callable[[str, Any], bool]


def evaluate(predicate: BlockPredicate | None, block_stat: dict[str, Any],
             might_contain: MightContain | None = None,
             has_token: MightContain | None = None) -> bool:
    """True if the block described by `block_stat` (and, when given, its membership
    filters `might_contain` and token filters `has_token`) may hold a row matching
    `predicate`."""
    if predicate is None:
        return True
    if isinstance(predicate, TimeRange):
        if (predicate.lo_ns is not None and predicate.hi_ns is not None
                and predicate.lo_ns > predicate.hi_ns):
            return False
        return _may_hold_range(block_stat, predicate.column, predicate.lo_ns, predicate.hi_ns)
    if isinstance(predicate, Equals):
        return (_may_hold_value(block_stat, predicate.column, predicate.value)
                and _admits(might_contain, predicate.column, predicate.value))
    if isinstance(predicate, InSet):
        if len(predicate.values) > MAX_FILTER_VALUES:
            might_contain = None
        return any(_may_hold_value(block_stat, predicate.column, v)
                   and _admits(might_contain, predicate.column, v) for v in predicate.values)
    if isinstance(predicate, StringHas):
        entry = _column(block_stat, predicate.column)
        if entry is not None and _all_null(entry, block_stat):
            return False
        return has_token is None or all(has_token(predicate.column, t)
                                        for t in tokenize(predicate.token))
    if isinstance(predicate, And):
        return all(evaluate(c, block_stat, might_contain, has_token)
                   for c in predicate.children)
    if isinstance(predicate, Or):
        return any(evaluate(c, block_stat, might_contain, has_token)
                   for c in predicate.children)
    if isinstance(predicate, DynamicPathEquals):
        name = hidden_name(predicate.column, predicate.path)
        if isinstance(predicate.value, str) and block_has(block_stat, name):
            return _may_hold_value(block_stat, name, predicate.value)
        return True
    if isinstance(predicate, (Not, DynamicPathExists)):
        return True
    return True     # an unknown predicate type: keep


def _admits(might_contain: MightContain | None, column: str, value: Any) -> bool:
    return might_contain is None or value is None or might_contain(column, value)


def _column(block_stat: dict[str, Any], column: str) -> dict[str, Any] | None:
    columns = block_stat.get("columns")
    entry = columns.get(column) if isinstance(columns, dict) else None
    return entry if isinstance(entry, dict) else None


def _all_null(entry: dict[str, Any], block_stat: dict[str, Any]) -> bool:
    rows, nulls = block_stat.get("rows"), entry.get("nulls")
    return isinstance(rows, int) and isinstance(nulls, int) and nulls >= rows


def _kind(value: Any) -> type | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int
    if isinstance(value, str):
        return str
    return None


def _may_hold_range(block_stat: dict[str, Any], column: str, lo: int | None,
                    hi: int | None) -> bool:
    entry = _column(block_stat, column)
    if entry is None:
        return True
    if _all_null(entry, block_stat):
        return False
    mn, mx = entry.get("min"), entry.get("max")
    if mn is None or mx is None or _kind(mn) is not int or _kind(mx) is not int:
        return True
    below = lo is not None and _kind(lo) is int and mx < lo
    above = hi is not None and _kind(hi) is int and mn > hi
    return not (below or above)


def _may_hold_value(block_stat: dict[str, Any], column: str, value: Any) -> bool:
    entry = _column(block_stat, column)
    if entry is None or value is None:
        return True
    if _all_null(entry, block_stat):
        return False
    mn, mx = entry.get("min"), entry.get("max")
    kind = _kind(value)
    if kind is None or _kind(mn) is not kind or _kind(mx) is not kind:
        return True
    return bool(mn <= value <= mx)


# A column name no extent stores (the `__shoal` prefix is reserved for the query lane).
ABSENT_COLUMN = "__shoal_absent"


def rename_columns(predicate: BlockPredicate | None,
                   names: Mapping[str, str | None]) -> BlockPredicate | None:
    """`predicate` with its columns looked up under `names` (a column renamed since an
    extent was written: the name the extent stores); a column mapped to None has no values
    in the extent, so its leaves look up a name no extent has and keep every block."""
    if predicate is None or not names:
        return predicate
    if isinstance(predicate, (And, Or)):
        return type(predicate)(tuple(rename_columns(c, names)   # type: ignore[misc]
                                     for c in predicate.children))
    if isinstance(predicate, Not):
        return Not(rename_columns(predicate.child, names))  # type: ignore[arg-type]
    column = getattr(predicate, "column", None)
    if column is None or column not in names:
        return predicate
    return replace(predicate, column=names[column] or ABSENT_COLUMN)
