"""Block pruning: never drops a block holding a matching row, and does skip blocks."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.format.base import (And, BlockPredicate, DynamicPathEquals, DynamicPathExists, Equals,
                               InSet, Not, Or, StringHas, TimeRange)
from shoal.format.predicates import evaluate
from shoal.format.tlm import TlmFormat
from shoal.format.tokens import tokenize
from shoal.types import INT, LONG, STRING, Column, Schema

SCHEMA = Schema.create([Column("code", INT), Column("n", LONG), Column("s", STRING)]).arrow()
STRINGS = ["", "a", "b", "alpha beta", "Beta", "zz", "\u00fc", "x" * 300]
INTS = [-5, 0, 1, 2, 7, 100, 2**40]


def _matches(pred: BlockPredicate, row: dict[str, Any]) -> bool:
    """Ground truth, row by row (two-valued logic; a null never equals or falls in range)."""
    if isinstance(pred, TimeRange):
        v = row.get(pred.column)
        return (isinstance(v, int) and (pred.lo_ns is None or v >= pred.lo_ns)
                and (pred.hi_ns is None or v <= pred.hi_ns))
    if isinstance(pred, Equals):
        v = row.get(pred.column)
        return v is not None and v == pred.value      # Python ==: 2 == 2.0, 1 == True
    if isinstance(pred, InSet):
        return any(_matches(Equals(pred.column, x), row) for x in pred.values)
    if isinstance(pred, StringHas):
        v = row.get(pred.column)
        return isinstance(v, str) and tokenize(pred.token) <= tokenize(v) and bool(
            tokenize(pred.token))
    if isinstance(pred, And):
        return all(_matches(c, row) for c in pred.children)
    if isinstance(pred, Or):
        return any(_matches(c, row) for c in pred.children)
    if isinstance(pred, Not):
        return not _matches(pred.child, row)
    return True


COLUMN = st.sampled_from(["code", "n", "s", "_timestamp", "missing"])
VALUE = st.one_of(st.sampled_from(INTS), st.sampled_from(STRINGS), st.integers(-10, 10),
                  st.none(), st.booleans(), st.floats(-3, 3))
LEAF = st.one_of(
    st.builds(TimeRange, st.one_of(st.none(), st.integers(-20, 120)),
              st.one_of(st.none(), st.integers(-20, 120)),
              st.sampled_from(["_timestamp", "n", "code", "s", "missing"])),
    st.builds(Equals, COLUMN, VALUE),
    st.builds(InSet, COLUMN, st.lists(VALUE, max_size=3).map(tuple)),
    st.builds(StringHas, COLUMN, st.sampled_from(["alpha", "BETA", "zz", "q"])),
    st.builds(DynamicPathExists, st.just("props"), st.just("a")),
    st.builds(DynamicPathEquals, st.just("props"), st.just("a"), VALUE),
)
PREDICATE = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda c: And(tuple(c))),
    st.lists(inner, max_size=3).map(lambda c: Or(tuple(c))),
    inner.map(Not)), max_leaves=6)
ROW = st.fixed_dictionaries({
    "_timestamp": st.one_of(st.none(), st.integers(0, 100)),
    "code": st.one_of(st.none(), st.sampled_from(INTS[:-1]), st.integers(-10, 10)),
    "n": st.one_of(st.none(), st.sampled_from(INTS), st.integers(-10, 10)),
    "s": st.one_of(st.none(), st.sampled_from(STRINGS)),
})


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=40), block_rows=st.integers(1, 8),
       preds=st.lists(PREDICATE, min_size=1, max_size=5))
def test_pruning_never_drops_a_matching_block(rows: list[dict[str, Any]], block_rows: int,
                                              preds: list[BlockPredicate]) -> None:
    from tests.format.conftest import MemoryObjectStore

    store = MemoryObjectStore()
    w = TlmFormat().start_extent(store, "t", SCHEMA, block_rows=block_rows)
    w.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    reader = TlmFormat().open_extent(store, w.finish().object_path)
    for pred in preds:
        kept = set(reader.pruned_blocks(pred))
        for i, row in enumerate(rows):
            if _matches(pred, row):
                assert i // block_rows in kept, (pred, row)


@pytest.fixture
def ten_blocks(store):
    n = 1000
    rows = {"_timestamp": list(range(n)), "props": [None] * n,
            "code": [200 if i < 900 else 500 for i in range(n)],
            "n": [i % 7 for i in range(n)],
            "s": [f"svc-{i // 100:02d}" for i in range(n)]}
    w = TlmFormat().start_extent(store, "t", SCHEMA, block_rows=100)
    w.append(pa.Table.from_pydict(rows, schema=SCHEMA))
    return TlmFormat().open_extent(store, w.finish().object_path)


def test_pruning_skips_blocks(ten_blocks) -> None:
    r = ten_blocks
    every = list(range(10))
    assert r.pruned_blocks(None) == every
    assert r.pruned_blocks(TimeRange(450, 460)) == [4]                     # 9 of 10 skipped
    assert r.pruned_blocks(TimeRange(199, 200)) == [1, 2]
    assert r.pruned_blocks(TimeRange(None, 99)) == [0]
    assert r.pruned_blocks(TimeRange(1000, None)) == []
    assert r.pruned_blocks(TimeRange(10, 5)) == []
    assert r.pruned_blocks(Equals("code", 500)) == [9]
    assert r.pruned_blocks(Equals("s", "svc-03")) == [3]
    assert r.pruned_blocks(InSet("s", ("svc-01", "svc-07"))) == [1, 7]
    assert r.pruned_blocks(InSet("s", ())) == []
    assert r.pruned_blocks(And((TimeRange(0, 500), Equals("code", 500)))) == []
    assert r.pruned_blocks(Or((Equals("s", "svc-00"), TimeRange(950, None)))) == [0, 9]
    assert r.pruned_blocks(Or(())) == []
    # Undecidable at block level: everything kept.
    for pred in (Not(TimeRange(0, 999)), StringHas("s", "svc"), DynamicPathExists("props", "a"),
                 Equals("missing", 1), Equals("code", "500"), Equals("s", 3), Equals("n", 2.0),
                 Equals("code", True), Equals("code", None), TimeRange(0, 5, "s")):
        assert r.pruned_blocks(pred) == every, pred


def test_evaluate_is_conservative_on_odd_stats() -> None:
    stat = {"rows": 3, "columns": {"s": {"min": None, "max": None, "nulls": 0},
                                   "i": {"min": 1, "max": 5, "nulls": 1},
                                   "z": {"min": None, "max": None, "nulls": 3}}}
    assert evaluate(Equals("s", "a"), stat)                  # long strings: no min/max
    assert evaluate(Equals("i", 3), stat) and not evaluate(Equals("i", 6), stat)
    assert not evaluate(Equals("z", 1), stat)                # all null: nothing equals
    assert not evaluate(TimeRange(0, 10, "z"), stat)
    assert evaluate(Equals("other", 1), stat)
    assert evaluate(Equals("i", 3), {"rows": 1})             # no columns at all
    assert evaluate(Equals("i", 3), {"rows": 1, "columns": {"i": {"nulls": 0}}})
