"""Benchmark: the cost of refusing a large body of bad lines (issue #12, bounded cost), and
of a capped answer of the embedded engine.

    .venv/bin/python bench/bench_limits.py [--mb 60] [--kinds type,json,text,mixed] [--no-server]
    .venv/bin/python bench/bench_limits.py --capped-answer [--rows 1000000] [--max-rows 10000]
        [--src /path/to/other/tree/src]

`--capped-answer`: a real `shoal serve --lazy-spark` (with `--src`, the server runs that
source tree instead, e.g. an older checkout for a before/after figure) holds a table of
`--rows` rows (a long and a 40-character string); `SELECT * FROM t` on the embedded engine
with `SHOAL_QUERY_MAX_ROWS=--max-rows` and the default byte cap, as JSON and as Arrow:
wall time of the answer and the server's peak memory growth (best and worst of 3 runs).

For each kind of bad line it builds a body of about `--mb` MB where every line is bad
(1,000,000 lines of 60 bytes at 60 MB) and measures:

- in process: `coerce_ndjson` (the write path's coercion, 100 errors kept) wall time and the
  growth of the process's peak RSS (VmHWM after a reset);
- over HTTP: a real `shoal serve --lazy-spark` in a subprocess, `POST /v1/ingest/t` of the
  body: wall time of the 400 answer and the server process tree's peak memory growth
  (VmHWM after a reset minus VmRSS before; `tests/support/procmem.py`).

Kinds: `type` (a string in an `int` column), `json` (truncated objects), `text` (not JSON),
`notnull` (a NOT NULL column missing), `deep` (a value nested 1,000 deep), `bigint` (a
5,000-digit integer: 100 lines per MB), `mixed` (type/json/notnull in turn). Output is
Markdown for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shoal.ingest.coerce import coerce_ndjson  # noqa: E402
from shoal.types import INT, LONG, STRING, Column, Schema  # noqa: E402
from tests.support.procmem import PeakMeter  # noqa: E402

LINE_BYTES = 60
COLUMNS = [{"name": "service", "type": "string"}, {"name": "status", "type": "int"},
           {"name": "seq", "type": "long", "nullable": False}]


def _line(kind: str, i: int) -> bytes:
    """One bad line of exactly LINE_BYTES bytes with its newline (bigint/deep: longer)."""
    if kind == "mixed":
        kind = ("type", "json", "notnull")[i % 3]
    if kind == "bigint":
        return b'{"seq":%d,"status":' % i + b"9" * 5000 + b"}\n"
    if kind == "deep":
        return b'{"seq":%d,"service":' % i + b"[" * 1000 + b"]" * 1000 + b"}\n"
    if kind == "text":
        return _padded(b"not json at all, line %d, " % i, b"", b"\n")
    template = {"type": (b'{"service":"', b'","status":"not-a-number","seq":%d}\n' % i),
                "json": (b'{"service":"', b'","status":200,"seq":%d\n' % i),
                "notnull": (b'{"service":"', b'","status":200,"other":%d}\n' % i)}[kind]
    return _padded(template[0], template[1], b"")


def _padded(head: bytes, tail: bytes, end: bytes) -> bytes:
    return head + b"x" * max(0, LINE_BYTES - len(head) - len(tail) - len(end)) + tail + end


def body_of(kind: str, mb: float) -> tuple[bytes, int]:
    target = int(mb * 1_000_000)
    size = len(_line(kind, 0))
    n = max(1, target // size)
    return b"".join(_line(kind, i) for i in range(n)), n


def schema() -> Schema:
    return Schema.create([Column("service", STRING), Column("status", INT),
                          Column("seq", LONG, nullable=False)])


def _hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def in_process(body: bytes) -> tuple[float, float, int]:
    """(seconds, peak growth MB, rejected lines) of coerce_ndjson on `body`."""
    meter = PeakMeter(os.getpid()).start()
    t0 = time.perf_counter()
    c = coerce_ndjson(body, schema(), unknown="props", ingest_time_ns=time.time_ns(),
                      max_errors=100)
    dt = time.perf_counter() - t0
    return dt, meter.growth_bytes() / 1e6, c.rejected_count


def over_http(bodies: dict[str, bytes]) -> dict[str, tuple[float, float, int, str]]:
    import httpx

    from tests.support.server import start_server

    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as work:
        server = start_server(Path(work) / "data", extra_args=["--lazy-spark"])
        try:
            with httpx.Client(base_url=server.url, timeout=600) as http:
                r = http.post("/v1/tables", json={"name": "t", "columns": COLUMNS})
                r.raise_for_status()
                for kind, body in bodies.items():
                    meter = PeakMeter(server.proc.pid).start()
                    t0 = time.perf_counter()
                    r = http.post("/v1/ingest/t", content=body)
                    dt = time.perf_counter() - t0
                    msg = r.json()["error"]["message"] if r.status_code >= 400 else r.text
                    out[kind] = (dt, meter.growth_bytes() / 1e6, r.status_code, msg)
        finally:
            server.stop()
    return out


def capped_answer(rows: int, max_rows: int, src: str | None) -> None:
    """The embedded engine's capped answer over HTTP: time and server peak growth."""
    import json

    import httpx

    from tests.support.server import start_server

    env = {"SHOAL_QUERY_MAX_ROWS": str(max_rows)}
    if src is not None:
        env["PYTHONPATH"] = src
    print(f"# bench_limits: SELECT * of {rows:,} rows, capped at {max_rows:,} rows "
          f"(server source: {src or 'this tree'})\n")
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    with tempfile.TemporaryDirectory(prefix="bench-capped-") as work:
        server = start_server(Path(work) / "data", extra_args=["--lazy-spark"], env=env)
        try:
            with httpx.Client(base_url=server.url, timeout=600) as http:
                r = http.post("/v1/tables", json={"name": "t", "columns": [
                    {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]})
                r.raise_for_status()
                step = 200_000
                for lo in range(0, rows, step):
                    body = "".join(json.dumps({"n": i, "s": f"row {i:020d} of the table"}) + "\n"
                                   for i in range(lo, min(rows, lo + step)))
                    http.post("/v1/ingest/t", content=body.encode()).raise_for_status()
                http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM t"})  # warm
                print("| answer | status | rows | truncated_by | time s (best / worst) | "
                      "server peak +MB (best / worst) |")
                print("|---|---|---|---|---|---|")
                for label, headers in (("JSON", {}), ("Arrow", {
                        "Accept": "application/vnd.apache.arrow.stream"})):
                    times, peaks = [], []
                    for _ in range(3):
                        meter = PeakMeter(server.proc.pid).start()
                        t0 = time.perf_counter()
                        r = http.post("/v1/query", params={"engine": "local"},
                                      json={"sql": "SELECT * FROM t"}, headers=headers)
                        times.append(time.perf_counter() - t0)
                        peaks.append(meter.growth_bytes() / 1e6)
                    if label == "JSON":
                        doc = r.json() if r.status_code == 200 else {}
                        n = len(doc.get("rows", []))
                        cut = doc.get("stats", {}).get("truncated_by")
                    else:
                        import pyarrow as pa

                        n = pa.ipc.open_stream(r.content).read_all().num_rows
                        cut = json.loads(r.headers["x-shoal-stats"]).get("truncated_by")
                    print(f"| {label} | {r.status_code} | {n:,} | {cut} | {min(times):.2f} / "
                          f"{max(times):.2f} | {min(peaks):.0f} / {max(peaks):.0f} |")
        finally:
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=60.0)
    ap.add_argument("--kinds", default="type,json,text,notnull,mixed,deep,bigint")
    ap.add_argument("--no-server", action="store_true")
    ap.add_argument("--capped-answer", action="store_true")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--max-rows", type=int, default=10_000)
    ap.add_argument("--src", default=None)
    args = ap.parse_args()
    if args.capped_answer:
        capped_answer(args.rows, args.max_rows, args.src)
        return
    kinds = args.kinds.split(",")
    bodies = {}
    print(f"# bench_limits: {args.mb:g} MB bodies of bad lines\n")
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| kind | body MB | lines | coerce s | coerce peak +MB | HTTP s | server peak +MB | "
          "status |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for kind in kinds:
        body, n = body_of(kind, args.mb)
        dt, peak, rejected = in_process(body)
        assert rejected == n, (kind, rejected, n)
        rows[kind] = (len(body) / 1e6, n, dt, peak)
        if not args.no_server:
            bodies[kind] = body
        else:
            del body
    http = over_http(bodies) if bodies else {}
    for kind in kinds:
        mb, n, dt, peak = rows[kind]
        h = http.get(kind)
        hs = f"{h[0]:.2f} | {h[1]:.0f} | {h[2]}" if h else "- | - | -"
        print(f"| {kind} | {mb:.1f} | {n:,} | {dt:.2f} | {peak:.0f} | {hs} |")
    for kind, h in http.items():
        print(f"\n{kind}: {h[3][:160]}")


if __name__ == "__main__":
    main()
