"""Stage-1 pruning of long `IN` lists and long `OR`s, on SQLite and Postgres.

`IN (...)` with 1,000 values used to fail with SQLite's "Expression tree is too large";
now any list size compiles to a bounded condition, and the extents kept are exactly those
that can match (ground truth from the rows written), as they are for short lists.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.catalog.pruning import MAX_BLOOM_VALUES, compile_predicate
from shoal.commit import CommitCoordinator
from shoal.format.base import And, Equals, InSet, Or, TimeRange
from shoal.format.tlm import TlmFormat
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import INT, STRING, Column, Schema

SCHEMA = Schema.create([Column("service", STRING), Column("code", INT),
                        Column("trace_id", STRING)])
N = 40  # extents: extent i holds service svc-i, codes 10*i .. 10*i+9, 1,200 trace ids


@pytest.fixture
def table(catalog, tmp_path):
    store = open_store((tmp_path / "objects").as_uri())
    catalog.create_table("logs", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    info = catalog.load_table("logs")
    owner = {}
    entries = []
    for i in range(N):
        rows = [{"_timestamp": i * 10_000 + j, "props": None, "service": f"svc-{i}",
                 "code": 10 * i + j % 10, "trace_id": f"t{i}-{j}"} for j in range(1200)]
        e = coord.write_extent(info, [pa.RecordBatch.from_pylist(rows, SCHEMA.arrow())])
        owner[e.extent_id] = i
        entries.append(e)
    coord.append("logs", entries)
    return catalog, store, owner


def kept(catalog, owner, pred) -> set[int]:
    plan = catalog.plan_extents("logs", pred)
    assert plan.considered == N
    return {owner[e.extent_id] for e in plan.entries}


@pytest.mark.parametrize("n_values", [1000, pytest.param(5000, marks=pytest.mark.slow)])
def test_long_in_lists_prune_exactly(table, n_values):
    catalog, store, owner = table
    wanted = [3, 17, 38]
    services = [f"svc-{i}" for i in wanted] + [f"nope-{k}" for k in range(n_values - 3)]
    assert kept(catalog, owner, InSet("service", tuple(services))) == set(wanted)
    codes = [10 * i + 4 for i in wanted] + [100_000 + k for k in range(n_values - 3)]
    assert kept(catalog, owner, InSet("code", tuple(codes))) == set(wanted)
    # The same as equalities joined by OR, and inside an AND with a time range.
    ors = Or(tuple(Equals("service", s) for s in services))
    assert kept(catalog, owner, ors) == set(wanted)
    both = And((InSet("service", tuple(services)), TimeRange(0, 17 * 10_000 + 5)))
    assert kept(catalog, owner, both) == {3, 17}
    # Reading with and without pruning gives the same rows.
    pred = InSet("code", tuple(codes))
    pruned, stats = read_table(catalog, store, {"tlm": TlmFormat()}, "logs", pred)
    full, _ = read_table(catalog, store, {"tlm": TlmFormat()}, "logs", pred, prune=False)
    assert stats.extents_read == 3

    def match(t: pa.Table) -> list[int]:
        return sorted(c for c in t.column("code").to_pylist() if c in set(codes))

    assert match(pruned) == match(full) == sorted([10 * i + 4 for i in wanted] * 120)


def test_undecidable_and_mixed_values_stay_conservative(table):
    catalog, _, owner = table
    mixed = tuple([f"svc-{i}" for i in range(5)] + list(range(2000)) + [2**70])
    assert kept(catalog, owner, InSet("service", mixed)) == set(range(N))
    floats = tuple([1.5] * 10 + [f"svc-{i}" for i in range(100)])
    assert kept(catalog, owner, InSet("service", floats)) == set(range(N))
    assert kept(catalog, owner, Equals("code", 2**70)) == set(range(N))  # never bound
    assert kept(catalog, owner, InSet("service", ())) == set()


def test_long_lists_on_filtered_columns(table):
    """trace_id overflows the distinct cap, so membership filters decide short lists; a
    list longer than MAX_BLOOM_VALUES is not checked value by value (kept, never wrong)."""
    catalog, _, owner = table
    short = ("t5-7", "t9-1100")
    got = kept(catalog, owner, InSet("trace_id", short))
    assert {5, 9} <= got and len(got) <= 6
    long = short + tuple(f"x{k}" for k in range(MAX_BLOOM_VALUES))
    assert {5, 9} <= kept(catalog, owner, InSet("trace_id", long))


def test_compiled_size_is_bounded(table):
    catalog, _, owner = table
    history = catalog.schema_history("logs")
    wide = Or(tuple(And((Equals("service", f"svc-{k}"), Equals("code", 10 * k + 1)))
                    for k in range(3000)))
    assert kept(catalog, owner, wide) == set(range(N))  # runs; past the budget: kept
    for dialect in ("sqlite", "postgresql"):
        big = Or(tuple(And((Equals("service", f"s{k}"), Equals("code", k)))
                       for k in range(3000)))
        _, params = compile_predicate(big, dialect=dialect, history=history)
        assert len(params) <= 410
        _, params = compile_predicate(InSet("code", tuple(range(5000))), dialect=dialect,
                                      history=history)
        assert len(params) == 2
