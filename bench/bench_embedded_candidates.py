"""Choosing the embedded query engine: DuckDB vs DataFusion on the same pruned Arrow input.

    .venv/bin/python bench/bench_embedded_candidates.py [--rows 2000000] [--repeat 30]

What shoal's local query engine does per query, timed whole on each candidate: open a
session (DuckDB: a cursor on one locked in-memory database; DataFusion: a fresh
`SessionContext`), register the Arrow batches that survived shoal's stages 1-2 as a table,
run the statement (each engine's own dialect, written out below), and fetch the answer as a
pyarrow Table. The input is the query benchmark's generated logs
(`bench_query.make_extent`), shaped as shoal hands them to an engine (µs UTC timestamps,
`props` as JSON text) in 64k-row blocks:

- needle:    `trace_id = '<id>'` over the one block that holds it (what stage 2 leaves);
- needle, unpruned: the same over every block (what an engine alone would scan);
- selective: count and avg(duration_ms) of one service in a 15-minute window whose message
             has the whole token `timeout`, over the blocks overlapping the window;
- full aggregation: count by minute, service and level over every row, ordered.

Every engine's answer is asserted equal. Reports p50 / p99 (ms) of `--repeat` warm runs
(after 3 warm-up runs), engines interleaved so outside load hits each alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_query import DAY0, as_parquet, assert_same, make_extent  # noqa: E402

from shoal.query.planner import has_pattern  # noqa: E402
from shoal.types import INT, REAL, STRING, Column, Schema  # noqa: E402

BLOCK_ROWS = 65_536
THREADS = 2


def make_input(rows: int) -> tuple[list[pa.RecordBatch], str]:
    """`rows` generated log rows in Spark's shapes, cut into 64k-row blocks, and a trace id
    from the middle."""
    schema = Schema.create([Column("service", STRING), Column("level", STRING),
                            Column("message", STRING), Column("trace_id", STRING),
                            Column("status", INT), Column("duration_ms", REAL)]).arrow()
    extents = max(1, rows // 200_000)
    parts = [as_parquet(make_extent(i, rows // extents, extents, schema))
             for i in range(extents)]
    whole = pa.concat_tables(parts).combine_chunks()
    batches = whole.to_batches(max_chunksize=BLOCK_ROWS)
    needle = whole["trace_id"][whole.num_rows // 2 + 7].as_py()
    return batches, needle


def blocks_overlapping(batches: list[pa.RecordBatch], lo: Any, hi: Any) -> list[pa.RecordBatch]:
    out = []
    for b in batches:
        mm = pc.min_max(b.column("_timestamp"))
        if mm["min"].value <= hi.value and mm["max"].value >= lo.value:
            out.append(b)
    return out


def needle_block(batches: list[pa.RecordBatch], needle: str) -> list[pa.RecordBatch]:
    return [b for b in batches if pc.any(pc.equal(b.column("trace_id"), needle)).as_py()]


class DuckEngine:
    name = "DuckDB 1.5"

    def __init__(self) -> None:
        import duckdb

        self.db = duckdb.connect(config={
            "enable_external_access": False, "autoinstall_known_extensions": False,
            "autoload_known_extensions": False, "lock_configuration": True,
            "threads": THREADS})
        self.version = duckdb.__version__

    def run(self, batches: list[pa.RecordBatch], sql: str) -> pa.Table:
        con = self.db.cursor()
        try:
            con.register("logs", pa.Table.from_batches(batches))
            return con.execute(sql).to_arrow_table()
        finally:
            con.close()


class DuckNaiveEngine(DuckEngine):
    """DuckDB fed `timestamp` without a time zone (UTC implied), as ICU's time-zone-aware
    kernels (date_trunc on TIMESTAMPTZ) are slow; the answer's timestamps get UTC back."""

    name = "DuckDB 1.5, naive ts"

    def run(self, batches: list[pa.RecordBatch], sql: str) -> pa.Table:
        t = pa.Table.from_batches(batches)
        i = t.schema.get_field_index("_timestamp")
        t = t.set_column(i, "_timestamp", t.column(i).cast(pa.timestamp("us")))
        con = self.db.cursor()
        try:
            con.register("logs", t)
            out = con.execute(sql).to_arrow_table()
        finally:
            con.close()
        for j, f in enumerate(out.schema):
            if pa.types.is_timestamp(f.type) and f.type.tz is None:
                out = out.set_column(j, f.name, out.column(j).cast(
                    pa.timestamp("us", tz="UTC")))
        return out


class FusionEngine:
    name = "DataFusion 55"

    def __init__(self) -> None:
        import datafusion

        self.df = datafusion
        self.version = datafusion.__version__

    def run(self, batches: list[pa.RecordBatch], sql: str) -> pa.Table:
        config = self.df.SessionConfig().with_target_partitions(THREADS)
        ctx = self.df.SessionContext(config)
        # one partition per thread so the scan runs in parallel
        parts: list[list[pa.RecordBatch]] = [[] for _ in range(min(THREADS, len(batches)))]
        for i, b in enumerate(batches):
            parts[i % len(parts)].append(b)
        ctx.register_record_batches("logs", parts)
        return ctx.sql(sql).to_arrow_table()


def queries(needle: str) -> dict[str, tuple[str, str, bool]]:
    """name -> (DuckDB SQL, DataFusion SQL, ordered?)."""
    lo = DAY0 + timedelta(hours=14, minutes=7)
    hi = lo + timedelta(minutes=15)
    f = "%Y-%m-%d %H:%M:%S"
    pattern = has_pattern("timeout")
    cols = "_timestamp, props, service, level, message, trace_id, status, duration_ms"
    duck_window = (f"_timestamp BETWEEN TIMESTAMPTZ '{lo.strftime(f)}+00' AND "
                   f"TIMESTAMPTZ '{hi.strftime(f)}+00'")
    fusion_window = (f"_timestamp BETWEEN TIMESTAMP '{lo.strftime(f)}Z' AND "
                     f"TIMESTAMP '{hi.strftime(f)}Z'")
    full = ("SELECT date_trunc('minute', _timestamp) AS minute, service, level, "
            "count(*) AS n FROM logs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
    return {
        "needle": (f"SELECT {cols} FROM logs WHERE trace_id = '{needle}'",
                   f"SELECT {cols} FROM logs WHERE trace_id = '{needle}'", False),
        "selective": (
            "SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM logs WHERE service = "
            f"'svc-17' AND {duck_window} AND regexp_matches(message, '{pattern}')",
            "SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM logs WHERE service = "
            f"'svc-17' AND {fusion_window} AND regexp_like(message, '{pattern}')", True),
        "full aggregation": (full, full, True),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()
    load = os.getloadavg()
    batches, needle = make_input(args.rows)
    rows = sum(b.num_rows for b in batches)
    qs = queries(needle)
    lo = pa.scalar(DAY0 + timedelta(hours=14, minutes=7), pa.timestamp("us", tz="UTC"))
    hi = pa.scalar(DAY0 + timedelta(hours=14, minutes=22), pa.timestamp("us", tz="UTC"))
    inputs = {"needle": needle_block(batches, needle), "needle, unpruned": batches,
              "selective": blocks_overlapping(batches, lo, hi), "full aggregation": batches}
    plan = [("needle", "needle"), ("needle, unpruned", "needle"),
            ("selective", "selective"), ("full aggregation", "full aggregation")]
    engines: list[Any] = [DuckEngine(), DuckNaiveEngine(), FusionEngine()]
    times: dict[tuple[str, str], list[float]] = {}
    for label, qname in plan:
        duck_sql, fusion_sql, ordered = qs[qname]
        sqls = {engines[0].name: duck_sql, engines[1].name: duck_sql.replace("+00'", "'"),
                engines[2].name: fusion_sql}
        answers: dict[str, pa.Table] = {}
        for _ in range(3):                                  # warm-up
            for e in engines:
                answers[e.name] = e.run(inputs[label], sqls[e.name])
        assert_same(answers, sort=not ordered)
        assert answers[engines[0].name].num_rows >= 1
        fns: dict[str, Callable[[], pa.Table]] = {
            e.name: (lambda e=e: e.run(inputs[label], sqls[e.name])) for e in engines}
        for _ in range(args.repeat):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                times.setdefault((label, name), []).append(time.perf_counter() - t0)
    end_load = os.getloadavg()
    print(f"## embedded engine choice — {rows:,} rows, {len(batches)} blocks of "
          f"{BLOCK_ROWS:,}\n")
    print(f"`.venv/bin/python bench/bench_embedded_candidates.py {' '.join(sys.argv[1:])}` "
          f"({time.strftime('%Y-%m-%d')})\n")
    print(f"Host: {platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} at start / {end_load[0]:.2f} at end; Python "
          f"{platform.python_version()}, pyarrow {pa.__version__}, "
          + ", ".join(f"{e.name} ({e.version})" for e in engines)
          + f"; {THREADS} threads each. {args.repeat} warm runs per query and engine "
          "(interleaved) after 3 warm-ups; each run = open a session, register the Arrow "
          "input, run, fetch the answer as Arrow. Answers asserted equal.\n")
    print("| query | input rows | engine | p50 ms | p99 ms |\n|---|---:|---|---:|---:|")
    for label, _ in plan:
        n = sum(b.num_rows for b in inputs[label])
        for e in engines:
            t = sorted(times[(label, e.name)])
            p99 = t[min(len(t) - 1, int(round(0.99 * (len(t) - 1))))]
            print(f"| {label} | {n:,} | {e.name} | {statistics.median(t) * 1000:,.1f} | "
                  f"{p99 * 1000:,.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
