"""The embedded engine is bounded in memory, not in input: its scans stream in, and a
statement whose working memory passes `local_query_memory` spills under the data
directory's `scratch/` and finishes (with spilling off it is refused, naming the setting);
closing the client removes the spill directories, and ones left by a process that is gone
are removed when the next engine starts."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import shoal
from shoal.query.embedded.local_engine import LocalMemoryError
from shoal.types import LONG, STRING, Column

ROWS = 600_000          # per extent; two extents of 50-byte strings: ~70 MB to sort
MEMORY = 64 << 20

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("spill") / "data")
    db = shoal.connect(data_dir=d)
    db.create_table("t", [Column("n", LONG), Column("s", STRING)])
    info = db.catalog.load_table("t")
    for k in range(2):
        t = pa.table({
            "_timestamp": pa.array(range(k * ROWS, (k + 1) * ROWS), pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(ROWS, pa.binary()),
            "n": pa.array(range(k * ROWS, (k + 1) * ROWS), pa.int64()),
            "s": [f"{(i * 7919) % (2 * ROWS):012d}-{'y' * 38}" for i in range(k * ROWS,
                                                                          (k + 1) * ROWS)],
        }).cast(info.schema.arrow())
        db.coordinator.append("t", [db.coordinator.write_extent(info, t.to_batches())])
    db.close()
    return d


SORT = "SELECT s, n FROM t ORDER BY s DESC"


def test_a_sort_past_the_memory_limit_spills_and_finishes(data_dir):
    db = shoal.connect(data_dir=data_dir, local_query_memory=MEMORY)
    scratch = os.path.join(data_dir, "scratch")
    try:
        r = db.sql(SORT, engine="local")
        assert r.stats.engine == "local"
        s = r.table.column("s").to_pylist()
        assert len(s) == 2 * ROWS and s == sorted(s, reverse=True)
        assert s[0].startswith(f"{2 * ROWS - 1:012d}")
        assert os.listdir(scratch)          # the engine's databases have their directories
    finally:
        db.close()
    assert os.listdir(scratch) == []


def test_without_spilling_the_same_sort_is_refused_naming_the_setting(data_dir):
    db = shoal.connect(data_dir=data_dir, local_query_memory=MEMORY, local_query_spill_bytes=0)
    try:
        with pytest.raises(LocalMemoryError, match="SHOAL_LOCAL_QUERY_MEMORY"):
            db.sql(SORT, engine="local")
    finally:
        db.close()


def test_a_gone_process_spill_directory_is_removed_at_start(data_dir, tmp_path):
    scratch = os.path.join(data_dir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    # a pid that cannot be running: above the kernel's maximum
    with open("/proc/sys/kernel/pid_max") as f:
        dead = int(f.read()) + 1
    left = os.path.join(scratch, f"duckdb-{dead}-0")
    os.makedirs(left)
    open(os.path.join(left, "block"), "wb").close()
    db = shoal.connect(data_dir=data_dir)
    try:
        assert db.sql("SELECT count(*) AS c FROM t").table.to_pylist() == [{"c": 2 * ROWS}]
        assert not os.path.exists(left)
    finally:
        db.close()
