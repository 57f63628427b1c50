"""File-drop benchmark: `shoal pipeline filedrop --once` beside `shoal ingest`, same bytes, one run.

    .venv/bin/python bench/bench_filedrop.py [--mb 200] [--files 50] [--gzip-every 0]

The generated log NDJSON of `bench_ingest.py` (`generate`, cached under bench/out/) is cut at
line boundaries into `--files` files in a fresh drop directory (every `--gzip-every`-th file
gzipped, 0 = none). Then, each in a fresh embedded data directory (SQLite + local store) with
the same table (`bench_ingest.COLUMNS`):

1. `shoal ingest FILE --table logs` of the whole file (the CLI, a subprocess);
2. `shoal pipeline filedrop --path DROP --table logs --once` (a subprocess, Spark local[*]).

Reported: MB/s of each over the wall time of its command, and for file-drop also the scan's
own MB/s (its summary line: listing, Spark tasks and commits, without JVM/Spark start-up),
with the ratios file-drop / ingest (target >= 0.7x). Row counts are checked equal.
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import COLUMNS, ROOT, generate  # noqa: E402 - the one log generator


def split(path: Path, drop: Path, files: int, gzip_every: int) -> int:
    """Cut `path` into `files` NDJSON files under `drop`; the bytes written (as stored)."""
    data = path.read_bytes()
    drop.mkdir(parents=True)
    step = len(data) // files
    start = 0
    stored = 0
    for i in range(files):
        end = len(data) if i == files - 1 else data.index(b"\n", start + step) + 1
        part = data[start:end]
        if gzip_every and i % gzip_every == 0:
            out = gzip.compress(part, compresslevel=1)
            (drop / f"part-{i:03d}.ndjson.gz").write_bytes(out)
        else:
            out = part
            (drop / f"part-{i:03d}.ndjson").write_bytes(out)
        stored += len(out)
        start = end
    return stored


def shoal(*args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "shoal"), *args], capture_output=True,
                         text=True)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"shoal {' '.join(args)} failed:\n{out.stderr}")
    return dt, out.stdout.strip().splitlines()[-1]


def create_table(data: Path) -> None:
    shoal("--data-dir", str(data), "create-table", "logs",
          *[a for c in COLUMNS for a in ("-c", f"{c['name']}:{c['type']}")])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--gzip-every", type=int, default=0)
    args = ap.parse_args()

    path = generate(args.mb)
    mb = path.stat().st_size / 1e6
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-filedrop-"))
    try:
        stored = split(path, work / "drop", args.files, args.gzip_every)
        create_table(work / "ingest-data")
        t_ingest, ingest_line = shoal("--data-dir", str(work / "ingest-data"), "ingest",
                                      str(path), "--table", "logs")
        create_table(work / "filedrop-data")
        t_drop, drop_line = shoal("--data-dir", str(work / "filedrop-data"), "pipeline",
                                  "filedrop", "--path", str(work / "drop"), "--table", "logs",
                                  "--once")
        rows_ingest = int(re.search(r"ingested (\d+) rows", ingest_line).group(1))
        rows_drop = int(re.search(r"new file\(s\), (\d+) rows", drop_line).group(1))
        scan_s = float(re.search(r" in ([\d.]+) s ", drop_line).group(1))
        if rows_ingest != rows_drop:
            raise SystemExit(f"row counts differ: ingest {rows_ingest}, filedrop {rows_drop}")
        ingest_mbs = mb / t_ingest
        drop_mbs = mb / t_drop
        scan_mbs = mb / scan_s
        print(f"input: {mb:.0f} MB NDJSON ({rows_ingest:,} rows) in {args.files} files "
              f"({stored / 1e6:.0f} MB stored, gzip every {args.gzip_every or 'none'})")
        print(f"shoal ingest (CLI, wall)        : {t_ingest:7.1f} s  {ingest_mbs:7.1f} MB/s")
        print(f"shoal pipeline filedrop (wall)  : {t_drop:7.1f} s  {drop_mbs:7.1f} MB/s  "
              f"ratio {drop_mbs / ingest_mbs:.2f}x")
        print(f"filedrop scan (no JVM start-up) : {scan_s:7.1f} s  {scan_mbs:7.1f} MB/s  "
              f"ratio {scan_mbs / ingest_mbs:.2f}x")
        print(f"ingest: {ingest_line}")
        print(f"filedrop: {drop_line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
