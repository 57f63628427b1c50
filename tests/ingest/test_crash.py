"""Crash points of a commit: a writer SIGKILLed before and after the CAS.

The writer is a real separate process (tests/support/writer.py) using the real coordinator,
catalog and store; it pauses at a named coordinator stage and is killed there with SIGKILL.
Readers must see all of a commit or none of it, and what a dead writer left behind must be
findable as an orphan.
"""

from __future__ import annotations

import json
import random
import signal
import time

import pytest

from shoal.catalog import open_catalog
from shoal.format.tlm import TlmFormat
from shoal.maintenance.orphans import find_orphans
from shoal.query.scan import read_table
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
    assert done.communicate(timeout=120)[0].strip() == "DONE"
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


@pytest.mark.slow
def test_killed_at_random_points(env):
    """SIGKILL mid-stream, three times: every visible snapshot is whole, orphans are few."""
    catalog, store, catalog_url, store_url = env
    rng = random.Random(7)
    for _ in range(3):
        p = spawn(catalog_url, store_url, "--count", "500")
        time.sleep(rng.uniform(0.8, 2.0))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        assert p.returncode == -signal.SIGKILL  # killed mid-stream, not finished
    snaps = catalog.snapshots("t")
    assert len(snaps) > 10  # the kills interrupted a stream of real commits
    entries = catalog.manifests("t")
    assert len(entries) == len(snaps) - 1  # one extent per append, none half-published
    assert visible_rows(catalog, store) == len(entries)
    # At most one in-flight extent per kill was left behind.
    assert len(find_orphans(catalog, store, grace_s=0)) <= 3
