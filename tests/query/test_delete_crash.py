"""A process killed (SIGKILL) while it runs a DELETE leaves the table as it was before the
statement or as it is after it, never in between; the extents it wrote and did not commit
are orphans that GC deletes."""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import shoal
from shoal.maintenance.gc import collect_garbage
from shoal.types import Column, parse_type
from tests.maintenance.helpers import referenced_objects_exist

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SQL = "DELETE FROM ev WHERE n % 3 = 0 OR n >= 500"


def _lines(proc: subprocess.Popen, timeout_s: float = 120):
    """The process's stdout lines as they come, read by a thread (a buffered reader may
    hold several lines that `select` would not report); the timeout only guards a hang."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError("the deleting process hung") from None
        if line is None:
            return
        yield line


def _table(tmp_path: Path, catalog_url: str | None):
    db = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url)
    db.create_table("ev", [Column("n", parse_type("long"))])
    for b in range(6):
        body = "\n".join(json.dumps({"n": b * 100 + i}) for i in range(100))
        db.ingest_ndjson("ev", body.encode())
    return db


def _ns(db) -> list[int]:
    return sorted(db.read("ev")[0].column("n").to_pylist())


def _kill_during(tmp_path: Path, catalog_url: str | None, *, pause_at: str | None,
                 kill_after: int | None) -> tuple[list[str], bool]:
    """Run the delete in a subprocess and SIGKILL it: at the stage `pause_at`, or right
    after reading `kill_after` stage lines (the process keeps running meanwhile, so the
    kill lands at a point the test does not choose). Returns the stage lines read and
    whether the process finished before the kill."""
    argv = [sys.executable, "-m", "tests.query.delete_proc", "--data-dir",
            str(tmp_path / "data"), "--sql", SQL, "--stages"]
    if catalog_url:
        argv += ["--catalog", catalog_url]
    if pause_at:
        argv += ["--pause-at", pause_at]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")
                                            + os.pathsep + str(ROOT)})
    seen: list[str] = []
    finished = False
    try:
        for line in _lines(proc):
            if line.startswith("STAGE "):
                seen.append(line)
            finished = line.startswith("DONE ")
            if (pause_at and line.startswith("PAUSED ")) or (
                    kill_after is not None and (line == "STARTED" and kill_after == 0
                                                or len(seen) >= kill_after > 0)):
                break
    finally:
        proc.kill()                                     # SIGKILL
        proc.wait(timeout=30)
    return seen, finished


def _check_before_or_after(db, before: list[int]) -> str:
    after = [n for n in before if not (n % 3 == 0 or n >= 500)]
    now = _ns(db)
    assert now in (before, after), "the table is between before and after the DELETE"
    # whatever the kill left unreferenced is an orphan; GC deletes it, and nothing the
    # catalog references is lost
    collect_garbage(db.catalog, db.store, grace_s=0)
    assert referenced_objects_exist(db, "ev")
    assert _ns(db) == now
    return "before" if now == before else "after"


@pytest.mark.parametrize("stage,expected", [("extents_written", "before"),
                                            ("committing", "before"),
                                            ("committed", "after")])
def test_kill_at_each_stage_of_a_delete(tmp_path, catalog_url, stage, expected):
    db = _table(tmp_path, catalog_url)
    before = _ns(db)
    _kill_during(tmp_path, catalog_url, pause_at=stage, kill_after=None)
    assert _check_before_or_after(db, before) == expected
    if expected == "before":         # the statement run again completes it
        report = db.query_engine.run_delete(_parsed())
        assert report.rows_deleted == sum(1 for n in before if n % 3 == 0 or n >= 500)
        assert _check_before_or_after(db, before) == "after"
    db.close()


@pytest.mark.parametrize("seed", range(4))
def test_kill_at_random_points_of_a_delete(tmp_path, seed):
    rng = random.Random(seed)
    db = _table(tmp_path, None)
    before = _ns(db)
    _kill_during(tmp_path, None, pause_at=None, kill_after=rng.randint(0, 3))
    _check_before_or_after(db, before)
    db.close()


def _parsed():
    from shoal.query.ddl import parse_ddl

    return parse_ddl(SQL)
