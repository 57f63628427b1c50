"""Stage 1's per-process cache of manifest entries and membership filters
(`shoal.catalog.cache`): it speeds planning up and never changes which extents a snapshot
sees. Over SQLite and Postgres, with real tlm extents whose trace ids overflow the distinct
set (so each extent carries a bloom filter)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.catalog import open_catalog
from shoal.catalog.cache import MISSING, ExtentCache
from shoal.commit import CommitCoordinator
from shoal.format.base import Equals, InSet
from shoal.format.tlm import TlmFormat
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import STRING, Column, Schema

SCHEMA = Schema.create([Column("trace_id", STRING)])
ROWS = 1500          # > the 1,000-value distinct cap: the extent gets a filter


def rows(tag: str, t0: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"_timestamp": t0 + j, "props": None, "trace_id": f"{tag}-{j}"} for j in range(ROWS)],
        SCHEMA.arrow())


@pytest.fixture
def history(catalog, tmp_path):
    """Snapshots: 2 adds A, 3 adds B, 4 replaces A by C (same rows, as compaction would)."""
    store = open_store((tmp_path / "o").as_uri())
    catalog.create_table("spans", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    info = catalog.load_table("spans")
    a = coord.write_extent(info, [rows("a", 0)])
    assert "trace_id" in a.membership_filters
    coord.append("spans", [a])
    b = coord.write_extent(info, [rows("b", 10_000)])
    coord.append("spans", [b])
    c = coord.write_extent(info, [rows("a", 0)])
    tip = catalog.load_table("spans").current_snapshot_id
    catalog.commit("spans", expected_snapshot_id=tip, operation="compact", commit_id="c1",
                   add=[c], remove=[a.extent_id])
    return store, {"A": a.extent_id, "B": b.extent_id, "C": c.extent_id}


def planned(catalog, pred, snapshot_id=None) -> list[str]:
    return [e.extent_id for e in catalog.plan_extents("spans", pred,
                                                      snapshot_id=snapshot_id).entries]


def test_cached_filter_never_used_outside_the_snapshot_read(catalog, catalog_url, history):
    store, ids = history
    names = {v: k for k, v in ids.items()}
    needle = Equals("trace_id", "a-777")

    # Warm the cache with every extent that ever existed, A included (time travel).
    assert [names[i] for i in planned(catalog, needle, snapshot_id=3)] == ["A"]
    assert [names[i] for i in planned(catalog, needle)] == ["C"]
    cache = catalog.extent_cache
    table_id = catalog.load_table("spans").id
    assert cache.get(("filter", table_id, ids["A"], "trace_id")) not in (None, MISSING)

    # The current snapshot never gets A back from the cache, time travel never gets C.
    for _ in range(2):
        assert [names[i] for i in planned(catalog, needle)] == ["C"]
        assert [names[i] for i in planned(catalog, needle, snapshot_id=2)] == ["A"]
        assert [names[i] for i in planned(catalog, needle, snapshot_id=3)] == ["A"]
        assert planned(catalog, Equals("trace_id", "b-5"), snapshot_id=2) == []
        assert [names[i] for i in planned(catalog, None)] == ["C", "B"]
        assert [names[i] for i in planned(catalog, None, snapshot_id=3)] == ["A", "B"]

    # The mutable field is the one the query read, not the cached one.
    at3 = catalog.plan_extents("spans", needle, snapshot_id=3).entries
    assert at3[0].removed_snapshot_id == 4
    assert catalog.plan_extents("spans", needle).entries[0].removed_snapshot_id is None

    # A warm catalog plans like a cold one (no cache at all), at every snapshot.
    cold = open_catalog(catalog_url)
    cold.extent_cache = ExtentCache(0)
    try:
        for sid in (2, 3, 4):
            for pred in (needle, Equals("trace_id", "b-1"), InSet("trace_id", ("a-1", "b-2")),
                         Equals("trace_id", "zzz"), None):
                assert planned(catalog, pred, sid) == planned(cold, pred, sid)
    finally:
        cold.close()

    # Answers with pruning (warm cache) equal answers without, at every snapshot.
    formats = {"tlm": TlmFormat()}
    for sid in (2, 3, 4):
        for pred in (needle, Equals("trace_id", "b-1499"), InSet("trace_id", ("a-3", "b-4"))):
            pruned, _ = read_table(catalog, store, formats, "spans", pred, snapshot_id=sid)
            full, _ = read_table(catalog, store, formats, "spans", pred, snapshot_id=sid,
                                 prune=False)
            got = pruned.filter(_mask(pruned, pred)).column("trace_id").to_pylist()
            want = full.filter(_mask(full, pred)).column("trace_id").to_pylist()
            assert sorted(got) == sorted(want)
            if pred is needle:
                assert got == ["a-777"]



def _mask(table: pa.Table, pred) -> pa.Array:
    import pyarrow.compute as pc
    values = [pred.value] if isinstance(pred, Equals) else list(pred.values)
    return pc.is_in(table.column("trace_id"), value_set=pa.array(values))


def test_expired_extents_plan_the_same_after_expiry(catalog, history):
    """Expiry deletes A's manifest row and filter; the cache still holding them changes
    nothing: A is not in any remaining snapshot."""
    _, ids = history
    needle = Equals("trace_id", "a-9")
    assert planned(catalog, needle, snapshot_id=3) == [ids["A"]]
    catalog.expire_snapshots("spans", keep_from=4)
    assert planned(catalog, needle) == [ids["C"]]
    assert sorted(planned(catalog, None)) == sorted([ids["B"], ids["C"]])


def test_cache_is_bounded_by_bytes():
    cache = ExtentCache(max_bytes=1000)
    for i in range(100):
        cache.put(("filter", 1, f"e{i}", "c"), i, 96)
        assert cache.nbytes <= 1000
    assert len(cache) == 10
    assert cache.get(("filter", 1, "e0", "c")) is MISSING      # oldest out first
    assert cache.get(("filter", 1, "e99", "c")) == 99
    cache.get(("filter", 1, "e90", "c"))                        # touched: kept
    cache.put(("x",), "big", 500)
    assert cache.get(("filter", 1, "e90", "c")) == 90
    assert cache.get(("filter", 1, "e91", "c")) is MISSING
    cache.put(("huge",), "too big", 5000)                       # larger than the budget
    assert cache.get(("huge",)) is MISSING and cache.nbytes <= 1000


def test_bounded_cache_keeps_planning_exact(catalog_url, history):
    """A budget too small for one filter (every lookup a miss) plans the same."""
    catalog_small = open_catalog(catalog_url)
    catalog_small.extent_cache = ExtentCache(200)
    _, ids = history
    try:
        assert planned(catalog_small, Equals("trace_id", "a-5")) == [ids["C"]]
        assert planned(catalog_small, Equals("trace_id", "a-5"), snapshot_id=3) == [ids["A"]]
        assert catalog_small.extent_cache.nbytes <= 200
    finally:
        catalog_small.close()
