"""Per-block filters (`shoal.format.blockfilters`) on big extents: what they cost to write
and store, what stage 2 pays to use them, what a needle or a rare word reads with and
without them.

    .venv/bin/python bench/bench_block_filters.py [--rows 1000000] [--repeat 3]
                                                  [--part all|membership|tokens]

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

Token filters (`--part tokens`): two extents of `--rows` bench_query rows each (their
messages carry a 12-hex request id, so the extents' token sets overflow and the catalog
cannot prune), "deadlock" in 96 rows of one block of each (an incident: a burst in time),
written in 64k-row blocks with token filters (the default) and without (as before them),
and the same rows as Parquet (zstd, 64k-row row groups, as bench_query writes them).
`SELECT _timestamp, message ... WHERE has(message, 'deadlock')` on the embedded engine,
cold (a fresh client: footers and filters read) and warm, beside DuckDB over the Parquet
files with the regular expression `has()` stands for (same rows, checked); then a word in
every block ('declined'), which the filters cannot help with. Then the false-positive
rate: for each rate, the message column's filter bytes a block, the share of (block, absent
word) pairs a filter admits (400 words), and what a rare word then reads cold (every
block's filter + the false blocks) and warm (the false blocks) per extent of 16 blocks.
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

from typing import Any

import numpy as np
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
    p.add_argument("--part", choices=["all", "membership", "tokens"], default="all")
    args = p.parse_args()
    if args.part in ("all", "membership"):
        membership_part(args)
    if args.part in ("all", "tokens"):
        token_part(args)
    return 0


def membership_part(args: argparse.Namespace) -> None:
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


# ---- token filters: a rare word -------------------------------------------------------------

RARE_WORD = "deadlock"
RARE_ROWS = 96
COMMON_WORD = "declined"
FP_RATES = (0.02, 0.01, 0.005, 0.002, 0.001)


def _with_rare_word(table: pa.Table, block: int, seed: int) -> pa.Table:
    """`RARE_ROWS` messages of `block` replaced by ones holding the rare word."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(BLOCK_ROWS, RARE_ROWS, replace=False)) + block * BLOCK_ROWS
    msg = table.column("message").to_pylist()
    for r in rows:
        msg[int(r)] = f"txn {int(r):x} aborted: {RARE_WORD} detected, retrying"
    i = table.schema.get_field_index("message")
    return table.set_column(i, "message", pa.array(msg, pa.string()))


def _median_run(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out, last = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), last


def token_part(args: argparse.Namespace) -> None:
    import duckdb
    import pyarrow.parquet as pq

    import shoal
    from bench_query import as_parquet
    from shoal.format.blockfilters import TOKEN_FP_RATE, TOKEN_KIND
    from shoal.format.membership import BloomFilter
    from shoal.format.tokens import tokenize_array
    from shoal.query.planner import has_pattern

    load0 = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-tok-"))
    try:
        data_dir, pq_dir = work / "data", work / "pq"
        pq_dir.mkdir()
        columns = [Column("service", STRING), Column("level", STRING),
                   Column("message", STRING), Column("trace_id", STRING),
                   Column("status", INT), Column("duration_ms", REAL)]
        db = shoal.connect(data_dir=str(data_dir), query_engine="local")
        for name in ("logs", "logs_before"):
            db.create_table(name, columns)
        schema = db.catalog.load_table("logs").schema.arrow()
        tables = []
        for k in range(2):
            t = make_extent(20 + k, args.rows, 96, schema)
            full_blocks = max(1, args.rows // BLOCK_ROWS)   # the rare block is a whole one
            tables.append(_with_rare_word(t, (5 * k + 3) % full_blocks, seed=k))
        fmt = db.formats["tlm"]
        write_s: dict[str, float] = {}
        for name, filters in (("logs", True), ("logs_before", False)):
            info = db.catalog.load_table(name)
            fmt.block_filters = filters
            t0 = time.perf_counter()
            for k, t in enumerate(tables):
                entry = db.coordinator.write_extent(info, t.to_batches(), block_rows=BLOCK_ROWS)
                db.coordinator.append(name, [entry])
            write_s[name] = time.perf_counter() - t0
        fmt.block_filters = True
        for k, t in enumerate(tables):
            pq.write_table(as_parquet(t), pq_dir / f"part-{k}.parquet", row_group_size=BLOCK_ROWS,
                           compression="zstd")
        db.close()

        # the writer's statistics alone, with and without token filters, interleaved
        stats_s: dict[bool, list[float]] = {True: [], False: []}
        batches = tables[0].to_batches(max_chunksize=BLOCK_ROWS)
        for _ in range(args.repeat):
            for on in (False, True):
                t0 = time.process_time()
                b = ExtentStatsBuilder(tables[0].schema, token_filters=on)
                for x in batches:
                    b.add_block(x)
                b.finish()
                stats_s[on].append(time.process_time() - t0)

        duck = duckdb.connect()
        duck.execute(f"SET threads = {os.cpu_count() or 2}")
        duck.execute(f"CREATE VIEW pq_logs AS SELECT * FROM read_parquet('{pq_dir}/*.parquet')")
        lines = []
        extents_bytes = {}
        block_bytes = 0.0       # one block's `_timestamp, message`, as read warm
        for word in (RARE_WORD, COMMON_WORD):
            pattern = has_pattern(word).replace("'", "''")
            duck_sql = (f"SELECT _timestamp, message FROM pq_logs "
                        f"WHERE regexp_matches(message, '{pattern}')")
            duck_s, duck_rows = _median_run(lambda q=duck_sql: duck.sql(q).to_arrow_table(),
                                            args.repeat)
            for name in ("logs", "logs_before"):
                sql = f"SELECT _timestamp, message FROM {name} WHERE has(message, '{word}')"

                def cold(sql: str = sql) -> Any:
                    fresh = shoal.connect(data_dir=str(data_dir), query_engine="local")
                    try:
                        t0 = time.perf_counter()
                        res = fresh.sql(sql)
                        return time.perf_counter() - t0, res
                    finally:
                        fresh.close()

                colds = [cold() for _ in range(args.repeat)]
                cold_s = statistics.median(c[0] for c in colds)
                cold_stats = colds[-1][1].stats.to_json()
                warm_db = shoal.connect(data_dir=str(data_dir), query_engine="local")
                warm_db.sql(sql)
                warm_s, res = _median_run(lambda d=warm_db, q=sql: d.sql(q), args.repeat)
                warm_stats = res.stats.to_json()
                if name == "logs_before" and word == RARE_WORD:
                    block_bytes = warm_stats["bytes_read"] / max(1, warm_stats["blocks_read"])
                if name not in extents_bytes:
                    extents_bytes[name] = sum(e.byte_size
                                              for e in warm_db.catalog.manifests(name))
                warm_db.close()
                assert res.table.num_rows == duck_rows.num_rows, (name, word)
                lines.append(
                    f"| `{word}` | {name} | {res.table.num_rows} | "
                    f"{warm_stats['blocks_read']} of {warm_stats['blocks_considered']} | "
                    f"{cold_s * 1e3:.0f} ms / {cold_stats['bytes_read'] / 1e6:.2f} MB | "
                    f"{warm_s * 1e3:.0f} ms / {warm_stats['bytes_read'] / 1e6:.2f} MB | "
                    f"{duck_s * 1e3:.0f} ms | {cold_s / duck_s:.2f}x / {warm_s / duck_s:.2f}x |")
        duck.close()

        # false positives against size, on the first extent's blocks
        rng = np.random.default_rng(99)
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        present = set(tokenize_array(tables[0].column("message")).to_pylist())
        words = [w for w in ("".join(rng.choice(letters, int(rng.integers(5, 11))))
                             for _ in range(400)) if w not in present]
        sweep = []
        for rate in FP_RATES:
            b = ExtentStatsBuilder(tables[0].schema, token_fp_rate=rate)
            for x in batches:
                b.add_block(x)
            blobs = [e["message"][1] for e in b.finish().block_filters
                     if e.get("message", ("", b""))[0] == TOKEN_KIND]
            filters = [BloomFilter.from_bytes(x) for x in blobs]
            admitted = sum(f.might_contain(w) for f in filters for w in words)
            share = admitted / (len(filters) * len(words))
            sweep.append((rate, sum(map(len, blobs)) / len(blobs), share))

        load1 = os.getloadavg()
        print(f"\n## token filters: a rare word in 2 extents of {args.rows:,} rows "
              f"({-(-args.rows // BLOCK_ROWS)} blocks of {BLOCK_ROWS:,} each)\n")
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load "
              f"{load0[0]:.2f}/{load0[1]:.2f} at start, {load1[0]:.2f}/{load1[1]:.2f} at the "
              f"end; medians of {args.repeat}; token filters at {TOKEN_FP_RATE:.1%}. "
              f"`{RARE_WORD}` in {RARE_ROWS} rows of one block of each extent; DuckDB: "
              f"`regexp_matches(message, '{has_pattern(RARE_WORD)}')` over the same rows in "
              f"Parquet.\n")
        print("| word | table | rows | blocks read | shoal cold: time / bytes | shoal warm: "
              "time / bytes | DuckDB over Parquet | shoal / DuckDB (cold / warm) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for line in lines:
            print(line)
        print(f"\nExtents: {extents_bytes['logs'] / 1e6:.2f} MB with token filters, "
              f"{extents_bytes['logs_before'] / 1e6:.2f} MB without "
              f"(+{extents_bytes['logs'] / extents_bytes['logs_before'] - 1:.1%}). Writing "
              f"both extents: {write_s['logs']:.2f} s with, {write_s['logs_before']:.2f} s "
              f"without block filters. The writer's statistics alone over one extent (CPU, "
              f"median): {statistics.median(stats_s[True]):.2f} s with token filters, "
              f"{statistics.median(stats_s[False]):.2f} s without.\n")
        print(f"False positives against size (the first extent's {len(batches)} blocks, "
              f"{len(words)} absent words; a block read of `_timestamp, message`: "
              f"{block_bytes / 1e6:.2f} MB):\n")
        print("| rate | message filter a block | admitted (measured) | rare word, cold: filters "
              "+ false blocks, per 16 blocks | warm: false blocks, per 16 blocks |")
        print("|---:|---:|---:|---:|---:|")
        for rate, per_block, share in sweep:
            cold_b = 16 * per_block + 15 * share * block_bytes
            warm_b = 15 * share * block_bytes
            print(f"| {rate:.1%} | {per_block / 1e3:.1f} kB | {share:.2%} | "
                  f"{cold_b / 1e6:.2f} MB | {warm_b / 1e6:.3f} MB |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
