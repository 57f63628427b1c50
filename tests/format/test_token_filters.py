"""Per-block token filters (`shoal.format.blockfilters`, kind "tok"): which string columns
get them, how `StringHas` prunes with them (case-insensitively, conservatively), and that
extents without them, or with blocks all null, still prune right."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.format.base import And, Equals, InSet, Not, Or, StringHas, TimeRange
from shoal.format.blockfilters import (FILTERS_KEY, TOKEN_KIND, filter_columns, filter_ref,
                                       prune_blocks)
from shoal.format.predicates import evaluate
from shoal.format.stats import ExtentStatsBuilder
from shoal.format.tlm import TlmFormat
from shoal.format.tokens import tokenize
from shoal.types import STRING, Column, Schema
from tests.format.conftest import MemoryObjectStore

SCHEMA = Schema.create([Column("trace_id", STRING), Column("level", STRING),
                        Column("msg", STRING)]).arrow()
BLOCK = 1000
WORDS = ["request", "served", "cache", "miss", "upstream", "timeout", "retry", "user"]


def _table(blocks: int, *, rare: dict[int, str] | None = None, null_blocks: tuple[int, ...] = (),
           seed: int = 7) -> pa.Table:
    """`blocks` blocks of BLOCK rows: a 32-hex trace id, a level, and a message of four
    words and a request id; `rare` puts a text in row 17 of some blocks; `null_blocks` have
    no message at all."""
    rng = np.random.default_rng(seed)
    n = blocks * BLOCK
    words = rng.choice(WORDS, size=(n, 4))
    msg: list[str | None] = [" ".join(w) + f" id={i:07d}" for i, w in enumerate(words)]
    for b, text in (rare or {}).items():
        msg[b * BLOCK + 17] = text
    for b in null_blocks:
        msg[b * BLOCK:(b + 1) * BLOCK] = [None] * BLOCK
    return pa.table({
        "_timestamp": pa.array(np.arange(n) * 1000, pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(n, pa.binary()),
        "trace_id": [rng.bytes(16).hex() for _ in range(n)],
        "level": [["info", "warn", "error"][i % 3] for i in range(n)],
        "msg": msg,
    }, schema=SCHEMA)


def _write(store, table: pa.Table, *, block_rows: int = BLOCK, **options: Any) -> str:
    w = TlmFormat(**options).start_extent(store, "t", table.schema, block_rows=block_rows)
    w.append(table)
    return w.finish().object_path


def _false_hits(reader, column: str, word: str, holding: set[int]) -> set[int]:
    """The blocks outside `holding` whose token filter admits `word` anyway (at the 1% false
    positive rate, about one block in a hundred)."""
    filters = reader.read_block_filters(column) or []
    return {i for i, f in enumerate(filters)
            if i not in holding and f is not None and f[1].might_contain(word.lower())}


def test_free_text_gets_token_filters_and_identifiers_keep_membership(store) -> None:
    path = _write(store, _table(12))
    stats = TlmFormat().open_extent(store, path).metadata().block_stats
    assert [filter_ref(s, "msg")[0] for s in stats] == [TOKEN_KIND] * 12
    assert [filter_ref(s, "trace_id")[0] for s in stats] == ["str"] * 12  # one per column
    assert not any(filter_ref(s, "level") for s in stats)   # every token in every block


def test_a_rare_word_keeps_its_block_whatever_its_case(store) -> None:
    table = _table(64, rare={41: "lock wait: DEADLOCK, rolling back"})
    reader = TlmFormat().open_extent(store, _write(store, table))
    extra = _false_hits(reader, "msg", "deadlock", {41})
    assert len(extra) <= 2
    for word in ("deadlock", "DeadLock", "DEADLOCK"):
        assert reader.pruned_blocks(StringHas("msg", word)) == sorted({41} | extra)
    assert reader.pruned_blocks(StringHas("msg", "rolling")) == \
        sorted({41} | _false_hits(reader, "msg", "rolling", {41}))
    assert reader.pruned_blocks(StringHas("msg", "served")) == list(range(64))
    # a whole token only: "deadlocks" and "dead" are other tokens
    assert len(reader.pruned_blocks(StringHas("msg", "deadlocks"))) <= 3
    # a word without tokens (under two letters) cannot be ruled out
    assert reader.pruned_blocks(StringHas("msg", "x")) == list(range(64))


def test_filters_are_read_only_for_the_lookups_they_decide(store) -> None:
    table = _table(8, rare={3: "deadlock"})
    path = _write(store, table)
    fmt = TlmFormat()
    stats = fmt.open_extent(store, path).metadata().block_stats
    asked: list[str] = []

    def load(column: str):
        asked.append(column)
        return fmt.read_block_filters(store, path, stats, column)[0]

    # an equality on the text column: its token filter cannot decide it, so is not fetched
    assert prune_blocks(Equals("msg", "deadlock"), stats, load) == list(range(8))
    assert asked == []
    assert 3 in prune_blocks(StringHas("msg", "deadlock"), stats, load)
    assert asked == ["msg"]
    # nor does the membership filter of trace_id decide a StringHas on it
    tid = table.column("trace_id")[5 * BLOCK].as_py()
    assert prune_blocks(StringHas("trace_id", tid), stats, load) == list(range(8))
    assert asked == ["msg"]
    assert 5 in prune_blocks(Equals("trace_id", tid), stats, load)
    assert asked == ["msg", "trace_id"]


def test_not_and_or_stay_conservative(store) -> None:
    table = _table(16, rare={2: "deadlock", 9: "panic deadlock"})
    reader = TlmFormat().open_extent(store, _write(store, table))
    has = StringHas("msg", "deadlock")
    holding = {2, 9} | _false_hits(reader, "msg", "deadlock", {2, 9})
    assert reader.pruned_blocks(has) == sorted(holding)
    assert reader.pruned_blocks(Not(has)) == list(range(16))
    assert reader.pruned_blocks(Or((has, StringHas("msg", "served")))) == list(range(16))
    assert reader.pruned_blocks(Or((has, TimeRange(12 * BLOCK * 1000, None)))) == \
        sorted(holding | {12, 13, 14, 15})
    panic = {9} | _false_hits(reader, "msg", "panic", {9})
    assert reader.pruned_blocks(And((has, StringHas("msg", "panic")))) == \
        sorted(holding & panic)
    assert reader.pruned_blocks(And((has, TimeRange(None, 5 * BLOCK * 1000)))) == \
        sorted(b for b in holding if b <= 5)
    assert filter_columns(Not(has)) == {}
    assert filter_columns(Or((has, Equals("trace_id", "x")))) == {
        "msg": {TOKEN_KIND}, "trace_id": {"int", "str"}}


def test_a_block_whose_column_is_all_null_holds_no_word(store) -> None:
    table = _table(6, rare={1: "deadlock"}, null_blocks=(3, 4))
    for options in ({}, {"block_filters": False}):
        reader = TlmFormat(**options).open_extent(store, _write(store, table, **options))
        stats = reader.metadata().block_stats
        assert not any(filter_ref(stats[b], "msg") for b in (3, 4))
        kept = reader.pruned_blocks(StringHas("msg", "served"))
        assert kept == [0, 1, 2, 5]                     # the stats alone rule 3 and 4 out
        assert reader.pruned_blocks(Not(StringHas("msg", "served"))) == list(range(6))
    # empty strings hold no token: the block's filter is empty and rules every word out
    empty = table.set_column(4, "msg", pa.array([""] * BLOCK + [None] * (5 * BLOCK),
                                                pa.string()))
    reader = TlmFormat().open_extent(store, _write(store, empty))
    assert filter_ref(reader.metadata().block_stats[0], "msg")[0] == TOKEN_KIND
    assert reader.pruned_blocks(StringHas("msg", "served")) == []


def test_extents_without_token_filters_keep_their_blocks(store) -> None:
    """Written with block filters off, or before token filters existed (the golden extent,
    whose only string column then had no per-block filter): every block with values kept."""
    table = _table(5, rare={2: "deadlock"})
    reader = TlmFormat().open_extent(store, _write(store, table, block_filters=False))
    assert not any(FILTERS_KEY in s for s in reader.metadata().block_stats)
    assert reader.pruned_blocks(StringHas("msg", "deadlock")) == list(range(5))

    old = Path(__file__).parent / "golden" / "v2_before_token_filters.tlm"
    store.put("old.tlm", old.read_bytes())
    reader = TlmFormat().open_extent(store, "old.tlm")
    assert not any(FILTERS_KEY in s for s in reader.metadata().block_stats)
    assert reader.pruned_blocks(StringHas("service", "zed")) == [0, 1, 2]
    assert reader.pruned_blocks(StringHas("status", "200")) == [0, 2]   # block 1: all null


def test_unknown_kinds_and_unreadable_token_filters_keep_blocks(store, caplog) -> None:
    table = _table(4, rare={1: "deadlock"})
    path = _write(store, table)
    stats = TlmFormat().open_extent(store, path).metadata().block_stats
    # a kind this reader does not know (a later writer's): ignored
    other = [dict(s, filters={"msg": dict(s["filters"]["msg"], kind="zzz")}) for s in stats]
    fmt = TlmFormat()
    load = lambda c: fmt.read_block_filters(store, path, other, c)[0]  # noqa: E731
    assert prune_blocks(StringHas("msg", "deadlock"), other, load) == [0, 1, 2, 3]
    # block 2's filter broken: kept, and said so
    data = bytearray(store.get(path))
    _, at, _ = filter_ref(stats[2], "msg")
    data[at:at + 4] = b"JUNK"
    store.put(path, bytes(data))
    reader = TlmFormat().open_extent(store, path)
    with caplog.at_level(logging.WARNING, logger="shoal.format"):
        kept = reader.pruned_blocks(StringHas("msg", "deadlock"))
    assert {1, 2} <= set(kept)
    assert set(kept) - {1, 2} == _false_hits(reader, "msg", "deadlock", {1, 2})
    assert "unreadable" in caplog.text


def test_token_sets_are_the_same_with_and_without_token_filters() -> None:
    """The writer tokenizes each block once for both; the extent's token sets and every
    other stat come out as they do without token filters."""
    for table in (_table(6), _table(3).slice(0, 2500)):
        built = {}
        for on in (True, False):
            b = ExtentStatsBuilder(table.schema, block_filters=on)
            blocks = [b.add_block(x) for x in table.to_batches(max_chunksize=BLOCK)]
            built[on] = (blocks, b.finish())
        (blocks_on, on), (blocks_off, off) = built[True], built[False]
        assert blocks_on == blocks_off
        assert on.column_stats == off.column_stats
        assert on.membership_filters == off.membership_filters
    small = pa.table({"_timestamp": pa.array([1, 2, 3], pa.timestamp("ns", tz="UTC")),
                      "props": pa.nulls(3, pa.binary()), "trace_id": ["a", "b", "c"],
                      "level": ["x", "y", "z"], "msg": ["Hello World", "hello there", None]},
                     schema=SCHEMA)
    b = ExtentStatsBuilder(SCHEMA)
    b.add_block(small.to_batches()[0])
    assert b.finish().column_stats["msg"]["tokens"] == ["hello", "there", "world"]


# ---- pruning never changes answers ---------------------------------------------------------

PROP_SCHEMA = Schema.create([Column("text", STRING), Column("k", STRING)]).arrow()
VOCAB = ["alpha", "Beta", "GAMMA", "delta9", "x", "42", "caf\u00e9", "\u212aelvin", "a-b",
         "deadlock", "DeadLocked", "tab\there"]


def _matches(pred, row: dict[str, Any]) -> bool:
    if isinstance(pred, StringHas):
        v = row[pred.column]
        return v is not None and bool(tokenize(pred.token)) and \
            tokenize(pred.token) <= tokenize(v)
    if isinstance(pred, Equals):
        return row[pred.column] is not None and row[pred.column] == pred.value
    if isinstance(pred, InSet):
        return row[pred.column] is not None and row[pred.column] in pred.values
    if isinstance(pred, TimeRange):
        t = row["_timestamp"]
        return (pred.lo_ns is None or t >= pred.lo_ns) and (pred.hi_ns is None or t <= pred.hi_ns)
    if isinstance(pred, And):
        return all(_matches(c, row) for c in pred.children)
    if isinstance(pred, Or):
        return any(_matches(c, row) for c in pred.children)
    if isinstance(pred, Not):
        return not _matches(pred.child, row)
    raise AssertionError(pred)


@st.composite
def text_extents(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rows = draw(st.integers(200, 1500))
    rng = np.random.default_rng(seed)
    null_share = draw(st.sampled_from([0.0, 0.2, 0.9]))
    clustered = draw(st.booleans())       # words that come and go along the extent
    text: list[str | None] = []
    for i in range(rows):
        if rng.random() < null_share:
            text.append(None)
            continue
        lo = (i * len(VOCAB)) // rows if clustered else 0
        picks = rng.integers(lo, min(len(VOCAB), lo + 3) if clustered else len(VOCAB), 3)
        text.append(" ".join(VOCAB[int(p)] for p in picks) + f" n{int(rng.integers(0, 40))}")
    table = pa.table({"_timestamp": pa.array(np.arange(rows), pa.timestamp("ns", tz="UTC")),
                      "props": pa.nulls(rows, pa.binary()), "text": text,
                      "k": [f"k{int(v)}" for v in rng.integers(0, 30, rows)]},
                     schema=PROP_SCHEMA)
    block_rows = draw(st.sampled_from([16, 100, 333]))
    word = st.sampled_from(["alpha", "beta", "Gamma", "DELTA9", "deadlock", "deadlocked",
                            "kelvin", "elvin", "caf", "n7", "n39", "zzz", "here", "x"])
    leaf = st.one_of(
        word.map(lambda w: StringHas("text", w)),
        st.integers(0, 35).map(lambda v: Equals("k", f"k{v}")),
        st.integers(0, 1500).map(lambda t: TimeRange(t, t + 200)))
    pred = draw(st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda c: And(tuple(c))),
        st.lists(inner, min_size=1, max_size=3).map(lambda c: Or(tuple(c))),
        inner.map(Not)), max_leaves=4))
    return table, block_rows, pred


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_extents())
def test_pruning_with_token_filters_never_changes_answers(case) -> None:
    table, block_rows, pred = case
    store = MemoryObjectStore()
    path = _write(store, table, block_rows=block_rows)
    reader = TlmFormat().open_extent(store, path)
    count = reader.metadata().block_count
    kept = reader.pruned_blocks(pred)
    assert set(kept) <= {i for i, s in enumerate(reader.metadata().block_stats)
                         if evaluate(pred, s)}

    def rows(blocks: list[int]) -> list[dict[str, Any]]:
        out = []
        for b in blocks:
            batch = reader.read_block(b)
            batch = batch.set_column(0, "_timestamp", pc.cast(batch.column(0), pa.int64()))
            out += [r for r in batch.to_pylist() if _matches(pred, r)]
        return out

    assert rows(kept) == rows(list(range(count)))
