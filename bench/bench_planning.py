"""Planning benchmark: stages 1 (catalog) and 2 (footers) of a needle, apart from execution
(planning must stay well under the execution time, so it is measured separately).

    .venv/bin/python bench/bench_planning.py [--rows 3000000] [--extents 150] [--repeat 50]
        [--http-repeat 0] [--work DIR] [--keep]

Writes bench_query's data (`make_extent`: same columns, unique 32-hex trace ids, so every
extent's trace_id overflows its distinct set and carries a membership filter) with one
`db.append` per extent on the embedded default (SQLite catalog, local store), then times,
warm (after 3 runs), the planning of `SELECT * FROM logs WHERE trace_id = '<id>'`:

- stage 1: `catalog.plan_extents(table, predicate)`;
- plan: the query engine's `_scans` (analysis, stage 1, stage 2 over cached footers, spec);
- query: `db.sql(..., engine='local')` end to end in process (planning + execution);
- http (with `--http-repeat N`): the needle through `POST /v1/query` on a `shoal serve
  --lazy-spark` subprocess, as bench_query measures it.

A second needle id (a value not in the table) shows the planning of a needle that every
filter rules out. p50 / p99 (nearest rank) in ms; the load average is printed before and
after. Output is Markdown.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shoal  # noqa: E402
from bench_query import TABLE, http_needle, make_extent, percentile  # noqa: E402
from shoal.format.base import Equals  # noqa: E402
from shoal.types import INT, REAL, STRING, Column  # noqa: E402


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    for _ in range(3):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def row(label: str, samples: list[float]) -> str:
    return (f"| {label} | {percentile(samples, 0.5) * 1e3:.2f} | "
            f"{percentile(samples, 0.99) * 1e3:.2f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--extents", type=int, default=150)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--http-repeat", type=int, default=0)
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    per = args.rows // args.extents
    load0 = os.getloadavg()
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-bench-planning-"))
    try:
        data_dir = work / "shoal"
        fresh = not (data_dir / "catalog.db").exists()
        db = shoal.connect(data_dir=str(data_dir))
        if fresh:
            db.create_table(TABLE, [Column("service", STRING), Column("level", STRING),
                                    Column("message", STRING), Column("trace_id", STRING),
                                    Column("status", INT), Column("duration_ms", REAL)])
            schema = db.catalog.load_table(TABLE).schema.arrow()
            t0 = time.perf_counter()
            for i in range(args.extents):
                db.append(TABLE, make_extent(i, per, args.extents, schema))
            print(f"wrote {args.rows:,} rows in {args.extents} extents in "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        schema = db.catalog.load_table(TABLE).schema.arrow()
        mid = make_extent(args.extents // 2, per, args.extents, schema)
        needle = mid["trace_id"][per // 3].as_py()
        absent = "f" * 32
        engine = db.query_engine
        lines = []
        for label, value in (("present", needle), ("absent", absent)):
            sql = f"SELECT * FROM {TABLE} WHERE trace_id = '{value}'"
            pred = Equals("trace_id", value)
            plan = db.catalog.plan_extents(TABLE, pred)
            lines.append(f"needle {label}: stage 1 keeps {len(plan.entries)} of "
                         f"{plan.considered} extents")
            res = db.sql(sql, engine="local")
            assert res.table.num_rows == (label == "present"), res.table.num_rows
            yield_rows = [
                row(f"stage 1 ({label})",
                    timed(lambda p=pred: db.catalog.plan_extents(TABLE, p), args.repeat)),
                row(f"plan: stages 1-2 + spec ({label})",
                    timed(lambda s=sql: engine._scans(s, prune=True), args.repeat)),
                row(f"query, engine=local, in process ({label})",
                    timed(lambda s=sql: db.sql(s, engine="local"), args.repeat)),
            ]
            lines.extend(yield_rows)
        http = None
        if args.http_repeat:
            db.close()
            sql = f"SELECT * FROM {TABLE} WHERE trace_id = '{needle}'"
            http = http_needle(work, sql, args.http_repeat)
        load1 = os.getloadavg()
        print(f"## planning: needle over {args.rows:,} rows in {args.extents} extents\n")
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
              f"{os.cpu_count()} CPUs, load {load0[0]:.2f}/{load0[1]:.2f} at start, "
              f"{load1[0]:.2f}/{load1[1]:.2f} at the end; warm, {args.repeat} runs.\n")
        for line in lines:
            if not line.startswith("|"):
                print(f"- {line}")
        print("\n| what | p50 ms | p99 ms |\n|---|---:|---:|")
        for line in lines:
            if line.startswith("|"):
                print(line)
        if http is not None:
            print(row(f"needle through POST /v1/query ({http.engine}), "
                      f"{args.http_repeat} runs", http.samples))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
