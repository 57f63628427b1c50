"""Where one chunk's CPU goes on the ingest path, beside the parse limit, in one run.

    .venv/bin/python bench/bench_ingest_stages.py [--chunk-mb 32] [--repeat 3] [--typed]

One chunk cut at a line end from bench_ingest.py's log file (`--typed`: its typed-only
file), the table of bench_ingest.py (without `attrs` for `--typed`). Each stage is called
directly, `--repeat` times, best wall kept with its CPU seconds (user + system of this
process, all threads: Arrow's pools included):

- `pyarrow.json.read_json` of the chunk, schema inferred (the parse limit's reference);
- `coerce_ndjson` (shoal's coercion, fast path);
- `TlmWriter` append + finish of the coerced rows (statistics, filters, IPC + zstd), into a
  local store; then the statistics alone, column by column, and the IPC stream alone;
- `db.ingest_ndjson` of every chunk of the file one after the other (coercion, buffer,
  extent, commit: the whole write path without the CLI's overlap).

Every figure is printed with its ratio to `read_json`'s CPU: the path's target (0.8x of the
parse limit on 2 cores) needs the whole path at about 1.25x of it.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.json as pj  # noqa: E402

import shoal  # noqa: E402
from bench.logdata import COLUMNS, generate, generate_typed  # noqa: E402
from shoal.format.stats import ExtentStatsBuilder  # noqa: E402
from shoal.format.tlm import DEFAULT_BLOCK_ROWS, TlmWriter  # noqa: E402
from shoal.ingest.chunks import iter_file_chunks  # noqa: E402
from shoal.ingest.coerce import coerce_ndjson  # noqa: E402
from shoal.storage.local import LocalObjectStore  # noqa: E402

BLOCK_ROWS = DEFAULT_BLOCK_ROWS   # the writer's blocks (the stats and IPC rows cut the same)


def cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime


def stage(repeat: int, fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(cpu s, wall s, result) of the fastest of `repeat` calls."""
    best: tuple[float, float, Any] | None = None
    for _ in range(repeat):
        c0, t0 = cpu(), time.perf_counter()
        result = fn()
        c, t = cpu() - c0, time.perf_counter() - t0
        if best is None or t < best[1]:
            best = (c, t, result)
    assert best is not None
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-mb", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--typed", action="store_true")
    args = ap.parse_args()
    path = generate_typed(150, generate(512)) if args.typed else generate(256)
    with open(path, "rb") as f:
        body = f.read(args.chunk_mb << 20)
    body = body[:body.rfind(b"\n") + 1]
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-stages-"))
    db = shoal.connect(data_dir=str(work / "data"))
    columns = [c for c in COLUMNS if not (args.typed and c["type"] == "dynamic")]
    db.create_table("logs", [shoal.Column(c["name"], getattr(shoal, c["type"].upper()))
                             for c in columns])
    schema = db.catalog.load_table("logs").schema
    store = LocalObjectStore(str(work / "store"))
    mb = len(body) / 2**20
    print(f"## one {mb:.1f} MB chunk of {path.name}, load "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("| stage | CPU s | wall s | CPU vs read_json |\n|---|---:|---:|---:|")
    ref_cpu = 1.0

    def row(name: str, c: float, t: float) -> None:
        print(f"| {name} | {c:.3f} | {t:.3f} | {c / ref_cpu:.2f}x |")

    c, t, _ = stage(args.repeat, lambda: pj.read_json(pa.BufferReader(body)))
    ref_cpu = c
    row("`read_json`, schema inferred (reference)", c, t)
    c, t, coerced = stage(args.repeat, lambda: coerce_ndjson(
        body, schema, unknown="props", ingest_time_ns=time.time_ns()))
    row("`coerce_ndjson`", c, t)
    batch = coerced.batch

    def write() -> None:
        w = TlmWriter(store, "t", batch.schema)
        w.append(batch)
        w.finish()
    c, t, _ = stage(args.repeat, write)
    row("`TlmWriter` append + finish", c, t)

    def stats_of(sub: pa.RecordBatch) -> Callable[[], None]:
        def run() -> None:
            b = ExtentStatsBuilder(sub.schema)
            for off in range(0, sub.num_rows, BLOCK_ROWS):
                b.add_block(sub.slice(off, BLOCK_ROWS))
            b.finish()
        return run
    c, t, _ = stage(args.repeat, stats_of(batch))
    row("statistics alone (all columns)", c, t)
    for name in batch.schema.names:
        sub = pa.RecordBatch.from_arrays([batch.column(name)],
                                         schema=pa.schema([batch.schema.field(name)]))
        c, t, _ = stage(args.repeat, stats_of(sub))
        row(f"&nbsp;&nbsp;statistics of `{name}`", c, t)

    def ipc() -> None:
        sink = pa.BufferOutputStream()
        opts = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.ipc.new_file(sink, batch.schema, options=opts) as w:
            for off in range(0, batch.num_rows, BLOCK_ROWS):
                w.write_batch(batch.slice(off, BLOCK_ROWS))
    c, t, _ = stage(args.repeat, ipc)
    row("IPC file + zstd alone", c, t)

    with open(path, "rb") as f:
        c0, t0 = cpu(), time.perf_counter()
        # as `shoal ingest` reads a regular file (os.pread, the GIL released while copying)
        chunks = [chunk for chunk, _ in iter_file_chunks(f.fileno(), args.chunk_mb << 20)]
        c_read, t_read = cpu() - c0, time.perf_counter() - t0
    n = len(chunks)
    row(f"reading + cutting the file ({path.stat().st_size / 2**20:.0f} MB) into {n} chunks, "
        "per chunk", c_read / n, t_read / n)
    c0, t0 = cpu(), time.perf_counter()
    for chunk in chunks:
        db.ingest_ndjson("logs", chunk)
    c, t = cpu() - c0, time.perf_counter() - t0
    row(f"`db.ingest_ndjson` of those {n} chunks one by one, per chunk", c / n, t / n)
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
