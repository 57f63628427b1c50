"""What each extent statistic costs at ingest, against the parse.

    .venv/bin/python bench/bench_stats.py [--mb 32] [--repeat 3] [--file PATH]

Takes the first `--mb` MB of the benchmark's log file (bench/bench_ingest.py generates it),
coerces it with shoal's coercion into the table of bench/bench_ingest.py (`COLUMNS`) and cuts
the batch into the writer's 65,536-row blocks. Then, on those blocks, it times:

- the parse: `pyarrow.json.read_json` of the same bytes (schema inferred, both cores);
- each statistic on its own, as the extent writer computes it (`shoal.format.stats`): block
  min/max/null counts, distinct sets (`unique` until a set overflows its cap), token sets,
  membership filters (identifier check, hashes, extent and per-block bloom filters), present
  paths of the `dynamic` columns, and the IPC serialisation with zstd;
- all stats together (`ExtentStatsBuilder`, what the writer runs on its caller's thread) and
  the whole `TlmWriter` (stats + IPC on its background thread) into memory;
- how much of each holds the GIL: the same work beside a pure-Python busy thread, whose loop
  rate falls by the share of the time the GIL is kept from it (0% = the work runs entirely
  in C kernels that release the GIL; a thread busy in Python code would take ~50%, as the
  interpreter hands the GIL back and forth every switch interval). On a machine with other
  load the busy thread also loses CPU to it: two calibration rows (C work that releases the
  GIL, a Python loop) show the floor and the ceiling of that figure in the same run;
- the overlap the ingest paths rely on: writing chunk N's extent on one thread while chunk
  N+1 is coerced on another, against each alone.

Every figure is the best of `--repeat` (wall and CPU seconds of the process, all threads).
The machine may be shared: the header prints the load average; compare rows of one run.
Output is Markdown.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_format import MemoryStore  # noqa: E402
from bench.logdata import COLUMNS  # noqa: E402
from shoal.format.jsonpaths import DynamicColumn  # noqa: E402
from shoal.format.membership import DEFAULT_FP_RATE  # noqa: E402
from shoal.format.blockfilters import BLOCK_FP_RATE  # noqa: E402
from shoal.format.stats import (DISTINCT_SET_CAP, ExtentStatsBuilder, _IndexedColumn,  # noqa: E402
                                block_stats, is_dynamic, stat_kind)
from shoal.format.tlm import DEFAULT_BLOCK_ROWS, TlmFormat  # noqa: E402
from shoal.ingest.coerce import coerce_ndjson  # noqa: E402
from shoal.types import Column, Schema  # noqa: E402
from shoal.types.columns import parse_type  # noqa: E402
from shoal.types.schema import TIMESTAMP_COLUMN  # noqa: E402


def read_chunk(path: Path, mb: float, skip: int = 0) -> bytes:
    """`mb` MB of whole lines of `path`, after the first `skip` chunks of that size."""
    size = int(mb * (1 << 20))
    with open(path, "rb") as f:
        data = f.read(size * (skip + 1) + (1 << 16))
    start = 0 if skip == 0 else data.rfind(b"\n", 0, size * skip) + 1
    end = data.rfind(b"\n", 0, start + size) + 1
    return data[start:end]


def table_schema() -> Schema:
    return Schema.create([Column(c["name"], parse_type(c["type"])) for c in COLUMNS])


def coerce(data: bytes, schema: Schema) -> pa.RecordBatch:
    return coerce_ndjson(data, schema, unknown="drop", ingest_time_ns=time.time_ns()).batch


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall and CPU seconds (this process, all threads) of `repeat` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


# ---- GIL share: a pure-Python thread beside the work ----------------------------------------

class Busy:
    """A thread spinning in Python bytecode; `rate()` is its loop rate over a window."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        n = 0
        stop = self._stop.is_set
        while not stop():
            for _ in range(1000):
                n += 1
            self.count = n

    def window(self, fn: Callable[[], object] | None, seconds: float = 0.0) -> float:
        """Loops per second while `fn` runs (or, with None, over `seconds` of idling here)."""
        c0, t0 = self.count, time.perf_counter()
        if fn is None:
            threading.Event().wait(seconds)
        else:
            fn()
        return (self.count - c0) / (time.perf_counter() - t0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def gil_share(busy: Busy, fn: Callable[[], object], repeat: int) -> float:
    """How much the busy thread is slowed while `fn` runs, against the same thread over the
    same duration with nothing else running here (best of `repeat` pairs)."""
    shares = []
    for _ in range(repeat):
        w = time.perf_counter()
        during = busy.window(fn)
        alone = busy.window(None, time.perf_counter() - w)
        shares.append(max(0.0, 1.0 - during / alone) if alone else 0.0)
    return min(shares)


# ---- each stat on its own, as the builder computes it -----------------------------------------

def indexed_columns(schema: pa.Schema) -> list[tuple[int, pa.Field]]:
    return [(i, f) for i, f in enumerate(schema)
            if stat_kind(f) in ("int", "str") and f.name != TIMESTAMP_COLUMN]


def stat_block(blocks: list[pa.RecordBatch]) -> None:
    for b in blocks:
        block_stats(b)


def stat_distinct(blocks: list[pa.RecordBatch]) -> None:
    """Distinct sets only: `unique` per block until the set overflows (no tokens, no filters)."""
    for i, f in indexed_columns(blocks[0].schema):
        col = _IndexedColumn(f.name, False, False)     # is_str False: no token set
        for b in blocks:
            if col.distinct is None:
                break
            col.add(b.column(i))


def stat_tokens(blocks: list[pa.RecordBatch]) -> None:
    """Token sets only (string columns), from the block's distinct values while they repeat,
    from the values themselves once they are mostly distinct."""
    for i, f in indexed_columns(blocks[0].schema):
        if stat_kind(f) != "str":
            continue
        col = _IndexedColumn(f.name, True, False, distinct=None)
        for b in blocks:
            if col.tokens is None:
                break
            col.add(b.column(i))


def membership_columns(blocks: list[pa.RecordBatch]) -> list[tuple[int, pa.Field]]:
    """The columns whose distinct set overflows (the ones that get or are checked for a
    filter), found with the full builder once."""
    builder = ExtentStatsBuilder(blocks[0].schema)
    for b in blocks:
        builder.add_block(b)
    over = {n for n, s in builder.finish().column_stats.items() if s["distinct"] is None}
    return [(i, f) for i, f in indexed_columns(blocks[0].schema) if f.name in over]


def stat_membership(blocks: list[pa.RecordBatch], cols: list[tuple[int, pa.Field]]) -> None:
    """Identifier check, hashes, extent and per-block bloom filters of the overflowing
    columns (hashing the values themselves: what the builder does once a set overflowed)."""
    for i, f in cols:
        col = _IndexedColumn(f.name, stat_kind(f) == "str", True, auto=True, distinct=None,
                             per_block=True)
        col.tokens = None
        col.mostly_distinct = True
        for b in blocks:
            col.add(b.column(i))
        if col.membership_filter(DEFAULT_FP_RATE) is not None:
            col.block_filters(BLOCK_FP_RATE)


def stat_paths(blocks: list[pa.RecordBatch]) -> None:
    for i, f in enumerate(blocks[0].schema):
        if is_dynamic(f):
            dyn = DynamicColumn()
            for b in blocks:
                dyn.add(b.column(i))


def stat_ipc(blocks: list[pa.RecordBatch]) -> None:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, blocks[0].schema,
                         options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        for b in blocks:
            w.write_batch(b)


def stat_all(blocks: list[pa.RecordBatch]) -> None:
    builder = ExtentStatsBuilder(blocks[0].schema)
    for b in blocks:
        builder.add_block(b)
    builder.finish()


def gil_free(data: bytes) -> None:
    """Calibration: one core of C work that releases the GIL (hashlib does for long input)."""
    hashlib.sha256(data).digest()


def python_loop(n: int) -> None:
    """Calibration: the same kind of work as the busy thread, holding the GIL throughout
    except where the interpreter hands it over."""
    x = 0
    for i in range(n):
        x += i


def tlm_write(batch: pa.RecordBatch) -> None:
    w = TlmFormat().start_extent(MemoryStore(), "bench", batch.schema,
                                 block_rows=DEFAULT_BLOCK_ROWS)
    w.append(batch)
    w.finish()


# ---- write of chunk N beside the coercion of chunk N+1 --------------------------------------

def overlap(batch: pa.RecordBatch, nxt: bytes, schema: Schema, repeat: int
            ) -> dict[str, tuple[float, float]]:
    """Wall seconds (best of `repeat`) of coercing `nxt` alone, writing `batch` alone, and both
    at once on two threads (the coercion's own wall time, and the pair's)."""
    coerce_alone = best(lambda: coerce(nxt, schema), repeat)
    write_alone = best(lambda: tlm_write(batch), repeat)
    coerce_beside, pair = [], []
    for _ in range(repeat):
        go = threading.Barrier(2)

        def writer() -> None:
            go.wait()
            tlm_write(batch)

        t = threading.Thread(target=writer)
        t.start()
        go.wait()
        w0, c0 = time.perf_counter(), time.process_time()
        coerce(nxt, schema)
        coerce_beside.append((time.perf_counter() - w0, time.process_time() - c0))
        t.join()
        pair.append((time.perf_counter() - w0, time.process_time() - c0))
    return {"coerce alone": coerce_alone, "write alone": write_alone,
            "coerce beside the write": min(coerce_beside), "both, two threads": min(pair)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", type=Path, default=ROOT / "bench" / "out" / "logs_150mb.ndjson")
    p.add_argument("--mb", type=float, default=32)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not args.file.exists():
        sys.exit(f"{args.file} is missing: run bench/bench_ingest.py once to generate it")

    schema = table_schema()
    data = read_chunk(args.file, args.mb)
    nxt = read_chunk(args.file, args.mb, skip=1)
    batch = coerce(data, schema)
    blocks = [batch.slice(o, DEFAULT_BLOCK_ROWS)
              for o in range(0, batch.num_rows, DEFAULT_BLOCK_ROWS)]
    members = membership_columns(blocks)

    print(f"# Extent statistics at ingest — `bench/bench_stats.py --mb {args.mb:g}`\n")
    print(f"{len(data) / 1e6:.1f} MB of `{args.file.name}`, {batch.num_rows:,} rows, "
          f"{len(blocks)} blocks of {DEFAULT_BLOCK_ROWS:,} rows; {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, pyarrow {pa.__version__}; load average at "
          f"start {' / '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}."
          f"\nMembership filters on: {', '.join(f.name for _, f in members)}.\n")

    parse = best(lambda: pj.read_json(pa.BufferReader(data)), args.repeat)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("block min/max/null counts (every typed column)", lambda: stat_block(blocks)),
        (f"distinct sets (`unique` per block to the {DISTINCT_SET_CAP:,} cap)",
         lambda: stat_distinct(blocks)),
        ("token sets (string columns)", lambda: stat_tokens(blocks)),
        ("membership filters (id check, hashes, extent + block blooms)",
         lambda: stat_membership(blocks, members)),
        ("present paths of `dynamic` columns", lambda: stat_paths(blocks)),
        ("all stats together (`ExtentStatsBuilder`)", lambda: stat_all(blocks)),
        ("IPC serialisation + zstd (writer's background thread)", lambda: stat_ipc(blocks)),
        ("whole extent write (`TlmWriter`, stats + IPC), into memory",
         lambda: tlm_write(batch)),
    ]
    rows += [("calibration: sha256 of the chunk x4 (C, GIL released, one core)",
              lambda: gil_free(data * 4)),
             ("calibration: a Python loop (GIL held but for switches)",
              lambda: python_loop(3_000_000))]
    # Times first, with nothing else running here; the busy thread only for the GIL column
    # (beside it every GIL hand-over waits up to a switch interval: times taken then were
    # several times too long, which this bench printed until 2026-11-27).
    timed = [(name, best(fn, args.repeat)) for name, fn in rows]
    busy = Busy()
    try:
        busy.window(None, 0.2)          # let the thread get going
        parse_gil = gil_share(busy, lambda: pj.read_json(pa.BufferReader(data)), args.repeat)
        measured = [(name, t, gil_share(busy, fn, args.repeat))
                    for (name, t), (_, fn) in zip(timed, rows, strict=True)]
    finally:
        busy.stop()

    print("| work | wall s | CPU s | wall vs parse | CPU vs parse | Python thread slowed |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| parse: `pyarrow.json.read_json` | {parse[0]:.3f} | {parse[1]:.3f} | 100% | 100% "
          f"| {100 * parse_gil:.0f}% |")
    for name, (w, c), g in measured:
        print(f"| {name} | {w:.3f} | {c:.3f} | {100 * w / parse[0]:.0f}% | "
              f"{100 * c / parse[1]:.0f}% | {100 * g:.0f}% |")

    print("\nWriting chunk N's extent while chunk N+1 is coerced (two threads, into memory):\n")
    print("| run | wall s | CPU s |")
    print("|---|---:|---:|")
    for name, (w, c) in overlap(batch, nxt, schema, args.repeat).items():
        print(f"| {name} | {w:.3f} | {c:.3f} |")
    print(f"\nload average at the end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
