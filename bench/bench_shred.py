"""Benchmark: a `dynamic` path predicate over shredded vs unshredded extents (docs/storage.md).

    .venv/bin/python bench/bench_shred.py [--rows 2000000] [--repeat 5] [--extent-rows 500000]

The same generated log rows (service, level, attrs = {"http": {"method", "route"},
"user": {"id"}} as JSON) go into two shoal tables, one written with shredding (hidden
sub-columns of the common paths) and one without, and into a Parquet file with `attrs` as
JSON text. `SELECT count(*) ... WHERE get_json_object(attrs, '$.http.method') = 'POST'` is
then timed (median of `--repeat`, warm) on shoal's embedded engine over each table -- and,
for the unshredded table, also in the form the engine used before (the statement over a
CTE keeps the old CASE that parses every value twice) -- against DuckDB over the Parquet
file (`attrs->>'$.http.method'`) and, when `chdb` imports, ClickHouse's engine over the same
file (`JSONExtractString`). Ingest cost: the extent write time of both tables (the same
writer, in process, local store), and the NDJSON ingest (`db.ingest_ndjson`: parse, coerce,
write, commit) of the first `--ingest-rows` rows with and without shredding. Output is
Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import shoal
from shoal.format.shred import ShredOptions
from shoal.format.tlm import TlmFormat
from shoal.types import DYNAMIC, STRING, Column

WORDS = "users orders payment login search cart admin health metrics items".split()
QUERY = ("SELECT count(*) AS n FROM {t} "
         "WHERE get_json_object(attrs, '$.http.method') = 'POST'")
OLD_QUERY = ("WITH s AS (SELECT attrs FROM {t}) SELECT count(*) AS n FROM s "
             "WHERE get_json_object(attrs, '$.http.method') = 'POST'")


def make_rows(n: int) -> pa.Table:
    rng = random.Random(1)
    attrs = [json.dumps({"http": {"method": rng.choice(("GET", "GET", "POST", "PUT")),
                                  "route": f"/api/v1/{rng.choice(WORDS)}"},
                         "user": {"id": rng.randint(1, 100_000)}},
                        separators=(",", ":")).encode() for _ in range(n)]
    return pa.table({
        "_timestamp": pa.array(range(1_700_000_000 * 10**9, 1_700_000_000 * 10**9 + n * 10**6,
                                     10**6), pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(n, pa.binary()),
        "service": pa.array([f"svc-{i % 40}" for i in range(n)]),
        "level": pa.array([("info", "warn", "error")[i % 3] for i in range(n)]),
        "attrs": pa.array(attrs, pa.binary()),
    })


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    fn()                                        # warm
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def write_table(db: Any, name: str, rows: pa.Table, shred: ShredOptions | None,
                extent_rows: int) -> float:
    db.create_table(name, [Column("service", STRING), Column("level", STRING),
                           Column("attrs", DYNAMIC)])
    info = db.catalog.load_table(name)
    rows = rows.cast(info.schema.arrow())
    before = db.coordinator.extents.format
    db.coordinator.extents.format = TlmFormat(shred=shred)
    try:
        t0 = time.perf_counter()
        entries = [db.coordinator.write_extent(info, rows.slice(i, extent_rows).to_batches())
                   for i in range(0, rows.num_rows, extent_rows)]
        spent = time.perf_counter() - t0
        db.coordinator.append(name, entries)
    finally:
        db.coordinator.extents.format = before
    return spent


def ndjson_ingest(db: Any, rows: pa.Table, shred: ShredOptions | None, label: str) -> float:
    """Median seconds of three `ingest_ndjson` calls of `rows` into a fresh table each."""
    ts = rows.column("_timestamp").to_pylist()
    lines = [json.dumps({"_timestamp": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "service": s,
                         "level": lv, "attrs": json.loads(a)})
             for t, s, lv, a in zip(ts, rows.column("service").to_pylist(),
                                    rows.column("level").to_pylist(),
                                    rows.column("attrs").to_pylist(), strict=True)]
    body = ("\n".join(lines) + "\n").encode()
    before = db.coordinator.extents.format
    db.coordinator.extents.format = TlmFormat(shred=shred)
    spent = []
    try:
        for i in range(3):
            name = f"ingest_{label}_{i}"
            db.create_table(name, [Column("service", STRING), Column("level", STRING),
                                   Column("attrs", DYNAMIC)])
            t0 = time.perf_counter()
            db.ingest_ndjson(name, body)
            spent.append(time.perf_counter() - t0)
    finally:
        db.coordinator.extents.format = before
    return statistics.median(spent)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--extent-rows", type=int, default=500_000)
    ap.add_argument("--ingest-rows", type=int, default=500_000)
    args = ap.parse_args()
    rows = make_rows(args.rows)
    work = Path(tempfile.mkdtemp(prefix="bench-shred-"))
    db = shoal.connect(data_dir=str(work / "data"), query_engine="local")
    t_plain = write_table(db, "plain", rows, None, args.extent_rows)
    t_shred = write_table(db, "shredded", rows, ShredOptions(), args.extent_rows)
    size = {t: sum(e.byte_size for e in db.catalog.plan_extents(t, None).entries)
            for t in ("plain", "shredded")}
    parquet = work / "logs.parquet"
    pq.write_table(pa.table({"_timestamp": rows.column("_timestamp"),
                             "service": rows.column("service"), "level": rows.column("level"),
                             "attrs": rows.column("attrs").cast(pa.string())}),
                   parquet, compression="zstd")

    results: dict[str, tuple[float, int, int | None]] = {}

    def shoal_run(label: str, sql: str) -> None:
        def run() -> Any:
            return db.sql(sql, engine="local")
        seconds, answer = timed(run, args.repeat)
        scan = answer.stats.to_json()["scans"][0]
        results[label] = (seconds, answer.table.column(0)[0].as_py(), scan["bytes_read"])

    shoal_run("shoal, shredded", QUERY.format(t="shredded"))
    shoal_run("shoal, unshredded (JSON parsed once)", QUERY.format(t="plain"))
    shoal_run("shoal, unshredded, the old CASE form", OLD_QUERY.format(t="plain"))

    import duckdb
    con = duckdb.connect(config={"threads": 2})
    duck_sql = (f"SELECT count(*) FROM read_parquet('{parquet}') "
                "WHERE attrs->>'$.http.method' = 'POST'")
    seconds, out = timed(lambda: con.execute(duck_sql).fetchall(), args.repeat)
    results["DuckDB over Parquet (attrs JSON text)"] = (seconds, out[0][0], None)
    try:
        import chdb
    except ImportError:
        chdb = None
    if chdb is not None:
        ch_sql = (f"SELECT count() FROM file('{parquet}', Parquet) "
                  "WHERE JSONExtractString(attrs, 'http', 'method') = 'POST' "
                  "SETTINGS max_threads = 2")
        seconds, out = timed(lambda: chdb.query(ch_sql, "CSV"), args.repeat)
        results["chdb (ClickHouse) over Parquet"] = (seconds, int(str(out).strip()), None)

    ingest = {label: ndjson_ingest(db, rows.slice(0, args.ingest_rows), shred, label)
              for label, shred in (("unshredded", None), ("shredded", ShredOptions()))}
    counts = {r[1] for r in results.values()}
    load = os.getloadavg()[0]
    duck = results["DuckDB over Parquet (attrs JSON text)"][0]
    print(f"## Shredded dynamic paths ({args.rows:,} rows, {os.cpu_count()} CPUs, "
          f"load average {load:.1f} at the end)\n")
    print("`SELECT count(*) ... WHERE get_json_object(attrs, '$.http.method') = 'POST'`, "
          f"median of {args.repeat} warm runs; answers agree: {len(counts) == 1}\n")
    print("| engine | ms | bytes read | vs DuckDB |")
    print("|---|---:|---:|---:|")
    for label, (seconds, _, nbytes) in results.items():
        shown = f"{nbytes:,}" if nbytes is not None else "-"
        print(f"| {label} | {seconds * 1000:,.1f} | {shown} | {seconds / duck:.2f}x |")
    print("\nIngest (extent writes, in process, local store):\n")
    print("| table | write s | rows/s | extent bytes |")
    print("|---|---:|---:|---:|")
    for label, spent, t in (("unshredded", t_plain, "plain"), ("shredded", t_shred, "shredded")):
        print(f"| {label} | {spent:.2f} | {args.rows / spent:,.0f} | {size[t]:,} |")
    print(f"\nshredding costs {t_shred / t_plain:.2f}x the extent write time and "
          f"{size['shredded'] / size['plain']:.2f}x the bytes\n")
    n = min(args.ingest_rows, args.rows)
    print(f"NDJSON ingest of {n:,} rows (`db.ingest_ndjson`, median of 3):\n")
    print("| table | s | rows/s |")
    print("|---|---:|---:|")
    for label, spent in ingest.items():
        print(f"| {label} | {spent:.2f} | {n / spent:,.0f} |")
    print(f"\nshredding costs {ingest['shredded'] / ingest['unshredded']:.2f}x the ingest time")
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
