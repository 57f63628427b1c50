"""tlm over the real object stores: a local directory (memory maps) and S3 (range GETs)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from shoal.format import TimeRange
from shoal.format.tlm import TlmFormat
from shoal.storage import open_store
from shoal.types import DYNAMIC, INT, LONG, STRING, Column, Schema

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


WIDE = Schema.create([Column("level", STRING), Column("message", STRING),
                      Column("trace_id", STRING), Column("status", INT),
                      Column("duration", LONG), Column("attrs", DYNAMIC)]).arrow()


def _wide_table(n: int) -> pa.Table:
    rng = np.random.default_rng(5)
    words = np.array(["request", "served", "cache", "miss", "user", "login", "timeout"])
    return pa.Table.from_pydict({
        "_timestamp": np.arange(n) * 1_000_000, "props": [None] * n,
        "level": rng.choice(["debug", "info", "warn", "error"], n).tolist(),
        "message": [" ".join(rng.choice(words, 6)) + f" id={i}" for i in range(n)],
        "trace_id": [f"{x:032x}" for x in rng.integers(0, 2**62, n)],
        "status": rng.choice([200, 404, 500], n).astype(np.int32),
        "duration": rng.integers(0, 10**7, n),
        "attrs": [f'{{"user_id":{x},"route":"/api/{x % 7}"}}'.encode()
                  for x in rng.integers(0, 10**6, n)],
    }, schema=WIDE)


def test_v3_projection_fetches_only_the_projected_column(real_store) -> None:
    """A v3 extent read for one small column fetches that column's chunks of that block and
    nothing else: one range read after the open, a sliver of the object."""
    table = _wide_table(40_000)
    fmt = TlmFormat()
    w = fmt.start_extent(real_store, "tables/2/extents", WIDE, block_rows=10_000)
    w.append(table)
    result = w.finish()

    reader = fmt.open_extent(real_store, result.object_path)
    assert reader.metadata().version == 3
    opened = reader.bytes_read
    assert opened <= 5 + 64 * 1024                     # head + one speculative tail read
    level = reader.read_block(2, ["level"])
    assert level.column(0).to_pylist() == table.column("level").to_pylist()[20_000:30_000]
    one_column = reader.bytes_read - opened
    assert one_column < result.byte_size / 100         # the dictionary-coded level column
    before = reader.bytes_read
    block = reader.read_block(3)
    whole_block = reader.bytes_read - before
    assert block.equals(table.slice(30_000).to_batches()[0])
    assert one_column < whole_block / 20
    assert reader.bytes_read < result.byte_size / 2
    reader.close()
