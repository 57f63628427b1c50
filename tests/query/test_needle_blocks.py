"""A needle inside one compacted extent of 1M rows reads one block.

Four appended extents of 250,000 rows are compacted (the maintenance worker, on Spark) into
one extent of 1M rows in 64k-row blocks; its per-block membership filters
(`shoal.format.blockfilters`) let stage 2 keep only the block holding the trace id, on both
engines, and the answer is the right row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import shoal
from shoal.format.blockfilters import column_span, filter_ref
from shoal.maintenance.service import build_worker
from shoal.query.scan_plan import FooterCache
from shoal.types import INT, STRING, Column
from tests.query.conftest import SPARK_MASTER, T0, ns

ROWS = 1_000_000
PARTS = 4

pytestmark = pytest.mark.slow


def _hex_ids(rng: np.random.Generator, n: int) -> pa.Array:
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    data = digits[rng.integers(0, 16, size=(n, 32), dtype=np.uint8)].tobytes()
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, spark):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("needle")),
                       spark_master=SPARK_MASTER)
    db.create_table("spans", [Column("service", STRING), Column("trace_id", STRING),
                              Column("status", INT)])
    schema = db.catalog.load_table("spans").schema.arrow()
    rng = np.random.default_rng(13)
    per = ROWS // PARTS
    ids: list[pa.Array] = []
    for k in range(PARTS):
        trace = _hex_ids(rng, per)
        ids.append(trace)
        db.append("spans", pa.table({
            "_timestamp": pa.array(ns(T0) + (k * per + np.arange(per)) * 1_000_000,
                                   pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(per, pa.binary()),
            "service": pa.array([f"svc-{i % 20}" for i in range(per)]),
            "trace_id": trace,
            "status": pa.array(np.where(np.arange(per) % 50 == 0, 500, 200), pa.int32()),
        }, schema=schema))
    db.catalog.enqueue_work("compact", table="spans", payload={"table": "spans"})
    outcome = build_worker(db).run_one()
    assert outcome is not None and outcome.ok, outcome
    yield db, pa.chunked_array(ids)
    db.close()


def test_compaction_writes_one_extent_with_block_filters(compacted):
    db, _ = compacted
    [extent] = db.catalog.manifests("spans")
    assert (extent.row_count, extent.block_count) == (ROWS, 16)
    reader = db.formats[extent.format].open_extent(db.store, extent.object_path)
    stats = reader.metadata().block_stats
    assert all(filter_ref(s, "trace_id") is not None for s in stats)
    assert not any(filter_ref(s, "service") for s in stats)   # 20 values: distinct set


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_needle_in_a_compacted_extent_reads_one_block(compacted, engine):
    db, ids = compacted
    [extent] = db.catalog.manifests("spans")
    block_stats = db.formats[extent.format].open_extent(
        db.store, extent.object_path).metadata().block_stats
    lo, hi = column_span(block_stats, "trace_id")
    filters = hi - lo               # every block's trace_id filter: one read, when cold
    for row in (3, 400_123, ROWS - 1):
        needle = ids[row].as_py()
        res = db.sql(f"SELECT _timestamp, service, trace_id, status FROM spans "
                     f"WHERE trace_id = '{needle}'", engine=engine)
        assert res.table.column("trace_id").to_pylist() == [needle]
        assert res.table.column("service").to_pylist() == [f"svc-{row % (ROWS // PARTS) % 20}"]
        stats = res.stats.to_json()
        assert stats["engine"] == engine
        assert (stats["extents_read"], stats["blocks_considered"], stats["blocks_read"]) == \
            (1, 16, 1), stats
        # one block of 16 and the extent's tail, besides the filters
        assert 0 < stats["bytes_read"] < filters + extent.byte_size / 8, (
            stats, extent.byte_size, filters)
    absent = db.sql("SELECT * FROM spans WHERE trace_id = 'not-a-trace'", engine=engine)
    assert absent.table.num_rows == 0 and absent.stats.to_json()["blocks_read"] == 0


def test_block_filters_are_read_once_per_process(compacted):
    """Cold, stage 2 fetches the trace_id filters of all 16 blocks (one range read); the next
    needle finds them in the cache and reads only its block."""
    db, ids = compacted
    db.query_engine.footers = FooterCache()
    sql = "SELECT trace_id FROM spans WHERE trace_id = '{}'"
    cold = db.sql(sql.format(ids[10].as_py()), engine="local").stats.to_json()
    warm = db.sql(sql.format(ids[900_000].as_py()), engine="local").stats.to_json()
    assert cold["blocks_read"] == warm["blocks_read"] == 1
    assert warm["bytes_read"] < cold["bytes_read"] - 1_000_000, (cold, warm)
