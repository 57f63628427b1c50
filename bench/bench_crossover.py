"""Where Spark starts to beat the embedded engine: the same whole-table statements on both
engines over growing tables, on this machine and on a standalone test cluster.

    .venv/bin/python bench/bench_crossover.py [--mb 16,64,256] [--repeat 3]
        [--modes local,standalone2]

Data: bench/logdata.py's generated log lines (the shared generator, ~330 bytes a line),
`--mb` of NDJSON per size, ingested in 16 MB parts (one extent each).

Modes:
- `local`: one process, `shoal.connect(spark_master="local[2]")` (Spark in the process, two
  task slots, what `shoal serve` runs on a laptop or a single VM);
- `standalone2`: the driver the cluster tests use (`tests.support.cluster_driver`, configured
  by `SHOAL_*` alone) against a Spark standalone master with 2 workers of 1 core each on this
  machine (`tests.support.sparkcluster`), executors running the `shoal spark pack` archive;
  the catalog in a fresh Postgres schema, the store a local directory both can read.

For every size and mode: each statement once to warm, then `--repeat` times on
`engine=local` and `engine=spark`; the p50 of each and the ratio spark / local. The crossover
is the smallest size at which Spark answers a statement sooner than the embedded engine
("none up to N MB" when it never does in the sizes run). Output is Markdown.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from logdata import generate  # noqa: E402

from tests.query.everyday_corpus import LOG_COLUMNS  # noqa: E402

STATEMENTS = {
    "errors per service": ("SELECT service, count(*) AS n FROM logs WHERE level = 'error' "
                           "GROUP BY service"),
    "count per minute": ("SELECT date_trunc('minute', _timestamp) AS m, count(*) AS n "
                         "FROM logs GROUP BY 1"),
    "service x level stats": ("SELECT service, level, count(*) AS n, avg(duration_ms) AS a, "
                              "max(length(message)) AS longest FROM logs GROUP BY service, "
                              "level"),
}
PART = 16 << 20


def parts(path: Path, mb: int) -> list[bytes]:
    """The first `mb` MB of `path`'s lines, in ~16 MB parts."""
    out, cur, size, total = [], [], 0, 0
    with open(path, "rb") as f:
        for line in f:
            if total >= mb << 20:
                break
            cur.append(line)
            size += len(line)
            total += len(line)
            if size >= PART:
                out.append(b"".join(cur))
                cur, size = [], 0
    if cur:
        out.append(b"".join(cur))
    return out


class InProcess:
    name = "local[2], one process"

    def __init__(self, work: Path) -> None:
        import shoal

        self.db = shoal.connect(data_dir=str(work), spark_master="local[2]")
        self.db.create_table("logs", LOG_COLUMNS)

    def ingest(self, body: bytes) -> None:
        self.db.ingest_ndjson("logs", body)

    def sql(self, sql: str, engine: str) -> tuple[int, str]:
        r = self.db.sql(sql, engine=engine)
        return r.table.num_rows, r.stats.engine

    def close(self) -> None:
        self.db.close()


class OnCluster:
    """`tests.support.cluster_driver` in a subprocess (bench_cluster's `Driver`), its Spark on
    a standalone cluster."""

    name = "standalone, 2 workers x 1 core"

    def __init__(self, work: Path, master: str, conf: dict[str, str], catalog_url: str) -> None:
        from bench_cluster import Driver

        env = {k: v for k, v in os.environ.items()
               if k not in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "SHOAL_SPARK_CONF")}
        env.update({"SHOAL_SPARK_MASTER": master, "SHOAL_CATALOG_URL": catalog_url,
                    "SHOAL_STORAGE_URL": (work / "objects").as_uri(),
                    "SHOAL_DATA_DIR": str(work),
                    "SHOAL_SPARK_CONF": ";".join(f"{k}={v}" for k, v in conf.items())})
        self.driver = Driver(env, work / "driver.log")
        self.driver.call("start")
        self.driver.call("create", table="logs",
                         columns=[[c.name, c.type.name] for c in LOG_COLUMNS])

    def ingest(self, body: bytes) -> None:
        self.driver.call("ingest", table="logs", ndjson=body.decode())

    def sql(self, sql: str, engine: str) -> tuple[int, str]:
        doc, _ = self.driver.call("sql", sql=sql, engine=engine)
        return len(doc["rows"]), doc["stats"]["engine"]

    def close(self) -> None:
        self.driver.close()


def p50(fn: Any, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure(target: Any, sizes: list[int], source: Path, repeat: int) -> list[dict]:
    out, loaded = [], 0
    for mb in sizes:
        for body in parts(source, mb)[loaded:]:
            target.ingest(body)
        loaded = len(parts(source, mb))
        for name, sql in STATEMENTS.items():
            row: dict[str, Any] = {"mb": mb, "statement": name}
            for engine in ("local", "spark"):
                rows, used = target.sql(sql, engine)
                assert used == engine, (name, engine, used)
                row[engine] = p50(lambda sql=sql, engine=engine: target.sql(sql, engine),
                                  repeat)
                row["rows"] = rows
            out.append(row)
            print(f"  {target.name} {mb} MB {name}: local {row['local'] * 1e3:.0f} ms, "
                  f"spark {row['spark'] * 1e3:.0f} ms", flush=True)
    return out


def report(mode: str, rows: list[dict], sizes: list[int]) -> None:
    print(f"\n### {mode}\n")
    print("| NDJSON | statement | embedded p50 ms | Spark p50 ms | Spark / embedded |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mb']} MB | {r['statement']} | {r['local'] * 1e3:,.1f} | "
              f"{r['spark'] * 1e3:,.1f} | {r['spark'] / r['local']:.2f}x |")
    print()
    for name in STATEMENTS:
        won = [r["mb"] for r in rows if r["statement"] == name and r["spark"] < r["local"]]
        where = f"{min(won)} MB" if won else f"none up to {max(sizes)} MB"
        print(f"- crossover, {name}: {where}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", default="16,64,256")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="local,standalone2")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.mb.split(","))
    source = generate(max(sizes))
    work = Path(tempfile.mkdtemp(prefix="bench-crossover-"))
    load0 = os.getloadavg()[0]
    results: dict[str, list[dict]] = {}
    try:
        for mode in args.modes.split(","):
            if mode == "local":
                target: Any = InProcess(work / "local")
                try:
                    results[target.name] = measure(target, sizes, source, args.repeat)
                finally:
                    target.close()
            elif mode == "standalone2":
                from tests.pg import fresh_schema, require_postgres
                from tests.support.sparkcluster import spark_cluster

                pack = work / "shoal-env.tar.gz"
                subprocess.run([sys.executable, "-m", "shoal", "spark", "pack", "-o",
                                str(pack)], check=True, cwd=ROOT, capture_output=True)
                conf = {"spark.driver.host": "127.0.0.1",
                        "spark.driver.bindAddress": "127.0.0.1",
                        "spark.executor.memory": "1g", "spark.driver.memory": "1g",
                        "spark.archives": f"{pack}#shoalenv",
                        "spark.pyspark.python": "./shoalenv/bin/python"}
                with spark_cluster(work / "cluster", workers=2, cores=1,
                                   memory="2g") as cluster, \
                        fresh_schema(require_postgres()) as catalog_url:
                    (work / "standalone").mkdir()
                    target = OnCluster(work / "standalone", cluster.url, conf, catalog_url)
                    try:
                        results[target.name] = measure(target, sizes, source, args.repeat)
                    finally:
                        target.close()
            else:
                raise SystemExit(f"unknown mode {mode!r}")
        print(f"\n2 cores, load average {load0:.1f} at start, "
              f"{os.getloadavg()[0]:.1f} at end; sizes {args.mb} MB of NDJSON; "
              f"p50 of {args.repeat} warm runs.")
        for mode, rows in results.items():
            report(mode, rows, sizes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
