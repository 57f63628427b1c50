"""`shoal ingest` start-up, the typed-columns case (150 MB of typed columns through the CLI vs
`pyarrow.json.read_json`) and peak memory, in one run.

    .venv/bin/python bench/bench_cli_start.py [--before REV] [--repeat 3] [--typed-mb 150]
                                              [--rss-mb 150 512] [--skip-typed]
                                              [--remote | --remote-only] [--remote-mb 64]

1. Start-up, before (the tree of `--before`, default the branch point `b2f1825`, run from a
   `git archive` of its `src/` with the same interpreter and packages) and after (this
   tree), interleaved back to back, best of `--repeat`: `shoal --help`; `shoal ingest` of a
   one-line file (the whole command); time from exec to the first chunk handed to the write
   path (`tests/support/first_chunk.py`).
2. The typed-columns case: a file of typed columns only (no `dynamic`; the generator of
   bench/bench_ingest.py without `attrs`, cached in bench/out) through `shoal ingest`,
   start-up included, vs `pyarrow.json.read_json` with the same explicit schema in a fresh
   process. Target: >= 0.6x.
3. Peak RSS (`os.wait4` of the command's process) of `shoal ingest` at the default chunk
   size on bench/bench_ingest.py's files, against the documented bound.

4. `--remote` (alone: `--remote-only`): `shoal --url ... sql` of a needle (one trace id) on
   a warm `shoal serve` (`--lazy-spark`: the needle is the embedded engine's either way),
   end to end from exec to exit (target < 0.3 s), beside `shoal sql` of the same needle on
   the same data directory, as a ratio; then `python -X importtime` of each: the top
   imports, and the packages each loaded (the remote one must load no pyspark, duckdb,
   pyarrow or SQLAlchemy).

Every figure is wall seconds and CPU seconds (user + system of the child process, from its
own rusage); the load average is printed with each part, because the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import bench_ingest  # noqa: E402
from bench.logdata import TYPED_COLUMNS as TYPED  # noqa: E402
from bench.logdata import COLUMNS, generate  # noqa: E402
from shoal.cli.ingest import memory_bound_mb  # noqa: E402

OUT = ROOT / "bench" / "out"
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").is_dir() else sys.executable
PROBE = str(ROOT / "tests" / "support" / "first_chunk.py")


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def generate_typed(mb: int) -> Path:
    """bench_ingest's log lines without `attrs` (seven typed columns), its own cached file."""
    return bench_ingest.generate_typed(mb, generate(mb * 4 // 3 + 1))


class Run:
    """One child process: wall seconds from just before exec, its own CPU seconds and peak
    RSS (os.wait4), its output."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0 = time.time()
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
            self.wall = time.time() - t0
            self.started = t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            self.stdout, self.stderr = out.read().decode(), err.read().decode()
        self.cpu = usage.ru_utime + usage.ru_stime
        self.rss_mb = usage.ru_maxrss / 1024
        if proc.returncode != 0:
            raise SystemExit(f"{argv} failed ({proc.returncode}):\n{self.stderr}")


def tree_of(rev: str, work: Path) -> Path:
    """`src/` of `rev`, extracted (no checkout, no worktree) and byte-compiled like this
    tree (scripts/setup.sh): where PYTHONDONTWRITEBYTECODE is set, a tree without bytecode
    compiles every module on every run (~0.1 s more per command), not what is compared."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                          capture_output=True).stdout
    dest = work / f"tree-{rev}"
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    # The C extensions are built by scripts/setup.sh, not kept in git: `rev` gets this
    # tree's builds of the ones whose C source it has unchanged (without them it would run
    # its slow fallbacks, not what it shipped).
    for so in (ROOT / "src").rglob("*.so"):
        source = so.with_name(so.name.split(".")[0] + ".c")
        theirs = dest / source.relative_to(ROOT)
        if theirs.is_file() and theirs.read_bytes() == source.read_bytes():
            shutil.copy2(so, dest / so.relative_to(ROOT))
        elif theirs.is_file():
            print(f"note: {rev} has another {source.name}: it runs without it")
    compile_tree(dest / "src")
    return dest / "src"


def compile_tree(src: Path) -> None:
    """Bytecode for every module of `src/shoal` that lacks it or whose source changed."""
    subprocess.run([PY, "-m", "compileall", "-q", str(src / "shoal")], check=True,
                   capture_output=True)


def create_table(src: Path, data: Path, columns: list[dict[str, str]]) -> None:
    env = {**os.environ, "PYTHONPATH": str(src)}
    Run([PY, "-m", "shoal", "--data-dir", str(data), "create-table", "logs",
         *[a for c in columns for a in ("-c", f"{c['name']}:{c['type']}")]], env=env)


def best(runs: list[Run]) -> str:
    w = min(r.wall for r in runs)
    c = min(r.cpu for r in runs)
    return f"{w:6.3f} s wall  {c:6.3f} s CPU"


def startup(variants: dict[str, Path], work: Path, repeat: int) -> None:
    print(f"\n## start-up (best of {repeat}, before/after interleaved; {load()})")
    one = work / "one.ndjson"
    one.write_text(json.dumps({"service": "a", "level": "info", "message": "m",
                               "trace_id": "t", "status": 200, "duration_ms": 1}) + "\n")
    data = {}
    for name, src in variants.items():
        data[name] = work / f"start-{name}"
        create_table(src, data[name], TYPED)
    results: dict[tuple[str, str], list[Run]] = {}
    first: dict[str, list[float]] = {n: [] for n in variants}
    first_cpu: dict[str, list[float]] = {n: [] for n in variants}
    for _ in range(repeat):
        for name, src in variants.items():
            env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100"}
            results.setdefault(("help", name), []).append(
                Run([PY, "-m", "shoal", "--help"], env=env))
            results.setdefault(("ingest", name), []).append(
                Run([PY, "-m", "shoal", "--data-dir", str(data[name]), "ingest", str(one),
                     "--table", "logs"], env=env))
            report = work / f"first-{name}.json"
            r = Run([PY, PROBE, str(report), "--data-dir", str(data[name]), "ingest", str(one),
                     "--table", "logs"], env=env)
            got = json.loads(report.read_text())
            first[name].append(got["first_chunk_at"] - r.started)
            first_cpu[name].append(got["first_chunk_cpu"])
    for what, label in (("help", "shoal --help"), ("ingest", "shoal ingest (1 line)")):
        for name in variants:
            print(f"{label:24} {name:6} {best(results[(what, name)])}")
    for name in variants:
        print(f"{'time to first chunk':24} {name:6} {min(first[name]):6.3f} s wall  "
              f"{min(first_cpu[name]):6.3f} s CPU")
    print(f"({load()})")


def typed_case(mb: int, work: Path, repeat: int) -> None:
    path = generate_typed(mb)
    size = path.stat().st_size
    print(f"\n## the typed-columns case: {size / 1e6:.0f} MB of typed columns, fresh processes, "
          f"best of {repeat} ({load()})")
    code = bench_ingest.typed_read_script(path) + "print(table.num_rows)\n"
    parse: list[Run] = []
    cli: list[Run] = []
    for i in range(repeat):
        parse.append(Run([PY, "-c", code]))
        data = work / f"typed-{i}"
        create_table(ROOT / "src", data, TYPED)
        cli.append(Run([PY, "-m", "shoal", "--data-dir", str(data), "ingest", str(path),
                        "--table", "logs"]))
    rows = int(parse[0].stdout)
    assert cli[0].stdout.startswith(f"ingested {rows} rows"), cli[0].stdout
    pw, cw = min(r.wall for r in parse), min(r.wall for r in cli)
    pc, cc = min(r.cpu for r in parse), min(r.cpu for r in cli)
    print(f"read_json (explicit schema, fresh process) {best(parse)}  {size / pw / 1e6:6.1f} MB/s")
    print(f"shoal ingest (CLI, start-up included)      {best(cli)}  {size / cw / 1e6:6.1f} MB/s")
    print(f"ratio shoal/read_json: {pw / cw:.2f}x wall, {pc / cc:.2f}x CPU (target >= 0.6x "
          f"wall); peak RSS {max(r.rss_mb for r in cli):.0f} MB ({load()})")


def peak_rss(mbs: list[int], work: Path) -> None:
    bound = memory_bound_mb(32)
    print(f"\n## peak RSS, default --chunk-mb 32 (documented bound {bound} MB; {load()})")
    for mb in mbs:
        path = generate(mb)
        data = work / f"rss-{mb}"
        create_table(ROOT / "src", data, COLUMNS)
        r = Run([PY, "-m", "shoal", "--data-dir", str(data), "ingest", str(path), "--table",
                 "logs"])
        print(f"{path.stat().st_size / 1e6:6.0f} MB file: peak RSS {r.rss_mb:6.0f} MB, "
              f"{r.wall:6.1f} s wall {r.cpu:6.1f} s CPU  ({load()})")


def remote_needle(mb: int, work: Path, repeat: int) -> None:
    """`shoal --url U sql <needle>` against a warm server beside `shoal sql <needle>` on the
    data directory (see the module docstring, part 4)."""
    from tests.support.server import start_server

    path = generate(mb)
    with open(path, "rb") as f:
        for _ in range(1234):
            line = f.readline()
    needle = json.loads(line)["trace_id"]
    data = work / "remote"
    create_table(ROOT / "src", data, COLUMNS)
    Run([PY, "-m", "shoal", "--data-dir", str(data), "ingest", str(path), "--table", "logs"])
    sql = f"SELECT service, message, status FROM logs WHERE trace_id = '{needle}'"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    print(f"\n## remote vs embedded `shoal sql` of a needle ({path.stat().st_size / 1e6:.0f} "
          f"MB of logs, best of {repeat}, interleaved; {load()})")
    with start_server(data, extra_args=["--lazy-spark"]) as server:
        remote = [PY, "-m", "shoal", "--url", server.url, "sql", sql, "-f", "csv"]
        local = [PY, "-m", "shoal", "--data-dir", str(data), "sql", sql, "-f", "csv"]
        Run(remote, env=env)    # the server's first query: its engine's own start-up
        runs: dict[str, list[Run]] = {"remote": [], "embedded": [], "remote, table": []}
        for _ in range(repeat):
            runs["remote"].append(Run(remote, env=env))
            runs["embedded"].append(Run(local, env=env))
            runs["remote, table"].append(Run(remote[:-2], env=env))   # rich's table
        assert runs["remote"][0].stdout == runs["embedded"][0].stdout, \
            (runs["remote"][0].stdout, runs["embedded"][0].stdout)
        for name, rs in runs.items():
            print(f"shoal sql -f {'table' if 'table' in name else 'csv  '} "
                  f"({name.split(',')[0]:8}) {best(rs)}")
        rw = min(r.wall for r in runs["remote"])
        ew = min(r.wall for r in runs["embedded"])
        print(f"remote / embedded: {rw / ew:.2f}x wall ({ew / rw:.1f}x faster); remote "
              f"{'within' if rw < 0.3 else 'OVER'} the 0.3 s target ({load()})")
        for name, argv in (("remote", remote), ("embedded", local)):
            _importtime(name, [PY, "-X", "importtime", *argv[1:]], env)


def _importtime(name: str, argv: list[str], env: dict[str, str]) -> None:
    """The top-level imports of one command by cumulative time, and the heavy packages."""
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    tops: dict[str, int] = {}
    for row in out.stderr.splitlines():
        if not row.startswith("import time:") or "|" not in row:
            continue
        _, cumulative, module = row.split("|")
        if not module[1:].startswith(" ") and cumulative.strip().isdigit():
            tops[module.strip()] = int(cumulative)
    every = {r.split("|")[2].strip().split(".")[0] for r in out.stderr.splitlines()
             if r.startswith("import time:") and r.count("|") == 2}
    heavy = sorted(every & {"pyspark", "py4j", "duckdb", "pyarrow", "sqlalchemy", "httpx",
                            "rich", "numpy", "fastapi"})
    top = sorted(tops.items(), key=lambda kv: -kv[1])[:6]
    print(f"importtime {name:8}: {sum(tops.values()) / 1e6:.3f} s in all; top: "
          + ", ".join(f"{m} {us / 1e3:.0f} ms" for m, us in top)
          + f"; heavy packages: {', '.join(heavy) or 'none'}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="b2f1825")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--typed-mb", type=int, default=150)
    ap.add_argument("--rss-mb", type=int, nargs="*", default=[150, 512])
    ap.add_argument("--skip-typed", action="store_true")
    ap.add_argument("--remote", action="store_true", help="also part 4 (remote vs embedded)")
    ap.add_argument("--remote-only", action="store_true", help="only part 4")
    ap.add_argument("--remote-mb", type=int, default=64)
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)   # progress shows when redirected to a file
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {load()}")
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        compile_tree(ROOT / "src")
        if args.remote_only:
            remote_needle(args.remote_mb, work, args.repeat)
            return 0
        variants = {"before": tree_of(args.before, work), "after": ROOT / "src"}
        startup(variants, work, args.repeat)
        if not args.skip_typed:
            typed_case(args.typed_mb, work, args.repeat)
        if args.rss_mb:
            peak_rss(args.rss_mb, work)
        if args.remote:
            remote_needle(args.remote_mb, work, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
