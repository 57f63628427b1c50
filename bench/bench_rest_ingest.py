"""REST ingest on every core: `shoal serve` + concurrent clients posting 1 MB NDJSON bodies.

    .venv/bin/python bench/bench_rest_ingest.py [--bodies 128] [--clients 8]
        [--workers 0,1,2] [--repeat 3] [--body-kb 1024] [--servers 1]

Bodies are cut at line boundaries from bench/out/logs_512mb.ndjson (`bench_ingest.py`
generates it; same table: seven typed columns + `attrs` as `dynamic`). For each
`--coerce-workers` value in `--workers` (back to back, `--repeat` rounds, configurations
interleaved so that a load spike from elsewhere hits them alike), a fresh real `shoal serve
--lazy-spark --coerce-workers N` on a new data directory; `--clients` threads post the
bodies (keep-alive connections) until all are acked. Reported per configuration, best
round by wall time: MB/s, p50/p99 request latency, CPU seconds of the server and of its
worker processes (from /proc, so the clients' own CPU is not counted), extents produced (distinct
`extent_ids` in the acks), and the ratio to the parse limit: `pyarrow.json.read_json` of
the same bytes (all bodies concatenated, schema inferred, both cores), measured in the same
run. `uptime` load is printed before each round: the machine may be shared. `--servers N`
runs N `shoal serve` processes on the one data directory and spreads the clients over them
(several write paths whose group commits meet in the catalog's compare-and-swap).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.logdata import COLUMNS, generate  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cut_bodies(path: Path, count: int, size: int) -> list[bytes]:
    bodies: list[bytes] = []
    with open(path, "rb") as f:
        while len(bodies) < count:
            block = f.read(size)
            if not block:
                break
            cut = block.rfind(b"\n") + 1
            f.seek(cut - len(block), 1)
            bodies.append(block[:cut])
    return bodies


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (its reaped children not included), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except FileNotFoundError:
            pass
    return out


def tree_cpu_s(pid: int) -> tuple[float, float]:
    """(CPU s of the server process, CPU s of its worker processes)."""
    return proc_cpu_s(pid), sum(proc_cpu_s(c) for c in children(pid))


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def parse_limit(bodies: list[bytes]) -> tuple[float, float]:
    """Best of 3 of `read_json` over all bodies concatenated: (wall s, CPU s)."""
    import pyarrow as pa
    import pyarrow.json as pj

    data = b"".join(bodies)
    best = (float("inf"), 0.0)
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        pj.read_json(pa.BufferReader(data))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best[0]:
            best = (wall, cpu)
    return best


@dataclass
class Round:
    workers: int
    wall_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    worker_cpu_s: float
    extents: int
    requests: int
    load: str


def one_round(bodies: list[bytes], workers: int, clients: int, work: Path,
              servers: int = 1) -> Round:
    """`servers` > 1: that many `shoal serve` processes on one data directory (one SQLite
    catalog, one store: their group commits meet in the catalog's compare-and-swap), the
    clients spread over them in turn."""
    import http.client

    import httpx

    from tests.support.server import start_server

    ddir = Path(tempfile.mkdtemp(prefix=f"rest-w{workers}-", dir=work))
    started = []
    try:
        for _ in range(servers):
            started.append(start_server(ddir, extra_args=[
                "--lazy-spark", "--coerce-workers", str(workers), "--log-level", "warning"]))
    except BaseException:
        for s in started:
            s.stop()
        raise
    server = started[0]
    latencies: list[float] = []
    extents: set[str] = set()
    failures: list[str] = []
    lock = threading.Lock()
    try:
        with httpx.Client(base_url=server.url, timeout=300) as admin:
            r = admin.post("/v1/tables", json={"name": "logs", "columns": COLUMNS})
            assert r.status_code == 201, r.text
        queue = list(range(len(bodies)))
        start = threading.Barrier(clients + 1)

        def client(k: int) -> None:
            # http.client, not httpx: the clients share the two cores with the server, and
            # httpx spends several times more CPU per 1 MB body.
            host, port = started[k % servers].url.removeprefix("http://").rsplit(":", 1)
            conn = http.client.HTTPConnection(host, int(port), timeout=300)
            conn.connect()              # the connection is open before the clock starts
            start.wait()
            try:
                while True:
                    with lock:
                        if not queue:
                            return
                        i = queue.pop()
                    t = time.perf_counter()
                    conn.request("POST", "/v1/ingest/logs", body=bodies[i],
                                 headers={"Content-Type": "application/x-ndjson"})
                    resp = conn.getresponse()
                    text = resp.read()
                    dt = time.perf_counter() - t
                    with lock:
                        if resp.status != 200:
                            failures.append(f"{resp.status} {text[:200]!r}")
                            continue
                        latencies.append(dt)
                        extents.update(json.loads(text)["extent_ids"])
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        before = load()
        cpu0 = [tree_cpu_s(s.proc.pid) for s in started]
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu1 = [tree_cpu_s(s.proc.pid) for s in started]
        cpu = (sum(b[0] - a[0] for a, b in zip(cpu0, cpu1, strict=True)),
               sum(b[1] - a[1] for a, b in zip(cpu0, cpu1, strict=True)))
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(ddir, ignore_errors=True)
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    latencies.sort()
    return Round(workers, wall, statistics.median(latencies) * 1000,
                 latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, cpu[0], cpu[1],
                 len(extents), len(latencies), before)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bodies", type=int, default=128)
    ap.add_argument("--body-kb", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--workers", default="0,2", help="comma-separated --coerce-workers values")
    ap.add_argument("--servers", type=int, default=1,
                    help="`shoal serve` processes on one data directory, clients spread over "
                         "them")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    configs = [int(x) for x in args.workers.split(",")]
    bodies = cut_bodies(generate(512), args.bodies, args.body_kb << 10)
    total_mb = sum(map(len, bodies)) / 1e6
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-rest-"))
    rounds: list[Round] = []
    try:
        parse_wall, parse_cpu = parse_limit(bodies)
        print(f"parse limit: {total_mb / parse_wall:,.1f} MB/s (wall {parse_wall:.2f} s, "
              f"CPU {parse_cpu:.2f} s); load {load()}", flush=True)
        for rep in range(args.repeat):
            for w in configs:
                r = one_round(bodies, w, args.clients, work, servers=args.servers)
                rounds.append(r)
                print(f"round {rep + 1} workers={w}: {total_mb / r.wall_s:,.1f} MB/s, "
                      f"p50 {r.p50_ms:.0f} ms, p99 {r.p99_ms:.0f} ms, server CPU "
                      f"{r.server_cpu_s:.1f} s + workers {r.worker_cpu_s:.1f} s, "
                      f"{r.extents} extents, load {r.load}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    parse_mbs = total_mb / parse_wall
    self_cpu = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\n## REST ingest, {args.clients} clients x {len(bodies)} bodies of "
          f"{args.body_kb} KB ({total_mb:,.0f} MB), {args.servers} server process(es), "
          f"best of {args.repeat}")
    print("| --coerce-workers | MB/s (each round) | vs parse limit | p50 ms | p99 ms | "
          "CPU s: server + workers | extents |\n|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| parse limit (`read_json`) | {parse_mbs:,.1f} | 1.00x | | | "
          f"{parse_cpu:.1f} | |")
    for w in configs:
        mine = [r for r in rounds if r.workers == w]
        best = min(mine, key=lambda r: r.wall_s)
        walls = ", ".join(f"{total_mb / r.wall_s:.0f}" for r in mine)
        print(f"| {w} | {total_mb / best.wall_s:,.1f} ({walls}) | "
              f"{total_mb / best.wall_s / parse_mbs:.2f}x | {best.p50_ms:.0f} | "
              f"{best.p99_ms:.0f} | {best.server_cpu_s:.1f} + {best.worker_cpu_s:.1f} | "
              f"{best.extents} |")
    print(f"\nbench process (clients) CPU: {self_cpu.ru_utime + self_cpu.ru_stime:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
