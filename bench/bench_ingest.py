"""Ingest benchmark: `shoal ingest` and REST vs the parse limit and delta-rs, in one run.

    .venv/bin/python bench/bench_ingest.py [--mb 1024] [--rest-mb 256] [--clients 8]
                                           [--typed-mb 150] [--repeat 3]

On a generated realistic log NDJSON file (RFC 3339 timestamp, service, level, message text,
trace id, status, duration, nested attributes into a `dynamic` column):

1. parse limit: `pyarrow.json.read_json` of the file (MB/s);
2. `shoal ingest FILE --table logs` (the CLI, a subprocess, embedded SQLite + local store);
3. delta-rs: `pyarrow.json.read_json` + `deltalake.write_deltalake` of the same file;
4. REST: `shoal serve` + `--clients` concurrent clients posting 1 MB NDJSON bodies
   (MB/s and p50/p99 request latency; bench_rest_ingest.py's round: http.client clients,
   which take far less of the two shared cores than httpx);
5. typed columns only (`--typed-mb`, seven typed columns, no `dynamic`): `shoal ingest` of
   the whole file, start-up included (a fresh process, wall clock from exec to exit), vs
   `pyarrow.json.read_json` of the same file with the same explicit schema, timed twice:
   inside this process (pyarrow imported, its allocator warm from the other paths) and in a
   fresh interpreter from exec to exit (start-up included, like the command).

`--repeat` rounds run every path in turn (a load spike from elsewhere hits them alike); each
figure is its best round, and every round is printed.

`--sort-by KEY` adds, to every round, `shoal ingest` of the same file into a table whose
sort key is KEY (`sort_by`, docs/storage.md): each group commit sorts its rows before
writing them; the table reports both and their ratio. `--only-cli` runs just the parse limit
and the two `shoal ingest` paths (a short run for that comparison).

Targets: shoal ingest >= 0.8x the parse limit and >= 0.8x delta-rs; REST >= 0.5x
the parse limit; the typed file through the CLI, start-up included, >= 0.6x. The generated
files are cached under bench/out/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.logdata import (COLUMNS, TYPED_COLUMNS, generate,  # noqa: E402
                           generate_typed)


ARROW_TYPES = {"string": "pa.string()", "int": "pa.int32()", "long": "pa.int64()"}


def typed_read_script(path: Path) -> str:
    """The typed case's reference, as Python source: `pyarrow.json.read_json` of `path` with
    the table's explicit schema (`_timestamp` as a string, the stricter reference: Arrow
    parses it as fast either way). Run here (`exec`, pyarrow already imported) and in a fresh
    interpreter (start-up included, like the command); bench_cli_start.py runs the same."""
    fields = ", ".join(["('_timestamp', pa.string())"]
                       + [f"({c['name']!r}, {ARROW_TYPES[c['type']]})" for c in TYPED_COLUMNS])
    return ("import pyarrow as pa, pyarrow.json as pj\n"
            f"schema = pa.schema([{fields}])\n"
            f"table = pj.read_json({str(path)!r}, "
            "parse_options=pj.ParseOptions(explicit_schema=schema))\n")


def typed_case(mb: int, source: Path, work: Path) -> tuple[float, float, float, float]:
    """(file MB, seconds of read_json with the explicit schema in this process, the same in a
    fresh interpreter from exec to exit, `shoal ingest` from exec to exit)."""
    path = generate_typed(mb, source)
    code = typed_read_script(path)
    t_read = timed(lambda: exec(compile(code, "<typed read_json>", "exec"), {}))
    t_fresh = timed(lambda: subprocess.run([sys.executable, "-c", code], check=True))
    data = work / "typed-data"
    shoal_cli("--data-dir", str(data), "create-table", "logs",
              *[a for c in TYPED_COLUMNS for a in ("-c", f"{c['name']}:{c['type']}")])
    t_cli = timed(lambda: shoal_cli("--data-dir", str(data), "ingest", str(path),
                                    "--table", "logs"))
    return path.stat().st_size / 1e6, t_read, t_fresh, t_cli


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def parse_limit(path: Path) -> float:
    import pyarrow.json as pj

    return timed(lambda: pj.read_json(str(path)))


def delta_rs(path: Path, work: Path) -> float:
    import pyarrow.json as pj
    from deltalake import write_deltalake

    target = work / "delta"

    def run() -> None:
        table = pj.read_json(str(path))
        write_deltalake(str(target), table, mode="overwrite")

    return timed(run)


def shoal_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / ".venv" / "bin" / "shoal"), *args], capture_output=True,
                          text=True, check=True)


def shoal_ingest(path: Path, work: Path, sort_by: str | None = None) -> tuple[float, str]:
    data = work / ("cli-data" if sort_by is None else "cli-data-sorted")
    shoal_cli("--data-dir", str(data), "create-table", "logs",
              *[a for c in COLUMNS for a in ("-c", f"{c['name']}:{c['type']}")])
    if sort_by is not None:
        shoal_cli("--data-dir", str(data), "sql",
                  f"ALTER TABLE logs SET TBLPROPERTIES ('sort_by' = '{sort_by}')")
    t0 = time.perf_counter()
    out = shoal_cli("--data-dir", str(data), "ingest", str(path), "--table", "logs")
    return time.perf_counter() - t0, out.stdout.strip().splitlines()[-1]


def rest(path: Path, work: Path, mb: int, clients: int) -> tuple[float, float, float, int]:
    """(MB/s, p50 ms, p99 ms, requests) of `shoal serve` fed 1 MB bodies by `clients`
    keep-alive connections: bench_rest_ingest.py's round (http.client clients, whose CPU per
    body is a fraction of httpx's: they share the two cores with the server)."""
    from bench.bench_rest_ingest import cut_bodies, one_round

    bodies = cut_bodies(path, mb, 1 << 20)
    r = one_round(bodies, 0, clients, work)
    total = sum(len(b) for b in bodies)
    return total / r.wall_s / 1e6, r.p50_ms, r.p99_ms, r.requests


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--rest-mb", type=int, default=256)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--typed-mb", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sort-by", default=None, help="also ingest into a table with this "
                    "sort key, e.g. 'service, _timestamp'")
    ap.add_argument("--only-cli", action="store_true", help="parse limit and shoal ingest only")
    args = ap.parse_args()
    # The commands run from src/: its bytecode current, else with PYTHONDONTWRITEBYTECODE set
    # each run compiles what changed since setup (scripts/setup.sh) again.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "shoal")],
                   check=True, capture_output=True)
    path = generate(args.mb)
    size_mb = path.stat().st_size / 1e6
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-ingest-"))
    rounds: list[dict[str, float]] = []
    summary = ""
    try:
        # Rounds interleave every path, so a load spike from elsewhere hits them alike; each
        # figure below is its best round, each round is printed as it ends.
        for rep in range(args.repeat):
            r: dict[str, float] = {"parse": parse_limit(path)}
            r["shoal"], summary = shoal_ingest(path, work / f"r{rep}")
            if args.sort_by is not None:
                r["sorted"], sorted_summary = shoal_ingest(path, work / f"r{rep}", args.sort_by)
            if args.only_cli:
                rounds.append(r)
                print(f"round {rep + 1}: parse {size_mb / r['parse']:.1f}, shoal "
                      f"{size_mb / r['shoal']:.1f}" + (
                          f", shoal sorted {size_mb / r['sorted']:.1f}" if "sorted" in r
                          else "") + f" MB/s; load {os.getloadavg()[0]:.2f}", flush=True)
                continue
            r["delta"] = delta_rs(path, work)
            r["rest"], r["p50"], r["p99"], n = rest(path, work, args.rest_mb, args.clients)
            typed_mb, r["typed_read"], r["typed_fresh"], r["typed_cli"] = typed_case(
                args.typed_mb, path, work / f"r{rep}")
            rounds.append(r)
            print(f"round {rep + 1}: parse {size_mb / r['parse']:.1f}, shoal "
                  f"{size_mb / r['shoal']:.1f}, delta-rs {size_mb / r['delta']:.1f}, REST "
                  f"{r['rest']:.1f}, typed read {typed_mb / r['typed_read']:.1f} (fresh process "
                  f"{typed_mb / r['typed_fresh']:.1f}), typed CLI "
                  f"{typed_mb / r['typed_cli']:.1f} MB/s; load {os.getloadavg()[0]:.2f}",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.only_cli:
        t_parse, t_shoal = (min(r[k] for r in rounds) for k in ("parse", "shoal"))
        print(f"\n## shoal ingest of {size_mb:,.0f} MB of log NDJSON ({sys.platform}, 2 cores), "
              f"best of {args.repeat}")
        print("| path | MB/s | vs parse limit |\n|---|---|---|")
        print(f"| pyarrow.json.read_json (parse limit) | {size_mb / t_parse:,.1f} | 1.00x |")
        print(f"| shoal ingest (CLI) | {size_mb / t_shoal:,.1f} | {t_parse / t_shoal:.2f}x |")
        if args.sort_by is not None:
            t_sorted = min(r["sorted"] for r in rounds)
            print(f"| shoal ingest (CLI), sort_by = '{args.sort_by}' | {size_mb / t_sorted:,.1f} "
                  f"| {t_parse / t_sorted:.2f}x |")
            print(f"\nsorted / unsorted ingest time: {t_sorted / t_shoal:.2f}x\n"
                  f"shoal ingest said (sorted): {sorted_summary}")
        print(f"shoal ingest said: {summary}")
        return 0
    t_parse, t_shoal, t_delta, t_typed_read, t_typed_fresh, t_typed_cli = (
        min(r[k] for r in rounds)
        for k in ("parse", "shoal", "delta", "typed_read", "typed_fresh", "typed_cli"))
    best_rest = max(rounds, key=lambda r: r["rest"])
    rest_mbs, p50, p99 = best_rest["rest"], best_rest["p50"], best_rest["p99"]
    parse_mbs = size_mb / t_parse
    print(f"\n## ingest of {size_mb:,.0f} MB of log NDJSON ({sys.platform}, 2 cores), "
          f"best of {args.repeat}")
    print("| path | MB/s | vs parse limit |\n|---|---|---|")
    print(f"| pyarrow.json.read_json (parse limit) | {parse_mbs:,.1f} | 1.00x |")
    print(f"| shoal ingest (CLI) | {size_mb / t_shoal:,.1f} | {t_parse / t_shoal:.2f}x |")
    print(f"| delta-rs read_json + write_deltalake | {size_mb / t_delta:,.1f} | "
          f"{t_parse / t_delta:.2f}x |")
    print(f"| REST, {args.clients} clients x 1 MB bodies ({n} requests) | {rest_mbs:,.1f} | "
          f"{rest_mbs / parse_mbs:.2f}x |")
    print(f"| typed only ({typed_mb:,.0f} MB): read_json, explicit schema, in this process | "
          f"{typed_mb / t_typed_read:,.1f} | (reference) |")
    print(f"| typed only: the same read_json in a fresh interpreter, start-up included | "
          f"{typed_mb / t_typed_fresh:,.1f} | (reference) |")
    print(f"| typed only: `shoal ingest`, start-up included | {typed_mb / t_typed_cli:,.1f} | "
          f"{t_typed_read / t_typed_cli:.2f}x of read_json in this process, "
          f"{t_typed_fresh / t_typed_cli:.2f}x of read_json in a fresh interpreter |")
    if args.sort_by is not None:
        t_sorted = min(r["sorted"] for r in rounds)
        print(f"| shoal ingest (CLI), sort_by = '{args.sort_by}' | {size_mb / t_sorted:,.1f} | "
              f"{t_parse / t_sorted:.2f}x |")
    print(f"\nshoal ingest vs delta-rs: {t_delta / t_shoal:.2f}x; REST latency p50 {p50:.0f} ms, "
          f"p99 {p99:.0f} ms\nshoal ingest said: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
