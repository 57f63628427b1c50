"""Spark standalone cluster benchmark: the same file-drop and query on `local[2]`
and on a standalone cluster on the same machine, so the cluster's overhead is known; and the
same file-drop on 1 and 2 workers, to show it scales with executors.

    .venv/bin/python bench/bench_cluster.py [--files 20] [--rows 40000] [--queries 3]

Every mode uses the same catalog kind (a fresh Postgres schema), the same store (moto S3,
a fresh prefix) and the same objects, through the driver the cluster tests use
(`tests.support.cluster_driver`, configured by `SHOAL_*` alone); only the Spark master
differs:

- `local[2]`: Spark in the driver's process, 2 task slots;
- `standalone 2x1`: a master and 2 workers of 1 core each (`tests.support.sparkcluster`),
  executors running the `shoal spark pack` archive;
- `standalone 1x1`: the same with one worker.

Reported per mode: session start (JVM, executors, the executor check), the file-drop scan
of `--files` objects (one `scan()`: listing, Spark tasks, commits), and the median of
`--queries` runs of a grouping query over the dropped table (Spark forced).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402

from tests.pg import fresh_schema, require_postgres  # noqa: E402
from tests.support.s3server import TEST_BUCKET, TEST_ENV, s3_server  # noqa: E402
from tests.support.sparkcluster import spark_cluster  # noqa: E402

QUERY = ("SELECT svc, count(*) AS c, sum(n) AS s, max(length(msg)) AS m FROM fd "
         "WHERE level <> 'debug' GROUP BY svc ORDER BY svc")


def objects(files: int, rows: int) -> dict[str, bytes]:
    out = {}
    for i in range(files):
        body = "".join(json.dumps({
            "ts": f"2026-03-{1 + i % 28:02d}T{j % 24:02d}:{j % 60:02d}:00Z",
            "svc": f"svc-{j % 13}", "level": ("debug", "info", "warn", "error")[j % 4],
            "n": j, "msg": f"request {j} from host-{j % 101} took {j % 997} ms"}) + "\n"
            for j in range(rows)).encode()
        out[f"part-{i:03d}.ndjson.gz" if i % 2 else f"part-{i:03d}.ndjson"] = (
            gzip.compress(body, 1) if i % 2 else body)
    return out


class Driver:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.err = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.cluster_driver"],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.answer()

    def answer(self) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the driver exited")
            doc = json.loads(line)
            if "event" not in doc:
                if not doc["ok"]:
                    raise RuntimeError(doc["error"])
                return doc

    def call(self, op: str, **args: object) -> tuple[dict, float]:
        assert self.proc.stdin is not None
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        doc = self.answer()
        return doc, time.perf_counter() - t0

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(120)
        self.err.close()


def run_mode(name: str, master: str, conf: dict[str, str], *, pg: str, endpoint: str,
             prefix: str, data: Path, queries: int, want_rows: int) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "SHOAL_SPARK_CONF")}
    env.update(TEST_ENV)
    with fresh_schema(pg) as catalog_url:
        env.update({"SHOAL_SPARK_MASTER": master, "SHOAL_CATALOG_URL": catalog_url,
                    "SHOAL_STORAGE_URL": f"s3://{TEST_BUCKET}/store-{uuid.uuid4().hex[:8]}",
                    "SHOAL_S3_ENDPOINT": endpoint, "SHOAL_DATA_DIR": str(data / name),
                    "SHOAL_QUERY_ENGINE": "spark",
                    "SHOAL_SPARK_CONF": ";".join(f"{k}={v}" for k, v in conf.items())})
        t0 = time.perf_counter()
        d = Driver(env, data / f"{name}.log")
        d.call("start")
        start_s = time.perf_counter() - t0
        fd, fd_s = d.call("filedrop", table="fd", path=f"s3://{TEST_BUCKET}/{prefix}")
        assert fd["rows"] == want_rows, fd
        times = []
        for _ in range(queries + 1):           # the first run warms the Python workers
            q, q_s = d.call("sql", sql=QUERY)
            assert sum(r["c"] for r in q["rows"]) == want_rows * 3 // 4
            times.append(q_s)
        d.close()
    return {"mode": name, "start_s": start_s, "filedrop_s": fd_s,
            "query_s": statistics.median(times[1:]), "first_query_s": times[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows", type=int, default=40_000)
    ap.add_argument("--queries", type=int, default=3)
    ap.add_argument("--modes", default="local,standalone2,standalone1")
    args = ap.parse_args()
    pg = require_postgres()
    data = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    pack = data / "shoal-env.tar.gz"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "shoal", "spark", "pack", "-o", str(pack)],
                   check=True, cwd=ROOT, capture_output=True)
    print(f"pack: {pack.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s")
    os.environ.update(TEST_ENV)
    base = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "1g", "spark.driver.memory": "1g"}
    shipped = {**base, "spark.archives": f"{pack}#shoalenv",
               "spark.pyspark.python": "./shoalenv/bin/python"}
    results = []
    with s3_server(bucket=TEST_BUCKET) as endpoint:
        objs = objects(args.files, args.rows)
        s3 = boto3.client("s3", endpoint_url=endpoint)
        for key, body in objs.items():
            s3.put_object(Bucket=TEST_BUCKET, Key=f"drop/{key}", Body=body)
        mb = sum(len(b) for b in objs.values()) / 1e6
        print(f"{args.files} objects, {args.files * args.rows} rows, {mb:.1f} MB stored")
        want = args.files * args.rows
        common = dict(pg=pg, endpoint=endpoint, prefix="drop", data=data,
                      queries=args.queries, want_rows=want)
        for mode in args.modes.split(","):
            if mode == "local":
                results.append(run_mode("local[2]", "local[2]", base, **common))
            else:
                workers = int(mode.removeprefix("standalone"))
                with spark_cluster(data / mode, workers=workers, cores=1,
                                   memory="2g") as cluster:
                    results.append(run_mode(f"standalone {workers}x1", cluster.url,
                                            shipped, **common))
            r = results[-1]
            print(f"{r['mode']:>16}: start {r['start_s']:6.1f} s  file-drop "
                  f"{r['filedrop_s']:6.2f} s ({mb / r['filedrop_s']:5.1f} MB/s)  query "
                  f"{r['query_s']:5.2f} s (first {r['first_query_s']:5.2f} s)", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
