"""Must show 4: a worker killed (SIGKILL, a real process) mid-compaction leaves the table
intact; its unit is picked up again once the lease lapses, and the dead worker's outputs
are orphans that GC deletes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator
from shoal.maintenance.gc import collect_garbage
from shoal.maintenance.service import build_worker
from tests.maintenance.helpers import (append_rows, make_table, open_db,
                                       referenced_objects_exist, row)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _read_line(proc: subprocess.Popen, prefix: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if line.startswith(prefix):
                return line
            if not line and proc.poll() is not None:
                break
    raise AssertionError(f"no {prefix!r} line from the worker (exit {proc.poll()})")


def test_worker_killed_mid_compaction_leaves_table_intact_and_unit_reruns(spark, tmp_path):
    db = open_db(tmp_path)
    make_table(db, target_extent_size="64KB")
    for i in range(40):
        append_rows(db, "ev", [row(i, j) for j in range(3)])
    before_rows = sorted(db.read("ev")[0].column("n").to_pylist())
    counts = db.catalog.table_counts("ev")
    snap = db.catalog.load_table("ev").current_snapshot_id
    unit = db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"})

    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.maintenance.worker_proc", "--data-dir",
         str(tmp_path / "data"), "--name", "doomed", "--lease", "600",
         "--pause-at", "extents_written"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = _read_line(proc, "PAUSED", 120)
    finally:
        proc.kill()                                     # SIGKILL
        proc.wait(timeout=30)
    written = json.loads(line.split(" ", 2)[2])["paths"]
    assert written and all(db.store.exists(p) for p in written)

    # the table is intact: same snapshot, same extents, same rows
    assert db.catalog.load_table("ev").current_snapshot_id == snap
    assert db.catalog.table_counts("ev") == counts
    assert sorted(db.read("ev")[0].column("n").to_pylist()) == before_rows
    held = db.catalog.list_work(kinds=["compact"])[0]
    assert (held.id, held.state, held.lease_owner, held.attempts) == (unit.id, "running",
                                                                     "doomed", 1)

    # a worker that sees the unit's lease still running does not take it...
    assert build_worker(db, name="early").run_one() is None
    # ...once the dead worker's lease has lapsed (a catalog whose clock reads an hour later,
    # not a wait), another worker picks the unit up and finishes it
    later = open_catalog(db.config.resolved_catalog_url, clock=lambda: time.time() + 3600)
    host = SimpleNamespace(config=db.config, catalog=later, store=db.store,
                           formats=db.formats, query_engine=db.query_engine,
                           coordinator=CommitCoordinator(later, db.store, db.formats["tlm"]))
    outcome = build_worker(host, name="survivor").run_one()
    later.close()
    assert outcome is not None and outcome.unit.id == unit.id, outcome
    assert outcome.ok and outcome.recorded and outcome.unit.attempts == 2
    done = db.catalog.list_work(kinds=["compact"])[0]
    assert (done.state, done.result["worker"]) == ("done", "survivor")
    assert db.catalog.table_counts("ev")[0] == counts[0]
    assert db.catalog.table_counts("ev")[1] < counts[1]
    assert sorted(db.read("ev")[0].column("n").to_pylist()) == before_rows

    # the killed run's outputs were never committed: orphans, deleted by GC
    report = collect_garbage(db.catalog, db.store, grace_s=0)
    assert set(written) <= set(report.paths) and report.deleted == len(written)
    assert not any(db.store.exists(p) for p in written)
    assert referenced_objects_exist(db, "ev")
    db.close()
