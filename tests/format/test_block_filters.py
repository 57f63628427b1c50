"""Per-block membership filters (`shoal.format.blockfilters`): a needle
inside a big extent keeps one block; pruning never changes answers; extents with filters stay
readable by a v2 reader that does not know them, and extents without them still prune."""

from __future__ import annotations

import json
import logging
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.format.base import And, Equals, InSet, Not, Or, TimeRange
from shoal.format.blockfilters import FILTERS_KEY, filter_ref, prune_blocks
from shoal.format.predicates import evaluate
from shoal.format.tlm import MAGIC_V2, MAGIC_V3, TlmFormat
from shoal.types import INT, LONG, STRING, Column, Schema
from tests.format.conftest import MemoryObjectStore

SCHEMA = Schema.create([Column("trace_id", STRING), Column("seq", LONG),
                        Column("code", INT), Column("msg", STRING)]).arrow()


def _table(n: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = [rng.bytes(16).hex() for _ in range(n)]
    return pa.table({
        "_timestamp": pa.array(np.arange(n) * 1000, pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(n, pa.binary()),
        "trace_id": ids,
        "seq": pa.array(np.arange(n), pa.int64()),                       # sorted: min/max do
        "code": pa.array(rng.integers(0, 5000, n), pa.int32()),          # random ints
        "msg": [f"request {i} served" for i in range(n)],                # free text
    }, schema=SCHEMA)


def _write(store, table: pa.Table, *, block_rows: int, **options: Any) -> str:
    w = TlmFormat(**options).start_extent(store, "t", table.schema, block_rows=block_rows)
    w.append(table)
    return w.finish().object_path


def _old_reader(data: bytes) -> tuple[pa.Table, list[dict[str, Any]]]:
    """What a reader that predates block filters does: the framing, the JSON footer, the
    middle opened as an Arrow IPC file (v2) or as a Parquet file (v3), as it is."""
    assert data[:5] == data[-5:] and data[:5] in (MAGIC_V2, MAGIC_V3)
    (n,) = struct.unpack("<I", data[-9:-5])
    stats = json.loads(data[-9 - n:-9])
    assert isinstance(stats, list) and all(isinstance(s["rows"], int) for s in stats)
    if data[:5] == MAGIC_V2:
        return pa.ipc.open_file(pa.py_buffer(data[5:-9 - n])).read_all(), stats
    return pq.read_table(pa.py_buffer(data[5:-9 - n])), stats


@pytest.mark.parametrize("version", [2, 3])
def test_needle_keeps_one_block_and_old_readers_ignore_the_filters(store, version) -> None:
    table = _table(200_000)
    path = _write(store, table, block_rows=8192, version=version)
    reader = TlmFormat().open_extent(store, path)
    meta = reader.metadata()
    assert meta.block_count == 25
    stats = meta.block_stats
    assert all(filter_ref(s, "trace_id") for s in stats)
    assert all(filter_ref(s, "code")[0] == "int" for s in stats)
    assert not any(filter_ref(s, "seq") for s in stats)       # sorted: min/max suffice
    assert all(filter_ref(s, "msg")[0] == "tok" for s in stats)   # free text: token filters

    ids = table.column("trace_id").to_pylist()
    extra = 0
    for row in range(0, 200_000, 997):                        # 201 needles
        kept = reader.pruned_blocks(Equals("trace_id", ids[row]))
        assert row // 8192 in kept
        extra += len(kept) - 1
    assert extra <= 201 * 24 * 0.002 * 3                      # 0.2% false positives a block
    before = reader.bytes_read
    absent = sum(len(reader.pruned_blocks(Equals("trace_id", f"{i:032x}")))
                 for i in range(1000))
    assert absent <= 1000 * 25 * 0.002 * 3
    assert reader.bytes_read == before                        # filters fetched once
    kept = reader.pruned_blocks(InSet("trace_id", (ids[5], ids[100_000])))
    assert {0, 12} <= set(kept) and len(kept) <= 4
    assert reader.pruned_blocks(Equals("seq", 100_000)) == [12]

    # A reader that predates block filters: same IPC file, same rows, footer it can use.
    old_body, old_stats = _old_reader(store.get(path))
    assert old_body.equals(table)
    assert [{k: v for k, v in s.items() if k != FILTERS_KEY} for s in stats] == \
        [{k: v for k, v in s.items() if k != FILTERS_KEY} for s in old_stats]
    assert [i for i, s in enumerate(old_stats)
            if evaluate(Equals("trace_id", ids[123_456]), s)] == list(range(25))


def test_extents_without_filters_still_read_and_prune(store) -> None:
    table = _table(30_000)
    path = _write(store, table, block_rows=4096, block_filters=False)
    reader = TlmFormat().open_extent(store, path)
    stats = reader.metadata().block_stats
    assert not any(FILTERS_KEY in s for s in stats)
    assert reader.pruned_blocks(Equals("seq", 9000)) == [2]
    assert reader.pruned_blocks(Equals("trace_id", "8" * 32)) == list(range(8))  # no filters
    assert pa.Table.from_batches([reader.read_block(i) for i in range(8)]).equals(table)


def test_filters_do_not_decide_values_of_another_kind(store) -> None:
    """An int column's filter cannot answer a string lookup (a column widened from int to
    string keeps its old extents' int filters): the block is kept."""
    path = _write(store, _table(20_000), block_rows=4096)
    reader = TlmFormat().open_extent(store, path)
    assert reader.pruned_blocks(Equals("code", 99_999)) == []
    assert reader.pruned_blocks(Equals("code", "17")) == list(range(5))
    assert reader.pruned_blocks(Equals("code", 17.0)) == list(range(5))
    assert reader.pruned_blocks(Not(Equals("trace_id", "absent"))) == list(range(5))


def test_unreadable_filter_keeps_its_block(store, caplog) -> None:
    path = _write(store, _table(20_000), block_rows=4096)
    data = bytearray(store.get(path))
    stats = TlmFormat().open_extent(store, path).metadata().block_stats
    _, at, _ = filter_ref(stats[2], "trace_id")
    data[at:at + 4] = b"JUNK"                                 # break block 2's filter magic
    store.put(path, bytes(data))
    reader = TlmFormat().open_extent(store, path)
    with caplog.at_level(logging.WARNING, logger="shoal.format"):
        assert reader.pruned_blocks(Equals("trace_id", "absent")) == [2]
    assert "unreadable" in caplog.text


def test_format_reads_a_columns_filters_without_opening_the_extent(store) -> None:
    table = _table(20_000)
    path = _write(store, table, block_rows=4096)
    fmt = TlmFormat()
    stats = fmt.open_extent(store, path).metadata().block_stats
    filters, nbytes = fmt.read_block_filters(store, path, stats, "trace_id")
    assert len(filters) == 5 and 0 < nbytes < 20_000 * 2           # ~1.6 bytes a value
    assert fmt.read_block_filters(store, path, stats, "seq") == (None, 0)
    needle = table.column("trace_id")[10_000].as_py()
    assert prune_blocks(Equals("trace_id", needle), stats,
                        lambda c: fmt.read_block_filters(store, path, stats, c)[0]) == [2]


# ---- pruning never changes answers ---------------------------------------------------------

def _matches(pred, row: dict[str, Any]) -> bool:
    if isinstance(pred, Equals):
        return row[pred.column] is not None and row[pred.column] == pred.value
    if isinstance(pred, InSet):
        return row[pred.column] is not None and row[pred.column] in pred.values
    if isinstance(pred, TimeRange):
        t = row["_timestamp"]
        return t is not None and (pred.lo_ns is None or t >= pred.lo_ns) and \
            (pred.hi_ns is None or t <= pred.hi_ns)
    if isinstance(pred, And):
        return all(_matches(c, row) for c in pred.children)
    if isinstance(pred, Or):
        return any(_matches(c, row) for c in pred.children)
    if isinstance(pred, Not):
        return not _matches(pred.child, row)
    raise AssertionError(pred)


PROP_SCHEMA = Schema.create([Column("k", STRING), Column("n", LONG)]).arrow()


@st.composite
def extents(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rows = draw(st.integers(2000, 4000))
    pool = draw(st.integers(1500, 6000))          # distinct values: mostly past the 1,000 cap
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, pool, rows)
    nulls = rng.random(rows) < draw(st.sampled_from([0.0, 0.1, 0.5]))
    k = [None if nulls[i] else f"id-{keys[i]}" for i in range(rows)]
    n = [None if nulls[i] else int(keys[i]) * 7 - 3000 for i in range(rows)]
    table = pa.table({"_timestamp": pa.array(rng.integers(0, 10**6, rows),
                                             pa.timestamp("ns", tz="UTC")),
                      "props": pa.nulls(rows, pa.binary()), "k": k, "n": n},
                     schema=PROP_SCHEMA)
    block_rows = draw(st.sampled_from([64, 257, 1000, 4096]))
    value = st.integers(0, pool + 50)
    leaf = st.one_of(
        value.map(lambda v: Equals("k", f"id-{v}")),
        value.map(lambda v: Equals("n", v * 7 - 3000)),
        st.lists(value, max_size=5).map(lambda vs: InSet("k", tuple(f"id-{v}" for v in vs))),
        st.lists(value, max_size=5).map(lambda vs: InSet("n", tuple(v * 7 - 3000
                                                                     for v in vs))),
        st.integers(0, 10**6).map(lambda t: TimeRange(t, t + 50_000)),
        value.map(lambda v: Equals("n", f"{v}")))                   # another kind: keeps
    pred = draw(st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda c: And(tuple(c))),
        st.lists(inner, min_size=1, max_size=3).map(lambda c: Or(tuple(c))),
        inner.map(Not)), max_leaves=4))
    return table, block_rows, pred


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extents())
def test_pruning_with_block_filters_never_changes_answers(case) -> None:
    table, block_rows, pred = case
    store = MemoryObjectStore()
    path = _write(store, table, block_rows=block_rows)
    reader = TlmFormat().open_extent(store, path)
    count = reader.metadata().block_count
    kept = reader.pruned_blocks(pred)
    by_min_max = [i for i, s in enumerate(reader.metadata().block_stats) if evaluate(pred, s)]
    assert set(kept) <= set(by_min_max)

    def rows(blocks: list[int]) -> list[dict[str, Any]]:
        out = []
        for b in blocks:
            batch = reader.read_block(b)
            batch = batch.set_column(0, "_timestamp", pc.cast(batch.column(0), pa.int64()))
            out += [r for r in batch.to_pylist() if _matches(pred, r)]
        return out

    assert rows(kept) == rows(list(range(count)))
