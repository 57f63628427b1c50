"""Crash points of a commit: a writer SIGKILLed before and after the CAS.

The writer is a real separate process (tests/support/writer.py) using the real coordinator,
catalog and store; it pauses at a named coordinator stage and is killed there with SIGKILL.
Readers must see all of a commit or none of it, and what a dead writer left behind must be
findable as an orphan. No test waits on time: the writer prints a line per commit stage
reached and per acknowledged append, and the test kills it on reading a chosen line.
"""

from __future__ import annotations

import json
import random
import signal
from collections import Counter

import pytest

from shoal.catalog import open_catalog
from shoal.format.tlm import TlmFormat
from shoal.maintenance.gc import collect_garbage
from shoal.maintenance.orphans import find_orphans
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import INT, Column, Schema
from tests.support.writer import spawn

SCHEMA = Schema.create([Column("writer", INT), Column("seq", INT)])


def kill_at(catalog_url: str, store_url: str, stage: str) -> dict:
    p = spawn(catalog_url, store_url, "--count", "1", "--pause-at", stage)
    line = p.stdout.readline().strip()
    assert line.startswith(f"PAUSED {stage} "), line
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    return json.loads(line.split(" ", 2)[2])


@pytest.fixture
def env(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    catalog.create_table("t", SCHEMA)
    # A first, completed commit so "nothing visible" is distinguishable from "empty table".
    done = spawn(catalog_url, local_store_url, "--count", "1")
    assert done.communicate(timeout=120)[0].split() == ["ACK", "0", "2", "DONE"]
    yield catalog, open_store(local_store_url), catalog_url, local_store_url
    catalog.close()


def visible_rows(catalog, store) -> int:
    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, "t")
    return data.num_rows


def test_killed_after_extent_written_before_cas(env):
    catalog, store, catalog_url, store_url = env
    first_written = catalog.manifests("t")[0].object_path
    kill_at(catalog_url, store_url, "extent_written")
    kill_at(catalog_url, store_url, "committing")
    # Nothing of either commit is visible...
    assert catalog.load_table("t").current_snapshot_id == 2
    assert visible_rows(catalog, store) == 1
    # ...and both extents they wrote are orphans, found and nothing else.
    orphans = find_orphans(catalog, store, grace_s=0)
    assert len(orphans) == 2
    assert all(store.exists(o.path) for o in orphans)
    assert first_written not in {o.path for o in orphans}
    # The grace period protects fresh objects of commits that may still be in flight.
    assert find_orphans(catalog, store, grace_s=3600) == []


def test_killed_after_cas(env):
    catalog, store, catalog_url, store_url = env
    info = kill_at(catalog_url, store_url, "committed")
    assert info["snapshot_id"] == 3
    assert catalog.load_table("t").current_snapshot_id == 3
    assert len(catalog.manifests("t")) == 2
    assert visible_rows(catalog, store) == 2
    assert find_orphans(catalog, store, grace_s=0) == []


STAGES = ("extent_written", "committing", "committed")


def kill_after(catalog_url: str, store_url: str, writer: int, stage: str, nth: int
               ) -> set[int]:
    """Run a writer of 500 appends; SIGKILL it once its `nth` `STAGE <stage>` line has been
    read. The seqs it acknowledged (`ACK` lines read before the kill)."""
    p = spawn(catalog_url, store_url, "--count", "500", "--writer", str(writer), "--stages")
    acked: set[int] = set()
    seen = 0
    while seen < nth:
        line = p.stdout.readline()
        assert line, f"the writer ended before stage {stage} #{nth} (exit {p.wait()})"
        kind, rest = line.split(" ", 1)
        if kind == "ACK":
            acked.add(int(rest.split()[0]))
        elif kind == "STAGE" and rest.split(" ", 1)[0] == stage:
            seen += 1
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL  # killed mid-stream, not finished
    return acked


@pytest.mark.slow
def test_killed_at_random_points(env):
    """SIGKILL mid-stream at each commit stage, after a random number of commits: every
    acknowledged row is visible exactly once, nothing is visible twice or half, and after
    orphan GC no object is left that the catalog does not reference."""
    catalog, store, catalog_url, store_url = env
    rng = random.Random(7)
    acked: dict[int, set[int]] = {}
    for writer, stage in enumerate(STAGES, start=1):
        acked[writer] = kill_after(catalog_url, store_url, writer, stage, rng.randint(3, 12))
        assert len(acked[writer]) >= 2     # the kill interrupted a stream of real commits

    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, "t")
    rows = Counter(zip(data.column("writer").to_pylist(), data.column("seq").to_pylist(),
                       strict=True))
    assert all(n == 1 for n in rows.values()), "no row may be visible twice"
    assert rows[(0, 0)] == 1                # the fixture's completed commit
    for writer, seqs in acked.items():
        landed = sorted(s for w, s in rows if w == writer)
        # Appends are sequential: what landed is a prefix of the stream, holding every
        # acknowledged seq and at most the one in flight at the kill besides.
        assert landed == list(range(len(landed))), f"writer {writer}: gaps in {landed}"
        assert seqs <= set(landed), f"writer {writer}: acknowledged seqs lost"
        assert len(landed) - len(seqs) <= 1, f"writer {writer}: {landed} vs acked {seqs}"
    entries = catalog.manifests("t")
    assert len(entries) == len(catalog.snapshots("t")) - 1  # one extent per append
    assert len(entries) == sum(rows.values())                 # one row per extent, whole

    # At most one in-flight extent per kill was left behind; GC removes exactly those.
    orphans = find_orphans(catalog, store, grace_s=0)
    assert len(orphans) <= len(STAGES)
    assert collect_garbage(catalog, store, grace_s=0).deleted == len(orphans)
    assert find_orphans(catalog, store, grace_s=0) == []
    assert all(store.exists(e.object_path) for e in entries)
    assert visible_rows(catalog, store) == len(entries)
