"""Maintenance benchmark: compaction throughput, and query latency before vs after.

    .venv/bin/python bench/bench_maintain.py [--extents 1000] [--rows 200000] [--repeat 5]
        [--target 128MB] [--master local[2]] [--work DIR] [--keep]

Writes `--rows` rows of the query benchmark's logs (`bench_query.make_extent`: one day,
sorted by time, 8 columns incl. unique trace ids and templated messages) as `--extents`
small extents, one `db.append` each (embedded SQLite catalog + local store). Then:

1. the needle and selective queries of `bench_query` (median of `--repeat` warm runs, with
   the pruning stats of the last run) on the small extents;
2. one `compact` work unit run by a `MaintenanceWorker` whose tasks run on Spark
   (`--master`, default `local[2]` = 2 cores): wall time, input MB/s (extent bytes read per
   second), rows/s, extents before -> after;
3. the same queries again, answers asserted equal.

The default is a smaller size that runs in a few minutes; the issue's full size is
`--rows 10000000 --extents 1000` (10k rows per extent). Output is Markdown on stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shoal  # noqa: E402
from bench_query import DAY0, TABLE, make_extent, make_queries  # noqa: E402
from shoal.maintenance.service import build_worker  # noqa: E402
from shoal.types import INT, REAL, STRING, Column  # noqa: E402


def run_queries(db, queries, repeat: int) -> dict[str, dict]:
    out = {}
    for q in queries:
        db.sql(q.shoal)                                 # warm
        times, res = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = db.sql(q.shoal)
            times.append(time.perf_counter() - t0)
        stats = res.stats.to_json()
        out[q.name] = {"ms": statistics.median(times) * 1000, "rows": res.table.num_rows,
                       "answer": res.table, "extents_read": stats["extents_read"],
                       "extents_considered": stats["extents_considered"],
                       "blocks_read": stats["blocks_read"], "bytes_read": stats["bytes_read"]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--extents", type=int, default=1000)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--target", default="128MB", help="target_extent_size of the table")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    per = args.rows // args.extents
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-bench-maintain-"))
    load = os.getloadavg()[0]
    try:
        db = shoal.connect(data_dir=str(work / "shoal"), spark_master=args.master)
        db.create_table(TABLE, [Column("service", STRING), Column("level", STRING),
                                Column("message", STRING), Column("trace_id", STRING),
                                Column("status", INT), Column("duration_ms", REAL)],
                        properties={"target_extent_size": args.target})
        schema = db.catalog.load_table(TABLE).schema.arrow()
        t0 = time.perf_counter()
        for i in range(args.extents):
            db.append(TABLE, make_extent(i, per, args.extents, schema))
        write_s = time.perf_counter() - t0
        mid = make_extent(args.extents // 2, per, args.extents, schema)
        needle = mid["trace_id"][per // 3].as_py()
        queries = [q for q in make_queries(needle, DAY0 + timedelta(hours=14, minutes=7))
                   if q.name in ("needle", "selective")]
        rows, extents_before = db.catalog.table_counts(TABLE)
        bytes_before = sum(e.byte_size for e in db.catalog.manifests(TABLE))
        print(f"wrote {rows:,} rows as {extents_before} extents in {write_s:.1f}s",
              file=sys.stderr)
        before = run_queries(db, queries, args.repeat)

        worker = build_worker(db, name="bench")
        worker.runner.map(abs, [1])                    # Spark started outside the timing
        db.catalog.enqueue_work("compact", table=TABLE, payload={"table": TABLE})
        t0 = time.perf_counter()
        outcome = worker.run_one()
        compact_s = time.perf_counter() - t0
        assert outcome is not None and outcome.ok, outcome
        r = outcome.result
        rows_after, extents_after = db.catalog.table_counts(TABLE)
        assert rows_after == rows
        bytes_after = sum(e.byte_size for e in db.catalog.manifests(TABLE))
        after = run_queries(db, queries, args.repeat)
        for name in before:
            a, b = before[name]["answer"], after[name]["answer"]
            assert a.sort_by([(c, "ascending") for c in a.column_names]).equals(
                b.sort_by([(c, "ascending") for c in b.column_names])), name

        print(f"## Maintenance benchmark ({rows:,} rows, {extents_before} small extents, "
              f"Spark {args.master}, load {load:.1f})\n")
        print("| compaction | value |\n|---|---|")
        print(f"| extents | {extents_before} -> {extents_after} ({r['rounds']} round(s), "
              f"{r['groups']} groups) |")
        print(f"| bytes | {bytes_before / 1e6:.1f} MB -> {bytes_after / 1e6:.1f} MB |")
        print(f"| wall time (unit, plan + Spark tasks + commit) | {compact_s:.1f} s |")
        print(f"| input throughput | {r['bytes_in'] / 1e6 / compact_s:.1f} MB/s "
              f"({rows / compact_s:,.0f} rows/s) |\n")
        print("| query | before: ms | extents read | bytes read | after: ms | extents read "
              "| bytes read |\n|---|---|---|---|---|---|---|")
        for name in before:
            b, a = before[name], after[name]
            print(f"| {name} | {b['ms']:.0f} | {b['extents_read']}/{b['extents_considered']}"
                  f" | {b['bytes_read']:,} | {a['ms']:.0f} | {a['extents_read']}/"
                  f"{a['extents_considered']} | {a['bytes_read']:,} |")
        db.close()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
