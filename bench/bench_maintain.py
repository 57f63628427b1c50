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

    .venv/bin/python bench/bench_maintain.py --delete [--rows 2000000] [--extents 48]

The DELETE benchmark instead: one day of `bench/logdata.py`'s logs (`generate_day`),
ingested in time order as `--extents` NDJSON requests (48: one extent per half hour), then

1. `DELETE FROM logs WHERE _timestamp` in one hour (10:00-11:00): only that hour's extents
   may be touched (asserted from the answer and from the snapshot);
2. then `DELETE FROM logs WHERE duration_ms % 1000 = 7`: 0.1% of the rows, spread over
   every extent (nothing to prune: every extent left is read and rewritten);

each with its wall time, rows deleted, extents touched/rewritten/removed and bytes
rewritten, and the same two deletes by DuckDB (`DELETE` on its own table in a database
file, the same rows) and delta-rs (`DeltaTable.delete` on a Delta table written with the
same rows as the same number of files), as a ratio (shoal's time / the peer's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
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


SPREAD = "duration_ms % 1000 = 7"
HOUR = ("_timestamp >= '{day}T10:00:00Z' AND _timestamp < '{day}T11:00:00Z'")


def delete_benchmark(rows: int, extents: int, work: Path) -> None:
    """The DELETE benchmark (see the module docstring); Markdown on stdout."""
    import duckdb
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from logdata import COLUMNS, DAY_START, generate_day

    from shoal.types import Column, parse_type

    load = os.getloadavg()[0]
    src = generate_day(rows)
    lines = src.read_bytes().splitlines()
    assert len(lines) == rows
    db = shoal.connect(data_dir=str(work / "shoal"))
    db.create_table("logs", [Column(c["name"], parse_type(c["type"])) for c in COLUMNS])
    t0 = time.perf_counter()
    bounds = [round(k * rows / extents) for k in range(extents + 1)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        db.ingest_ndjson("logs", b"\n".join(lines[a:b]))
    del lines
    n, live = db.catalog.table_counts("logs")
    print(f"ingested {n:,} rows as {live} extents in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr)
    table, _ = db.read("logs")
    flat = table.set_column(table.schema.get_field_index("attrs"), "attrs",
                            table.column("attrs").cast(pa.string()))
    flat = flat.set_column(0, "_timestamp",
                           flat.column("_timestamp").cast(pa.timestamp("us", tz="UTC")))
    flat = flat.drop_columns([c for c in flat.column_names if c == "props"])
    hour = HOUR.format(day=DAY_START)

    lo = int(datetime.fromisoformat(f"{DAY_START}T10:00:00+00:00").timestamp()) * 10**9
    hi = lo + 3600 * 10**9
    results = {}
    for name, where in (("one hour", hour), ("spread 0.1%", SPREAD)):
        before = {e.object_path: e for e in db.catalog.manifests("logs")}
        t0 = time.perf_counter()
        row = db.sql(f"DELETE FROM logs WHERE {where}").table.to_pylist()[0]
        secs = time.perf_counter() - t0
        after = {e.object_path for e in db.catalog.manifests("logs")}
        touched = [e for p, e in before.items() if p not in after]
        assert len(touched) == row["extents_touched"]
        if name == "one hour":      # only extents holding rows of that hour were touched
            assert all(e.min_ts < hi and e.max_ts >= lo for e in touched), touched
        results[name] = {"s": secs, **row}

    duck_path = str(work / "duck.db")
    con = duckdb.connect(duck_path)
    con.register("src", flat)
    con.execute("CREATE TABLE logs AS SELECT * FROM src")
    con.unregister("src")
    con.execute("CHECKPOINT")
    duck = {}
    for name, where in (("one hour", hour), ("spread 0.1%", SPREAD)):
        t0 = time.perf_counter()
        deleted = con.execute(f"DELETE FROM logs WHERE {where}").fetchone()[0]
        con.execute("CHECKPOINT")
        duck[name] = {"s": time.perf_counter() - t0, "rows": deleted}
    con.close()

    delta_path = str(work / "delta")
    for a, b in zip(bounds, bounds[1:], strict=False):
        write_deltalake(delta_path, flat.slice(a, b - a), mode="append")
    delta = {}
    for name, where in (("one hour", " AND ".join(
                            f"_timestamp {op} arrow_cast('{DAY_START}T{h}:00:00Z', "
                            "'Timestamp(Microsecond, Some(\"UTC\"))')"
                            for op, h in ((">=", 10), ("<", 11)))),
                        ("spread 0.1%", SPREAD)):
        dt = DeltaTable(delta_path)
        sizes = {a["path"]: a["size_bytes"]
                 for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist()}
        t0 = time.perf_counter()
        metrics = dt.delete(where)
        secs = time.perf_counter() - t0
        dt = DeltaTable(delta_path)
        new = {a["path"]: a["size_bytes"]
               for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist()}
        delta[name] = {"s": secs, "rows": metrics.get("num_deleted_rows"),
                       "files": metrics.get("num_removed_files"),
                       "bytes": sum(v for k, v in new.items() if k not in sizes)}

    print(f"## DELETE benchmark ({rows:,} rows, one day, {extents} extents; load {load:.1f})\n")
    print("| delete | rows deleted | shoal s | extents touched (rewritten + removed) of "
          f"{extents} | bytes rewritten | DuckDB s | ratio | delta-rs s | files touched | "
          "bytes rewritten | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        d, dl = duck[name], delta[name]
        assert d["rows"] == r["rows_deleted"] == dl["rows"], (name, r, d, dl)
        print(f"| {name} | {r['rows_deleted']:,} | {r['s']:.2f} | {r['extents_touched']} "
              f"({r['extents_rewritten']} + {r['extents_removed']}) | "
              f"{r['bytes_rewritten'] / 1e6:.1f} MB | {d['s']:.2f} | "
              f"{r['s'] / d['s']:.1f}x | {dl['s']:.2f} | {dl['files']} | "
              f"{dl['bytes'] / 1e6:.1f} MB | {r['s'] / dl['s']:.1f}x |")
    db.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--delete", action="store_true",
                   help="run the DELETE benchmark instead (see the module docstring)")
    p.add_argument("--extents", type=int, default=None)
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--target", default="128MB", help="target_extent_size of the table")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-bench-maintain-"))
    if args.delete:
        try:
            delete_benchmark(args.rows or 2_000_000, args.extents or 48, work)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        return 0
    args.rows = args.rows or 200_000
    args.extents = args.extents or 1000
    per = args.rows // args.extents
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
