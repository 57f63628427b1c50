"""tlm over the real object stores: a local directory (memory maps) and S3 (range GETs)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from shoal.format import TimeRange
from shoal.format.tlm import TlmFormat
from shoal.storage import open_store
from shoal.types import LONG, STRING, Column, Schema

SCHEMA = Schema.create([Column("a", LONG), Column("s", STRING)]).arrow()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def real_store(request, local_store_url):
    if request.param == "local":
        return open_store(local_store_url)
    return request.getfixturevalue("s3_store")


def test_round_trip_and_partial_reads(real_store) -> None:
    rng = np.random.default_rng(3)
    n = 50_000
    table = pa.Table.from_pydict({
        "_timestamp": np.arange(n), "props": [None] * n, "a": rng.integers(0, 2**62, n),
        "s": [f"{x:x}" for x in rng.integers(0, 2**62, n)]}, schema=SCHEMA)
    fmt = TlmFormat(compression="lz4", tail_prefetch=16 * 1024)
    w = fmt.start_extent(real_store, "tables/1/extents", SCHEMA, block_rows=5_000)
    w.append(table)
    result = w.finish()
    assert real_store.size(result.object_path) == result.byte_size
    assert result.object_path.startswith("tables/1/extents/")

    reader = fmt.open_extent(real_store, result.object_path)
    assert reader.metadata().row_count == n
    assert reader.pruned_blocks(TimeRange(12_000, 12_001)) == [2]
    block = reader.read_block(2, ["s"])
    assert block.column(0).to_pylist() == table.column("s").to_pylist()[10_000:15_000]
    assert reader.bytes_read < result.byte_size / 10
    full = pa.Table.from_batches([reader.read_block(i) for i in range(10)])
    assert full.equals(table, check_metadata=True)
    reader.close()
