"""Figures that used to be wall-clock asserts in tests (tests wait on events; speed
is measured here).

    .venv/bin/python bench/bench_timings.py [--repeat 5] [--kafka]

1. Bloom filter build: `BloomFilter.build` of 100,000 distinct 32-hex strings (warm), median
   of `--repeat`. Target ~50 ms (the old test allowed 0.5 s).
2. Unreachable S3 endpoint: how long `get` then `put` take to fail with `StorageError` when
   nothing listens (127.0.0.1:9); the retries must stay bounded (the old test allowed 20 s).
3. 64 concurrent HTTP writers: 64 clients released by a barrier, 50 rows each, into an
   embedded server (tests' `serve_app`, local store, SQLite): wall time until all are acked
   and the extents the group commit made (the old test allowed 60 s).
4. With `--kafka` (starts the librdkafka mock cluster and Spark `local[2]`): a transactional
   topic of 20 records (commit markers after them) read by the pipeline until idle 0.3 s:
   wall time (the old test allowed 40 s: a pipeline that waited for the marker would not).

The load average is printed first: run it on an otherwise idle host. Output is Markdown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import shoal  # noqa: E402
from shoal.errors import StorageError  # noqa: E402
from shoal.format.membership import BloomFilter  # noqa: E402


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bloom_build(repeat: int) -> str:
    values = pa.array([f"{i:032x}" for i in range(100_000)])
    BloomFilter.build(values.slice(0, 1000))          # warm-up
    return f"{median_s(lambda: BloomFilter.build(values), repeat) * 1000:.1f} ms"


def unreachable_s3() -> str:
    from shoal.storage.s3 import S3ObjectStore

    store = S3ObjectStore("shoal-bench", "p", endpoint="http://127.0.0.1:9",
                          region="us-east-1", access_key="x", secret_key="x")
    t0 = time.perf_counter()
    for op in (lambda: store.get("k"), lambda: store.put("k", b"x")):
        try:
            op()
        except StorageError:
            pass
        else:
            raise SystemExit("an unreachable endpoint answered")
    return f"{time.perf_counter() - t0:.2f} s"


def concurrent_writers() -> str:
    import httpx

    from shoal.server import create_app
    from tests.support.server import serve_app

    with tempfile.TemporaryDirectory() as tmp:
        db = shoal.connect(data_dir=tmp)
        db.create_table("t", [shoal.Column("w", shoal.LONG), shoal.Column("i", shoal.LONG)])
        body = [b"".join(b'{"w": %d, "i": %d}\n' % (w, i) for i in range(50))
                for w in range(64)]
        barrier = threading.Barrier(64)

        def write(url: str, w: int) -> int:
            with httpx.Client(base_url=url, timeout=300) as c:
                barrier.wait()
                return c.post("/v1/ingest/t", content=body[w]).status_code

        try:
            with serve_app(create_app(db, config=db.config)) as url, \
                    ThreadPoolExecutor(64) as pool:
                t0 = time.perf_counter()
                codes = list(pool.map(lambda w: write(url, w), range(64)))
                wall = time.perf_counter() - t0
            assert codes == [200] * 64, codes
            rows, extents = db.catalog.table_counts("t")
        finally:
            db.close()
    return f"{wall:.2f} s ({rows} rows, {extents} extents)"


def kafka_marker() -> str:
    from confluent_kafka import Producer

    from shoal.frontends.kafka import KafkaPipeline, resolve_binding
    from tests.support.kafka import kafka_broker

    with kafka_broker() as broker, tempfile.TemporaryDirectory() as tmp:
        topic = f"bench-txn-{os.getpid()}"
        broker.create_topic(topic, 2)
        db = shoal.connect(data_dir=tmp, spark_master="local[2]")
        try:
            db.sql("CREATE TABLE tx (i long)")
            binding = resolve_binding(db.catalog, "tx", bootstrap=broker.bootstrap,
                                      topics=[topic])
            producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3,
                                 "transactional.id": f"shoal-bench-{topic}"})
            producer.init_transactions(30)
            producer.begin_transaction()
            for i in range(20):
                producer.produce(topic, value=b'{"i":%d}' % i, partition=i % 2)
            producer.commit_transaction(30)
            pipeline = KafkaPipeline(db, binding, trigger_s=0.2)
            t0 = time.perf_counter()
            try:
                progress = pipeline.run(until_idle_s=0.3)
            finally:
                pipeline.close()
            wall = time.perf_counter() - t0
        finally:
            db.close()
    return f"{wall:.2f} s (lag {progress.lag})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--kafka", action="store_true")
    args = p.parse_args()
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| figure | value | the old test's bound |")
    print("|---|---|---|")
    print(f"| bloom build, 100k 32-hex strings (median) | {bloom_build(args.repeat)} | 0.5 s |")
    print(f"| unreachable S3 endpoint: get + put fail | {unreachable_s3()} | 20 s |")
    print(f"| 64 concurrent HTTP writers, 50 rows each | {concurrent_writers()} | 60 s |")
    if args.kafka:
        print(f"| Kafka transactional topic read to idle | {kafka_marker()} | 40 s |")


if __name__ == "__main__":
    main()
