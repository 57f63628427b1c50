"""A writer process for concurrency and crash tests: real catalog, real store, real format.

    python -m tests.support.writer --catalog URL --store URL --table T --writer W --count N
        [--pause-at STAGE] [--stages] [--go-file PATH] [--evolve NAME:TYPE]

Appends N snapshots, each one extent holding one row `{"writer": W, "seq": i}`, and prints
`ACK <seq> <snapshot id>` once the append of row `seq` returned (it is acknowledged). With
`--stages` it also prints `STAGE <stage> <json info>` each time it reaches a commit stage,
so a test can SIGKILL it once it has read the Nth such line (the writer runs on meanwhile:
it dies at or after that stage). With
`--pause-at STAGE` (a commit-coordinator stage: extent_written, committing, committed) it
prints `PAUSED <stage> <json info>` when it reaches that stage and sleeps, so the test can
SIGKILL it exactly there. With `--evolve` it waits for `--go-file` to exist, then adds or
widens the column, and prints `EVOLVED <version>` or `ERROR <class> <message>`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]


def spawn(catalog_url: str, store_url: str, *args: str, table: str = "t",
          stderr: int | None = None) -> subprocess.Popen[str]:
    """Start a writer process (line-buffered text stdout) against a real catalog and store."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.writer", "--catalog", catalog_url,
         "--store", store_url, "--table", table, *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})


def pause_hook(pause_at: str | None, *, report: bool = False):
    """A stage hook that, at stage `pause_at`, prints `PAUSED <stage> <json info>` and sleeps
    forever, so a test can SIGKILL the process exactly there (None: never pauses). With
    `report`, every stage reached is printed first as `STAGE <stage> <json info>`."""
    def hook(stage: str, **info: object) -> None:
        if report:
            print(f"STAGE {stage} {json.dumps(info)}", flush=True)
        if stage == pause_at:
            print(f"PAUSED {stage} {json.dumps(info)}", flush=True)
            while True:
                time.sleep(60)
    return hook


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--catalog", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--writer", type=int, default=0)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--pause-at")
    p.add_argument("--stages", action="store_true")
    p.add_argument("--go-file")
    p.add_argument("--evolve")
    args = p.parse_args(argv)

    from shoal.catalog import open_catalog
    from shoal.errors import ShoalError
    from shoal.format.tlm import TlmFormat
    from shoal.commit import CommitCoordinator
    from shoal.storage import open_store
    from shoal.types import Column, parse_type

    hook = pause_hook(args.pause_at, report=args.stages)
    catalog = open_catalog(args.catalog)
    coord = CommitCoordinator(catalog, open_store(args.store), TlmFormat(), on_stage=hook)
    base = catalog.load_table(args.table).schema
    if args.go_file:
        print("READY", flush=True)
        while not os.path.exists(args.go_file):
            time.sleep(0.005)
    if args.evolve:
        name, type_name = args.evolve.split(":", 1)
        try:
            info = coord.evolve_schema(args.table, [Column(name, parse_type(type_name))],
                                       base=base)
        except ShoalError as e:
            print(f"ERROR {type(e).__name__} {e}", flush=True)
            return 3
        print(f"EVOLVED {info.schema.version}", flush=True)
        return 0
    for i in range(args.count):
        info = catalog.load_table(args.table)
        batch = pa.RecordBatch.from_pylist(
            [{"_timestamp": time.time_ns(), "props": None, "writer": args.writer, "seq": i}],
            schema=info.schema.arrow())
        outcome = coord.append_batches(args.table, [batch])
        snapshot = outcome.snapshot.snapshot_id if outcome.snapshot is not None else None
        print(f"ACK {i} {snapshot}", flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
