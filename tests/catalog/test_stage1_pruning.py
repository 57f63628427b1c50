"""Stage-1 pruning in the catalog: exactly the extents that can match, no object-store I/O.

Extents are real tlm extents written by the commit coordinator, so the stats under test are
the ones the format really produces. Ground truth is computed from the generated rows.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator
from shoal.format.base import (And, DynamicPathEquals, DynamicPathExists, Equals, InSet, Not,
                               Or, StringHas, TimeRange)
from shoal.format.tlm import TlmFormat
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import DYNAMIC, INT, LONG, STRING, Column, Schema

SEC = 1_000_000_000
SCHEMA = Schema.create([Column("service", STRING), Column("message", STRING),
                        Column("status", INT), Column("trace_id", STRING),
                        Column("attrs", DYNAMIC)])
N_EXTENTS = 1000


class CountingStore:
    """Wraps a real store and counts every read, to prove stage 1 reads no objects."""

    def __init__(self, inner):
        self.inner = inner
        self.reads = 0

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name in ("get", "get_range", "open_input", "size", "list", "exists"):
            def counted(*a, **kw):
                self.reads += 1
                return attr(*a, **kw)
            return counted
        return attr


def extent_rows(i: int) -> list[dict]:
    """Extent i: one service, one minute of data, one row per second."""
    rows = []
    for s in range(60):
        rows.append({
            "_timestamp": (i * 60 + s) * SEC, "props": None,
            "service": f"svc-{i % 50}",
            "message": f"request {'failed timeout' if i % 97 == 0 else 'ok'} shard{i % 7}",
            "status": 500 if i % 97 == 0 else 200,
            "trace_id": f"{i:08x}{s:024x}",
            "attrs": json.dumps({"http": {"method": "GET"}, **({"error": {"code": "E1"}}
                                                              if i % 97 == 0 else {})}).encode(),
        })
    return rows


@pytest.fixture(scope="module")
def populated(tmp_path_factory, request):
    """1,000 extents over SQLite; module-scoped because writing them takes a few seconds."""
    tmp = tmp_path_factory.mktemp("stage1")
    catalog = open_catalog(f"sqlite:///{tmp / 'catalog.db'}")
    store = open_store((tmp / "objects").as_uri())
    catalog.create_table("logs", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    info = catalog.load_table("logs")
    truth: dict[str, list[dict]] = {}
    for chunk in range(10):
        entries = []
        for i in range(chunk * 100, chunk * 100 + 100):
            rows = extent_rows(i)
            e = coord.write_extent(info, [pa.RecordBatch.from_pylist(rows, SCHEMA.arrow())])
            truth[e.extent_id] = rows
            entries.append(e)
        coord.append("logs", entries)
    yield catalog, store, truth
    catalog.close()


def matching_extents(truth, row_pred) -> set[str]:
    return {eid for eid, rows in truth.items() if any(row_pred(r) for r in rows)}


def planned(catalog, pred) -> set[str]:
    plan = catalog.plan_extents("logs", pred)
    assert plan.considered == N_EXTENTS and plan.pruned == N_EXTENTS - len(plan.entries)
    return {e.extent_id for e in plan.entries}


def test_service_and_time_range_exact_without_object_reads(populated):
    catalog, store, truth = populated
    lo, hi = 200 * 60 * SEC, 400 * 60 * SEC - 1
    pred = And((Equals("service", "svc-7"), TimeRange(lo, hi)))
    counting = CountingStore(store)
    plan = catalog.plan_extents("logs", pred)
    assert counting.reads == 0  # stage 1 never touches the object store
    got = {e.extent_id for e in plan.entries}
    expected = matching_extents(truth, lambda r: r["service"] == "svc-7"
                                and lo <= r["_timestamp"] <= hi)
    assert got == expected and len(expected) == 4
    assert plan.considered == 1000 and plan.pruned == 996
    # Reading the plan touches only those 4 extents and returns the right rows.
    data, stats = read_table(catalog, counting, {"tlm": TlmFormat()}, "logs", pred)
    assert stats.extents_read == 4
    assert data.num_rows == 4 * 60


@pytest.mark.parametrize("name,pred,row_pred", [
    ("time only", TimeRange(10 * 60 * SEC + 30 * SEC, 12 * 60 * SEC),
     lambda r: 630 * SEC <= r["_timestamp"] <= 720 * SEC),
    ("in set", InSet("service", ("svc-1", "svc-2")), lambda r: r["service"] in ("svc-1",
                                                                               "svc-2")),
    ("int equals", Equals("status", 500), lambda r: r["status"] == 500),
    ("token", StringHas("message", "TIMEOUT"), lambda r: "timeout" in r["message"]),
    ("or", Or((Equals("service", "svc-3"), StringHas("message", "failed"))),
     lambda r: r["service"] == "svc-3" or "failed" in r["message"]),
    ("path exists", DynamicPathExists("attrs", "error.code"),
     lambda r: b'"error"' in r["attrs"]),
    ("path equals", DynamicPathEquals("attrs", "error.code", "E1"),
     lambda r: b'"E1"' in r["attrs"]),
])
def test_predicates_prune_exactly(populated, name, pred, row_pred):
    catalog, _, truth = populated
    expected = matching_extents(truth, row_pred)
    assert 0 < len(expected) < N_EXTENTS
    assert planned(catalog, pred) == expected


def test_undecidable_predicates_keep_everything(populated):
    catalog, _, truth = populated
    assert len(planned(catalog, Not(Equals("service", "svc-1")))) == N_EXTENTS
    assert len(planned(catalog, Equals("message", 5))) == N_EXTENTS  # type mismatch: keep
    assert len(planned(catalog, Equals("no_such_column", "x"))) == N_EXTENTS
    assert planned(catalog, Equals("service", "nope")) == set()
    assert planned(catalog, TimeRange(5, 4)) == set()


def test_membership_filter_prunes_high_cardinality_needles(tmp_path):
    catalog = open_catalog(f"sqlite:///{tmp_path / 'c.db'}")
    store = open_store((tmp_path / "o").as_uri())
    catalog.create_table("spans", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    info = catalog.load_table("spans")
    owner = {}
    entries = []
    for i in range(20):
        rows = [{"_timestamp": j, "props": None, "trace_id": f"t{i}-{j}"} for j in range(1500)]
        e = coord.write_extent(info, [pa.RecordBatch.from_pylist(rows, SCHEMA.arrow())])
        assert e.column_stats["trace_id"]["distinct"] is None  # overflowed the 1,000 cap
        assert "trace_id" in e.membership_filters
        owner[e.extent_id] = i
        entries.append(e)
    coord.append("spans", entries)
    plan = catalog.plan_extents("spans", Equals("trace_id", "t13-777"))
    kept = {owner[e.extent_id] for e in plan.entries}
    assert 13 in kept and len(kept) <= 2  # ~1% false positives allowed
    plan = catalog.plan_extents("spans", InSet("trace_id", ("t3-1", "t4-2")))
    assert {3, 4} <= {owner[e.extent_id] for e in plan.entries}
    assert plan.pruned >= 16


def test_widened_column_never_pruned_wrongly(catalog, tmp_path):
    """Stats of extents written while `code` was an int must not decide string lookups."""
    store = open_store((tmp_path / "o").as_uri())
    schema = Schema.create([Column("code", INT)])
    catalog.create_table("t", schema)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    old = pa.RecordBatch.from_pylist([{"_timestamp": 1, "props": None, "code": 5}],
                                     schema.arrow())
    coord.append_batches("t", [old])
    coord.evolve_schema("t", [Column("code", STRING)])
    new_schema = catalog.load_table("t").schema
    new = pa.RecordBatch.from_pylist([{"_timestamp": 2, "props": None, "code": "abc"}],
                                     new_schema.arrow())
    coord.append_batches("t", [new])
    plan = catalog.plan_extents("t", Equals("code", "5"))
    assert len(plan.entries) == 1 and plan.entries[0].schema_version == 1
    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, "t", Equals("code", "5"))
    assert data.column("code").to_pylist() == ["5"]  # upgraded on read: CAST(5 AS string)
    # The int-era extent cannot be decided by its stats for a string lookup: kept.
    assert len(catalog.plan_extents("t", Equals("code", "abc")).entries) == 2
    coord.evolve_schema("t", [Column("code", STRING), Column("n", LONG)])
    plan = catalog.plan_extents("t", Equals("code", "zzz"))
    assert [e.schema_version for e in plan.entries] == [1]
