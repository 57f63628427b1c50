"""Must show 3: retention removes exactly the expired data; GC never deletes a file a retained
snapshot references, and deletes planted orphans once past the grace period."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shoal.errors import SnapshotNotFoundError
from shoal.maintenance.retention import apply_retention
from shoal.maintenance.service import build_worker
from shoal.maintenance.status import maintenance_status
from tests.maintenance.helpers import (append_rows, make_table, open_db,
                                       referenced_objects_exist, row)

HOUR_NS = 3600 * 10**9


def _ns(rows) -> list[int]:
    return sorted(r["n"] for r in rows)


def test_retention_removes_exactly_expired_extents_and_keeps_time_travel(tmp_path,
                                                                          catalog_url):
    db = open_db(tmp_path, catalog_url)
    make_table(db, retention="1h", snapshot_retention="1h")
    now = time.time_ns()
    old = [append_rows(db, "ev", [row(i, j, ts=now - 3 * HOUR_NS + j) for j in range(3)])
           for i in range(3)]                                       # wholly expired
    straddle = append_rows(db, "ev", [row(10, 0, ts=now - 2 * HOUR_NS),
                                      row(10, 1, ts=now - 60 * 10**9)])  # one row still young
    # young data (stamped ahead, so it is still young when the clock is moved 2 h below)
    fresh = [append_rows(db, "ev", [row(20 + i, 0, ts=now + 2 * HOUR_NS - i * 10**9)])
             for i in range(3)]
    old_paths = [e.object_path for o in old for e in o.added]
    pre = db.catalog.load_table("ev").current_snapshot_id
    all_rows = _ns(db.read("ev")[0].to_pylist())

    unit = db.catalog.enqueue_work("retention", table="ev", payload={"table": "ev"})
    outcome = build_worker(db).run_one()
    assert outcome is not None and outcome.unit.id == unit.id and outcome.ok, outcome
    assert outcome.result["extents_removed"] == 3 and outcome.result["rows_removed"] == 9
    snap = db.catalog.snapshot("ev")
    assert snap.operation == "retention" and snap.snapshot_id == pre + 1
    kept = _ns(db.read("ev")[0].to_pylist())
    expected = sorted([100, 101] + [(20 + i) * 10 for i in range(3)])
    assert kept == expected                                # exactly the expired data gone
    assert {e.extent_id for e in db.catalog.manifests("ev")} == {
        e.extent_id for o in [straddle, *fresh] for e in o.added}
    # the pre-retention snapshot is retained: time travel sees everything, files are kept
    assert _ns(db.read("ev", snapshot_id=pre)[0].to_pylist()) == all_rows
    assert all(db.store.exists(p) for p in old_paths)
    # GC, even with no grace at all, never deletes a file a retained snapshot references
    gc = db.catalog.enqueue_work("gc", payload={"grace_s": 0})
    out = build_worker(db).run_one()
    assert out.unit.id == gc.id and out.ok and out.result["deleted"] == 0
    assert referenced_objects_exist(db, "ev") and all(db.store.exists(p) for p in old_paths)
    # a second retention run changes nothing
    again = apply_retention(db.catalog, db.coordinator, db.store, "ev")
    assert again.extents_removed == 0 and again.snapshot_id is None
    # two hours later (snapshot_retention 1h): the straddling extent is now wholly older
    # than 1h and goes too; every snapshot made before then expires (the newest of them,
    # the current one, stays), and the files only they referenced are deleted
    later = apply_retention(db.catalog, db.coordinator, db.store, "ev",
                            now=time.time() + 2 * 3600)
    assert later.extents_removed == 1 and later.rows_removed == 2
    assert later.oldest_retained_snapshot == later.snapshot_id == pre + 2
    assert later.snapshots_expired == pre + 1 and later.files_deleted == 4
    assert not any(db.store.exists(p) for p in old_paths)
    assert not any(db.store.exists(e.object_path) for e in straddle.added)
    with pytest.raises(SnapshotNotFoundError):
        db.catalog.table_counts("ev", pre)
    assert referenced_objects_exist(db, "ev")
    assert _ns(db.read("ev")[0].to_pylist()) == [(20 + i) * 10 for i in range(3)]
    status = maintenance_status(db.catalog)
    assert status["last"]["retention"]["result"]["rows_removed"] == 9
    assert status["last"]["gc"]["table"] is None
    db.close()


def test_gc_deletes_planted_orphans_after_grace_only(tmp_path):
    db = open_db(tmp_path)
    make_table(db)
    for i in range(4):
        append_rows(db, "ev", [row(i)])
    info = db.catalog.load_table("ev")
    prefix = f"tables/ev.{info.id}/extents"
    old_orphans = [f"{prefix}/orphan-old-{i}.tlm" for i in range(3)]
    young = f"{prefix}/orphan-young.tlm"
    for p in [*old_orphans, young]:
        db.store.put(p, b"KYMA\x02 not referenced by any manifest row")
    root = Path(tmp_path / "data" / "objects")
    two_hours_ago = time.time() - 7200
    for p in old_orphans:
        os.utime(root / p, (two_hours_ago, two_hours_ago))
    referenced = {e.object_path for e in db.catalog.manifests("ev")}
    for p in referenced:            # old referenced files are never orphans, however old
        os.utime(root / p, (two_hours_ago, two_hours_ago))

    db.catalog.enqueue_work("gc", payload={"grace_s": 3600})
    out = build_worker(db).run_one()
    assert out.ok and out.result["orphans"] == 3 and out.result["deleted"] == 3
    assert sorted(out.result["paths"]) == sorted(old_orphans)
    assert not any(db.store.exists(p) for p in old_orphans)
    assert db.store.exists(young)                       # inside the grace period
    assert all(db.store.exists(p) for p in referenced)
    assert db.catalog.table_counts("ev") == (4, 4)
    db.close()


def test_the_gc_unit_purges_a_dropped_table_once_its_retention_has_passed(tmp_path,
                                                                          catalog_url):
    db = open_db(tmp_path, catalog_url)
    try:
        make_table(db, snapshot_retention="1h")
        paths = [e.object_path for e in append_rows(db, "ev", [row(1), row(2)]).added]
        db.sql("DROP TABLE ev")
        worker = build_worker(db)
        db.catalog.enqueue_work("gc", payload={"grace_s": 0})
        out = worker.run_one()
        assert out.ok and out.result["tables_purged"] == 0 and out.result["deleted"] == 0
        assert all(db.store.exists(p) for p in paths)          # still undroppable
        worker.clock = lambda: time.time() + 2 * 3600
        db.catalog.enqueue_work("gc", payload={"grace_s": 0})
        out = worker.run_one()
        assert out.ok and out.result["tables_purged"] == 1
        assert out.result["purged_files"] == len(paths) == 1
        assert not any(db.store.exists(p) for p in paths)
        assert db.catalog.dropped_tables() == []
    finally:
        db.close()
