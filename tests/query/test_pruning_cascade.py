"""Needle queries through the whole cascade on 200 extents: the answer is the same with and
without pruning, and pruning reads at most 2% of the extents (and says so)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import shoal
from shoal.types import LONG, STRING, Column
from tests.query.conftest import SPARK_MASTER

EXTENTS = 200
ROWS = 1_500                      # > the 1,000 distinct cap: trace ids need the bloom filter
BASE_NS = 1_772_323_200_000_000_000
MINUTE = 60 * 1_000_000_000


@pytest.fixture(scope="module")
def needle_db(tmp_path_factory, spark):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("needle")),
                       spark_master=SPARK_MASTER)
    db.create_table("logs", [Column("service", STRING), Column("trace_id", STRING),
                             Column("status", LONG), Column("message", STRING)])
    schema = db.catalog.load_table("logs").schema.arrow()
    rng = random.Random(7)
    for e in range(EXTENTS):
        start = BASE_NS + e * 10 * MINUTE                 # each extent: its own 10 minutes
        ts = sorted(start + rng.randrange(10 * MINUTE) for _ in range(ROWS))
        t = pa.table({
            "_timestamp": pa.array(ts, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(ROWS, pa.binary()),
            "service": [f"svc-{e % 40}"] * ROWS,          # each service in 5 extents
            "trace_id": [f"{e:04d}{i:04d}{rng.getrandbits(96):024x}" for i in range(ROWS)],
            "status": [200 + (i % 7) for i in range(ROWS)],
            "message": [f"request {i} done" for i in range(ROWS)],
        }).cast(schema)
        db.append("logs", t)
    yield db
    db.close()


def _same_rows_both_ways(db, sql: str) -> dict:
    pruned = db.sql(sql)
    full = db.sql(sql, prune=False)
    assert sorted(map(str, pruned.table.to_pylist())) == sorted(map(str, full.table.to_pylist()))
    stats, full_stats = pruned.stats.to_json(), full.stats.to_json()
    assert full_stats["extents_read"] == EXTENTS
    assert stats["extents_considered"] == EXTENTS
    assert stats["bytes_read"] < full_stats["bytes_read"] / 10
    return {"rows": pruned.table.num_rows, **stats}


def test_trace_id_needle_reads_at_most_two_percent(needle_db):
    db = needle_db
    tid = db.query("SELECT trace_id FROM logs WHERE service = 'svc-13' AND status = 203 "
                   "LIMIT 1").column(0)[0].as_py()
    got = _same_rows_both_ways(db, f"SELECT * FROM logs WHERE trace_id = '{tid}'")
    assert got["rows"] == 1
    assert got["extents_read"] <= EXTENTS * 0.02, got
    assert got["extents_pruned"] >= EXTENTS * 0.98


def test_service_and_time_window_needle(needle_db):
    # svc-7 lives in extents 7, 47, 87, 127, 167; extent 87 covers minutes 870-880
    lo = "2026-03-01 14:32:00"            # minute 872
    hi = "2026-03-01 14:37:00"            # minute 877
    got = _same_rows_both_ways(
        needle_db, f"SELECT status, count(*) AS n FROM logs WHERE service = 'svc-7' AND "
                   f"_timestamp BETWEEN '{lo}' AND '{hi}' GROUP BY status")
    assert got["rows"] == 7
    assert got["extents_read"] == 1 and got["extents_pruned"] == EXTENTS - 1


def test_a_broad_query_reads_everything_and_says_so(needle_db):
    r = needle_db.sql("SELECT count(*) AS n FROM logs WHERE status = 200")
    assert r.table.to_pylist() == [{"n": EXTENTS * len(range(0, ROWS, 7))}]
    stats = r.stats.to_json()
    assert stats["extents_read"] == EXTENTS and stats["extents_pruned"] == 0
