"""Must show 1: 500 small ingests -> compaction -> far fewer extents; a fixed set of queries
answers the same before and after (and prunes at least as well); time travel to the
pre-compaction snapshot works until snapshot expiry, which then deletes the old files."""

from __future__ import annotations

import time

import pytest

from shoal.errors import ShoalError
from shoal.maintenance.compaction import plan_compaction
from shoal.maintenance.policy import TablePolicy
from shoal.maintenance.retention import expire_snapshots
from shoal.maintenance.service import build_worker
from shoal.types import Column, parse_type
from tests.maintenance.helpers import (append_rows, make_table, object_count, open_db,
                                       referenced_objects_exist, row)

pytestmark = pytest.mark.slow

QUERIES = {
    "count": "SELECT count(*) AS c FROM ev",
    "by_svc": "SELECT svc, count(*) AS c, sum(n) AS s FROM ev GROUP BY svc ORDER BY svc",
    "needle": "SELECT n, trace FROM ev WHERE trace = 't00321x2'",
    "needle_absent": "SELECT n FROM ev WHERE trace = 'no-such-trace'",
    "int_eq": "SELECT trace FROM ev WHERE n = 4171",
    "token": "SELECT count(*) AS c FROM ev WHERE has(msg, 'request') AND n < 100",
    "evolved": "SELECT region, count(*) AS c FROM ev GROUP BY region ORDER BY region",
    "subquery": "SELECT count(*) AS c FROM ev WHERE n > (SELECT avg(n) FROM ev)",
    "self_join": ("SELECT count(*) AS c FROM ev a JOIN ev b ON a.trace = b.trace "
                  "WHERE b.svc = 'svc3'"),
}

TRAVEL = ("count", "by_svc", "needle", "evolved")


def _answers(db, snapshot: int | None = None, names=QUERIES) -> dict[str, tuple[list, dict]]:
    out = {}
    for name in names:
        sql = QUERIES[name]
        if snapshot is not None:
            sql = sql.replace("FROM ev", f"FROM ev VERSION AS OF {snapshot}")
        res = db.sql(sql)
        out[name] = (res.table.to_pylist(), res.stats.to_json())
    return out


def test_500_small_ingests_compact_to_few_extents_with_same_answers(spark, tmp_path):
    db = open_db(tmp_path)
    make_table(db, target_extent_size="96KB", compact_min_extents=16)
    base = time.time_ns() - 10**12
    for i in range(500):
        if i == 250:    # half the extents predate the column: compaction upgrades them
            db.add_columns("ev", [Column("region", parse_type("string"))])
        extra = {"region": f"r{i % 3}"} if i >= 250 else {}
        append_rows(db, "ev", [row(i, j, ts=base + i * 10_000 + j, **extra) for j in range(4)])
    rows_before, extents_before = db.catalog.table_counts("ev")
    assert (rows_before, extents_before) == (2000, 500)
    pre = db.catalog.load_table("ev").current_snapshot_id
    before = _answers(db)
    assert before["needle"][0] == [{"n": 3212, "trace": "t00321x2"}]
    assert before["int_eq"][0] == [{"trace": "t00417x1"}]
    objects_before = object_count(db)

    unit = db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"})
    outcome = build_worker(db).run_one()
    assert outcome is not None and outcome.unit.id == unit.id and outcome.ok, outcome
    assert outcome.result["live_extents_before"] == 500
    assert outcome.result["live_extents_after"] == db.catalog.table_counts("ev")[1]

    rows_after, extents_after = db.catalog.table_counts("ev")
    assert rows_after == 2000
    assert extents_after <= 20                      # far fewer extents
    current = db.catalog.load_table("ev")
    assert all(e.schema_version == current.schema.version
               for e in db.catalog.manifests("ev"))   # rows upgraded in the background
    assert db.catalog.snapshot("ev").operation == "compact"
    after = _answers(db)
    for name in QUERIES:
        assert after[name][0] == before[name][0], name
        # prunes at least as well: never more extents read than before compaction
        assert after[name][1]["extents_read"] <= before[name][1]["extents_read"], name
    assert after["needle_absent"][1]["extents_read"] == 0
    assert after["needle"][1]["extents_read"] == 1
    assert after["needle"][1]["extents_pruned"] == extents_after - 1
    left = plan_compaction(db.catalog.manifests("ev"),
                           TablePolicy.from_properties(current.properties))
    assert sum(len(g.entries) for g in left) < 16     # nothing left for the scheduler

    # time travel to the pre-compaction snapshot: the 500 old extents answer the same
    travel = _answers(db, snapshot=pre, names=TRAVEL)
    for name in TRAVEL:
        assert travel[name][0] == before[name][0], name
    assert db.catalog.table_counts("ev", pre) == (2000, 500)
    assert object_count(db) == objects_before + outcome.result["extents_added"]

    # within snapshot retention nothing expires
    expire_snapshots(db.catalog, db.store, "ev", older_than_s=3600)
    assert db.catalog.table_counts("ev", pre) == (2000, 500)
    # once the pre-compaction snapshots are past retention: unreadable, old files deleted
    report = expire_snapshots(db.catalog, db.store, "ev", older_than_s=3600,
                              now=time.time() + 7200)
    assert report.files_deleted == 500 + outcome.result["extents_added"] - extents_after
    assert report.snapshots_expired == current.current_snapshot_id - 1
    with pytest.raises(ShoalError):
        db.sql(f"SELECT count(*) FROM ev VERSION AS OF {pre}")
    assert object_count(db) == extents_after
    assert referenced_objects_exist(db, "ev")
    final = _answers(db, names=TRAVEL)
    for name in TRAVEL:
        assert final[name][0] == before[name][0], name
    db.close()
