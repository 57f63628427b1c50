"""Sort key benchmark: one service over 15 minutes on a table sorted by
(service, _timestamp) vs the same rows in arrival (time) order, beside DuckDB over Parquet of
the same rows in the same order, in one run (docs/storage.md, "Sort key").

    .venv/bin/python bench/bench_sortkey.py [--rows 2000000] [--extents 4]
        [--block-rows 65536,8192] [--repeat 7] [--work DIR] [--keep]

Data: one day of bench_query's log rows (50 skewed services, `_timestamp` ns, ...) as
`--extents` extents, each a contiguous slice of the day (a compacted table: extents of many
blocks). For each block size in `--block-rows`, two shoal tables and two Parquet datasets:

- `time`: no sort key, extents in arrival order (rows by time), as every table was before;
- `sorted`: `sort_by = 'service, _timestamp'`; the commit path sorts each extent's rows.

Both shoal tables are written through the same commit path (`write_extent` + `append`, the
block size given); the write time of each is reported (the sort's share of a commit). The
Parquet files hold the rows in the same order as the shoal table beside them, one file per
extent, row groups of the same size, zstd, µs timestamps. DuckDB reads them.

Queries, each on every table (shoal's embedded engine, `engine=local`) and its Parquet twin
(DuckDB), warm, the median of `--repeat` interleaved runs, answers checked equal:

- `15 min`: `count(*), avg(duration_ms)` of one service in a 15-minute window;
- `1 day`: the same over the whole day (the case time order cannot prune at all).

Columns: latency p50; blocks read of blocks considered (shoal's scan stats) and the rows in
them; bytes read (shoal: its scan stats; DuckDB: the READs its file system logs on a fresh
connection); the ratio shoal / DuckDB on the same layout. Output is Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_query import DAY0, as_parquet, make_extent  # noqa: E402

import shoal  # noqa: E402
from shoal.types import INT, REAL, STRING, Column  # noqa: E402

COLUMNS = [Column("service", STRING), Column("level", STRING), Column("message", STRING),
           Column("trace_id", STRING), Column("status", INT), Column("duration_ms", REAL)]
SERVICE = "svc-17"
KEY = "service, _timestamp"


def _ts(t) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def queries(lo) -> dict[str, tuple[str, str]]:
    """name -> (shoal WHERE, DuckDB WHERE)."""
    hi = lo + timedelta(minutes=15)
    return {
        "15 min": (f"service = '{SERVICE}' AND _timestamp BETWEEN TIMESTAMP '{_ts(lo)}' AND "
                   f"TIMESTAMP '{_ts(hi)}'",
                   f"service = '{SERVICE}' AND _timestamp BETWEEN TIMESTAMPTZ '{_ts(lo)}+00' "
                   f"AND TIMESTAMPTZ '{_ts(hi)}+00'"),
        "1 day": (f"service = '{SERVICE}'", f"service = '{SERVICE}'"),
    }


def select(table: str, where: str) -> str:
    return f"SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM {table} WHERE {where}"


def duck_bytes(pq_dir: Path, sql: str) -> int:
    """Bytes of every READ DuckDB issues for `sql` on a fresh connection (cold caches)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{pq_dir}/*.parquet')")
        con.execute("CALL enable_logging('FileSystem')")
        con.sql(sql).to_arrow_table()
        rows = con.sql("SELECT message FROM duckdb_logs WHERE type = 'FileSystem'").fetchall()
    finally:
        con.close()
    return sum(int(d["bytes"]) for d in map(json.loads, (m for (m,) in rows))
               if d.get("op") == "READ")


def rows_in_blocks(db: Any, table: str, where: str, block_rows: int) -> int:
    """Rows of the blocks the plan keeps (what the scan reads and decodes); the writer cuts
    every block but an extent's last at exactly `block_rows`."""
    from shoal.query.planner import analyze
    from shoal.query.scan_plan import build_scan_spec

    analysis = analyze(select(table, where),
                       {t.name: {c.name: c.type for c in t.schema.columns}
                        for t in db.catalog.list_tables()})
    (ref,) = analysis.refs
    spec, _ = build_scan_spec(db.catalog, db.store, db.formats, db.query_engine.footers,
                              ref.table, predicate=ref.predicate, columns=ref.columns,
                              snapshot_id=None, storage_url=db.config.resolved_storage_url,
                              s3_endpoint=None, parallelism=1)
    total = 0
    for part in spec.partitions:
        for task in part:
            meta = db.formats[task.format].open_extent(db.store, task.path).metadata()
            blocks = range(meta.block_count) if task.blocks is None else task.blocks
            total += sum(min(block_rows, meta.row_count - k * block_rows) for k in blocks)
    return total


def fmt_bytes(n: int) -> str:
    return f"{n / 1e6:,.2f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} KB"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--extents", type=int, default=4)
    p.add_argument("--block-rows", default="65536,8192")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    import duckdb

    block_sizes = [int(b) for b in args.block_rows.split(",")]
    load = os.getloadavg()[0]
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-bench-sortkey-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = shoal.connect(data_dir=str(work / "shoal"))
    try:
        per = args.rows // args.extents
        schema = None
        layouts: list[tuple[str, int]] = [(o, b) for b in block_sizes for o in ("time", "sorted")]
        writes: dict[tuple[str, int], float] = {}
        for order, b in layouts:
            name = f"{order}_{b}"
            db.create_table(name, COLUMNS, properties={"sort_by": KEY} if order == "sorted"
                            else None)
            (work / name).mkdir()
        schema = db.catalog.load_table(layouts[0][0] + f"_{layouts[0][1]}").schema
        t_gen = 0.0
        for i in range(args.extents):
            t0 = time.perf_counter()
            rows = make_extent(i, per, args.extents, schema.arrow())
            t_gen += time.perf_counter() - t0
            for order, b in layouts:
                name = f"{order}_{b}"
                info = db.catalog.load_table(name)
                t0 = time.perf_counter()
                entry = db.coordinator.write_extent(info, rows.to_batches(), block_rows=b)
                db.coordinator.append(name, [entry])
                writes[(order, b)] = writes.get((order, b), 0.0) + time.perf_counter() - t0
                # Parquet twin in the same row order as the extent just written
                reader = db.formats[entry.format].open_extent(db.store, entry.object_path)
                written = pa.Table.from_batches(
                    [reader.read_block(k) for k in range(reader.metadata().block_count)])
                pq.write_table(as_parquet(written), work / name / f"part-{i:04d}.parquet",
                               row_group_size=b, compression="zstd")
        lo = DAY0 + timedelta(hours=14, minutes=5)
        duck = duckdb.connect()
        duck.execute("SET TimeZone = 'UTC'")
        duck.execute(f"SET threads = {os.cpu_count() or 2}")
        out: list[str] = []
        results: dict[tuple[str, str, int], dict[str, Any]] = {}
        for qname, (s_where, d_where) in queries(lo).items():
            for order, b in layouts:
                name = f"{order}_{b}"
                d_sql = select(f"read_parquet('{work / name}/*.parquet')", d_where)
                s_sql = select(name, s_where)
                db.sql(s_sql, engine="local")           # warm
                duck.sql(d_sql).to_arrow_table()
                ts_s, ts_d = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    res = db.sql(s_sql, engine="local")
                    ts_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    dres = duck.sql(d_sql).to_arrow_table()
                    ts_d.append(time.perf_counter() - t0)
                got, want = res.table.to_pylist()[0], dres.to_pylist()[0]
                assert got["n"] == want["n"] and abs(got["avg_ms"] - want["avg_ms"]) < 1e-6 * \
                    max(1.0, abs(want["avg_ms"])), (name, qname, got, want)
                (scan,) = res.stats.scans
                st = scan["stats"].to_json()
                results[(qname, order, b)] = {
                    "n": got["n"], "p50": statistics.median(ts_s) * 1e3,
                    "duck": statistics.median(ts_d) * 1e3,
                    "blocks": f"{st['blocks_read']}/{st['blocks_considered']}",
                    "rows": rows_in_blocks(db, name, s_where, b), "bytes": st["bytes_read"],
                    "duck_bytes": duck_bytes(work / name, d_sql.replace(
                        f"read_parquet('{work / name}/*.parquet')", "t"))}
        out.append(f"{args.rows:,} log rows (one day, 50 services, skewed), {args.extents} "
                   f"extents of {per:,} rows, each a slice of the day; query: count and "
                   f"avg(duration_ms) of `{SERVICE}` (about 1.8% of the rows); median of "
                   f"{args.repeat} warm runs; shoal on its embedded engine; 1-min load "
                   f"average at start {load:.2f} on {os.cpu_count()} cores.\n")
        out.append("| query | layout | block rows | rows matched | shoal p50 ms | DuckDB p50 ms "
                   "| shoal / DuckDB | shoal blocks read | rows in blocks read | shoal bytes "
                   "read | DuckDB bytes read |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for (qname, order, b), r in results.items():
            out.append(f"| {qname} | {order} | {b:,} | {r['n']:,} | {r['p50']:.1f} | "
                       f"{r['duck']:.1f} | {r['p50'] / r['duck']:.2f}x | {r['blocks']} | "
                       f"{r['rows']:,} | {fmt_bytes(r['bytes'])} | "
                       f"{fmt_bytes(r['duck_bytes'])} |")
        out.append("")
        for qname in queries(lo):
            for b in block_sizes:
                t, s = results[(qname, "time", b)], results[(qname, "sorted", b)]
                out.append(f"- {qname}, {b:,}-row blocks: sorted / time order: latency "
                           f"{s['p50'] / t['p50']:.2f}x, rows in blocks read "
                           f"{s['rows'] / max(1, t['rows']):.2f}x, bytes "
                           f"{s['bytes'] / max(1, t['bytes']):.2f}x")
        out.append("")
        out.append(f"Generation {t_gen:.1f} s (not in any figure). Commit-path write time of "
                   "the whole day (write_extent + append, sort included):")
        for b in block_sizes:
            t, s = writes[("time", b)], writes[("sorted", b)]
            out.append(f"- {b:,}-row blocks: time order {t:.2f} s, sorted {s:.2f} s "
                       f"({s / t:.2f}x)")
        print("\n".join(out))
    finally:
        db.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
