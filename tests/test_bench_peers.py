"""bench/bench_peers.py's statements, one per dialect, give one answer on every engine: shoal
through `POST /v1/query`, DuckDB (its table and Parquet), delta-rs, and chdb when the `bench`
extra is installed. A small day of generated logs; nothing is timed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_peers  # noqa: E402
import logdata  # noqa: E402


@pytest.mark.services
def test_every_engine_gives_the_same_answer_to_every_statement(tmp_path: Path) -> None:
    source = logdata.generate_day(20_000, rare_every=500, out=tmp_path / "data")
    kinds: list[type[bench_peers.Engine]] = [bench_peers.Shoal, bench_peers.DuckTable,
                                             bench_peers.DuckParquet, bench_peers.Delta]
    if importlib.util.find_spec("chdb") is not None:
        kinds.append(bench_peers.Chdb)
    (tmp_path / "work").mkdir()
    engines = bench_peers.load(tmp_path / "work", source, kinds)
    try:
        # each statement runs once on every engine, its answers asserted equal
        results = bench_peers.run_queries(engines, source, repeat=0)
    finally:
        for e in engines:
            e.close()
    rows = {m.q.id: m.rows for m in results}
    assert rows["needle (one trace id, every column)"] == 1
    assert rows["rare word 'deadlock' rows"] > 10
    assert rows["count per minute, whole day"] == 1440
    assert rows["10 slowest in one hour"] == 10
    assert all(m.shoal_engine == "local" for m in results), [m.shoal_reason for m in results]
