"""Per-block membership filters (`shoal.format.blockfilters`) on one big extent: what they
cost to write and store, what stage 2 pays to use them, what a needle reads with and
without them.

    .venv/bin/python bench/bench_block_filters.py [--rows 1000000] [--repeat 3]

The rows are bench_query's logs (`make_extent`: one slice of a day sorted by time, unique
32-hex trace ids, a templated message with a 12-hex request id, 50 services, ...), written
as ONE extent in 64k-row blocks (what compaction produces) to a local directory store, once
with `TlmFormat(block_filters=False)` and once with the default (block filters on).

Reported: object size, JSON footer (block stats) size, filter section size; write time of
the whole extent and of the stats alone (`ExtentStatsBuilder` over the blocks) with and
without block filters, beside the parse time of the same rows as NDJSON through
`pyarrow.json.read_json` with the explicit schema (the parse limit; the budget:
stats < 25% of parse); stage 2 cold (open the extent: head, tail, footer JSON, Arrow
footer) and a needle's block pruning (the trace_id filters: one range read, decode, probe);
and the needle's bytes: stage 2 plus its surviving blocks read in full (`SELECT *`) or
projected to two columns. Medians of `--repeat` (with and without block filters
interleaved); the load average is printed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_query import make_extent  # noqa: E402
from shoal.format.base import Equals  # noqa: E402
from shoal.format.blockfilters import column_span  # noqa: E402
from shoal.format.stats import ExtentStatsBuilder  # noqa: E402
from shoal.format.tlm import TlmFormat  # noqa: E402
from shoal.storage import open_store  # noqa: E402
from shoal.types import INT, REAL, STRING, Column, Schema  # noqa: E402

BLOCK_ROWS = 65536


def median_s(fn: Callable[[], object], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def ndjson(table: pa.Table) -> bytes:
    import msgspec

    rows = table.to_pylist()
    for r in rows:
        r["_timestamp"] = r["_timestamp"].isoformat()
        r["props"] = None if r["props"] is None else json.loads(r["props"])
    return b"\n".join(msgspec.json.encode(r) for r in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    load0 = os.getloadavg()
    schema = Schema.create([Column("service", STRING), Column("level", STRING),
                            Column("message", STRING), Column("trace_id", STRING),
                            Column("status", INT), Column("duration_ms", REAL)])
    table = make_extent(7, args.rows, 96, schema.arrow())
    batches = table.to_batches(max_chunksize=BLOCK_ROWS)
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-bf-"))
    try:
        store = open_store(work.as_uri())
        fmts = {"off": TlmFormat(block_filters=False), "on": TlmFormat()}
        paths: dict[str, str] = {}

        def write(name: str) -> None:
            w = fmts[name].start_extent(store, name, table.schema, block_rows=BLOCK_ROWS)
            for b in batches:
                w.append(b)
            paths[name] = w.finish().object_path

        def stats_only(block_filters: bool) -> None:
            builder = ExtentStatsBuilder(table.schema, block_filters=block_filters)
            for b in batches:
                builder.add_block(b)
            builder.finish()

        # off and on interleaved, so that outside load hits both alike
        runs: dict[str, list[float]] = {f"{k}-{n}": [] for k in ("write", "stats") for n in fmts}
        write("off")
        for _ in range(args.repeat):
            for n in fmts:
                for kind, fn in (("write", lambda n=n: write(n)),
                                 ("stats", lambda n=n: stats_only(n == "on"))):
                    t0 = time.perf_counter()
                    fn()
                    runs[f"{kind}-{n}"].append(time.perf_counter() - t0)
        write_s = {n: statistics.median(runs[f"write-{n}"]) for n in fmts}
        stats_s = {n: statistics.median(runs[f"stats-{n}"]) for n in fmts}
        body = ndjson(table)
        json_schema = pa.schema([pa.field("_timestamp", pa.timestamp("ns", tz="UTC"))] + [
            f for f in table.schema if f.name not in ("_timestamp", "props")])
        opts = pa_json.ParseOptions(explicit_schema=json_schema,
                                    unexpected_field_behavior="ignore")
        parse_s = median_s(lambda: pa_json.read_json(io.BytesIO(body), parse_options=opts),
                           args.repeat)

        needle = table.column("trace_id")[args.rows * 2 // 3].as_py()
        pred = Equals("trace_id", needle)
        lines = []
        for name, fmt in fmts.items():
            data = store.get(paths[name])
            (stats_len,) = struct.unpack("<I", data[-9:-5])
            reader = fmt.open_extent(store, paths[name])
            meta = reader.metadata()
            span = column_span(meta.block_stats, "trace_id")
            section = 0
            for col in ("trace_id", "status", "service", "level", "message"):
                s = column_span(meta.block_stats, col)
                section += 0 if s is None else s[1] - s[0]

            def open_only(name: str = name) -> None:
                fmts[name].open_extent(store, paths[name]).metadata()

            def prune(name: str = name) -> list[int]:
                return fmts[name].open_extent(store, paths[name]).pruned_blocks(pred)

            t_open = median_s(open_only, args.repeat)
            t_prune = median_s(prune, args.repeat) - t_open
            r = fmt.open_extent(store, paths[name])
            r.metadata()
            opened = r.bytes_read
            blocks = r.pruned_blocks(pred)
            stage2 = r.bytes_read
            rows = sum(r.read_block(b).num_rows for b in blocks)
            star = r.bytes_read
            r2 = fmt.open_extent(store, paths[name])
            for b in r2.pruned_blocks(pred):
                r2.read_block(b, ["trace_id", "service"])
            proj = r2.bytes_read
            assert rows >= 1
            lines.append(
                f"| {name} | {len(data) / 1e6:.2f} MB | {stats_len / 1e3:.1f} kB | "
                f"{section / 1e6:.2f} MB | {write_s[name]:.2f} s | {stats_s[name]:.2f} s | "
                f"{t_open * 1e3:.1f} ms | {t_prune * 1e3:.1f} ms | {len(blocks)} of "
                f"{meta.block_count} | {opened / 1e3:.0f} kB + {(stage2 - opened) / 1e6:.2f} MB "
                f"| {star / 1e6:.2f} MB | {proj / 1e6:.2f} MB |")
            _ = span
        load1 = os.getloadavg()
        print(f"## block filters: one extent of {args.rows:,} rows, {len(batches)} blocks of "
              f"{BLOCK_ROWS:,}\n")
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load "
              f"{load0[0]:.2f}/{load0[1]:.2f} at start, {load1[0]:.2f}/{load1[1]:.2f} at the "
              f"end; medians of {args.repeat}. NDJSON of the same rows: {len(body) / 1e6:.0f} "
              f"MB, `pyarrow.json.read_json` (explicit schema) {parse_s:.2f} s.\n")
        print("| block filters | object | footer JSON | filter section | write | stats alone "
              "| stage 2: open | stage 2: needle pruning | needle blocks | stage-2 bytes "
              "(open + filters) | needle bytes, SELECT * | needle bytes, 2 columns |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for line in lines:
            print(line)
        extra = stats_s["on"] - stats_s["off"]
        print(f"\nStats alone / parse: off {stats_s['off'] / parse_s:.0%}, on "
              f"{stats_s['on'] / parse_s:.0%} (block filters add {extra:.2f} s = "
              f"{extra / parse_s:.1%} of parse).")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
