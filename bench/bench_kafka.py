"""Kafka benchmark: Kafka -> table records/s and MB/s beside `shoal ingest` of the same bytes.

    .venv/bin/python bench/bench_kafka.py [--mb 128] [--partitions 4]

The log NDJSON of `bench_ingest.py` (same generator, cached under bench/out/) is produced
line by line into a topic of a librdkafka mock cluster (`tests.support.kafka`; a real broker
with SHOAL_TEST_KAFKA_BOOTSTRAP). Then, in the same run, on `local[2]`:

1. `shoal ingest FILE --table logs` (the CLI, a subprocess): MB/s over its wall time;
2. `shoal pipeline kafka --topic T --table logs --until-idle 1` (a subprocess): wall time,
   and the pipeline's own rate over its active time (query start to the last commit, i.e.
   without the JVM/Spark session start-up, which a long-running pipeline pays once).

Target: Kafka >= 0.7x `shoal ingest` MB/s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_ingest import COLUMNS, generate, shoal_ingest  # noqa: E402

from tests.support.kafka import kafka_broker  # noqa: E402

_SUMMARY = re.compile(r"(\d+) records .* ([\d.]+) MB in ([\d.]+)s: ([\d,]+) records/s, "
                      r"([\d.]+) MB/s(?: \(after the first batch ([\d,]+) records/s, "
                      r"([\d.]+) MB/s\))?")


def produce(broker, topic: str, path: Path, partitions: int) -> tuple[int, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 21, "log_level": 3})
    n = 0
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            if not line:
                continue
            while True:
                try:
                    p.produce(topic, value=line, partition=n % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
            n += 1
            if n % 10_000 == 0:
                p.poll(0)
    p.flush(120)
    return n, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--max-records-per-partition", type=int, default=100_000)
    args = ap.parse_args()
    path = generate(args.mb)
    size_mb = path.stat().st_size / 1e6
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-kafka-"))
    env = {**os.environ, "SHOAL_SPARK_MASTER": "local[2]"}
    shoal = str(ROOT / ".venv" / "bin" / "shoal")
    try:
        with kafka_broker() as broker:
            topic = f"bench-logs-{os.getpid()}"
            broker.create_topic(topic, args.partitions)
            n, t_produce = produce(broker, topic, path, args.partitions)
            t_ingest, ingest_summary = shoal_ingest(path, work)

            data = work / "kafka-data"
            subprocess.run([shoal, "--data-dir", str(data), "create-table", "logs",
                            *[a for c in COLUMNS for a in ("-c", f"{c['name']}:{c['type']}")]],
                           check=True, capture_output=True, env=env)
            t0 = time.perf_counter()
            out = subprocess.run(
                [shoal, "--data-dir", str(data), "pipeline", "kafka", "--bootstrap",
                 broker.bootstrap, "--topic", topic, "--table", "logs", "--until-idle", "1",
                 "--max-records-per-partition", str(args.max_records_per_partition)],
                capture_output=True, text=True, env=env)
            t_wall = time.perf_counter() - t0
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            summary = out.stdout.strip().splitlines()[-1]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m = _SUMMARY.search(summary)
    assert m is not None, summary
    records, kmb, active = int(m.group(1)), float(m.group(2)), float(m.group(3))
    assert records == n, (records, n)
    ingest_mbs = size_mb / t_ingest
    active_mbs = size_mb / active
    wall_mbs = size_mb / t_wall
    print(f"## Kafka -> table, {size_mb:,.0f} MB of log NDJSON as {n:,} records over "
          f"{args.partitions} partitions (librdkafka mock cluster, local[2], 2 cores)")
    print("| path | seconds | records/s | MB/s | vs shoal ingest |\n|---|---|---|---|---|")
    print(f"| shoal ingest (CLI, same bytes) | {t_ingest:.1f} | {n / t_ingest:,.0f} | "
          f"{ingest_mbs:,.1f} | 1.00x |")
    print(f"| shoal pipeline kafka, active (query start -> last commit) | {active:.1f} | "
          f"{n / active:,.0f} | {active_mbs:,.1f} | {active_mbs / ingest_mbs:.2f}x |")
    if m.group(7):
        steady_mbs = float(m.group(7))
        print(f"| shoal pipeline kafka, steady (after the first micro-batch) | | "
              f"{m.group(6)} | {steady_mbs:,.1f} | {steady_mbs / ingest_mbs:.2f}x |")
    print(f"| shoal pipeline kafka, process wall (incl. JVM + Spark start, 1 s idle) | "
          f"{t_wall:.1f} | {n / t_wall:,.0f} | {wall_mbs:,.1f} | {wall_mbs / ingest_mbs:.2f}x |")
    print(f"\nproduce: {n / t_produce:,.0f} records/s; value bytes {kmb:,.1f} MB "
          f"(file {size_mb:,.1f} MB incl. newlines)\nshoal ingest said: {ingest_summary}\n"
          f"pipeline said: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
