"""Benchmark: the cost of refusing a large body of bad lines (bounded cost, docs/security.md),
and of a capped answer of the embedded engine.

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

`--decoder` measures the request-body gzip decoder instead (`shoal.http.body.gunzip`
against a copy of the decoder it replaced, which handed zlib the rest of the body after
every member): MB/s of decoded NDJSON for one member, four members and bgzip-style 64 KiB
blocks, and the seconds a body of 120,000 empty members costs (refused by the member bound
now; also timed with the bound lifted, to show the decoder itself is linear).

`--protobuf` measures the wire check that bounds protobuf bodies before they are parsed
(`shoal.frontends.otlp.codec.check_request_bounds`) beside the parse and the mapping of
the same request: a collector-sized batch of 8,192 log records (8 attributes each) and an
SDK batch of 512 spans; then how fast it refuses the hostile bodies.

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
import zlib
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


def gunzip_before(data: bytes, *, limit: int) -> bytes:
    """The decoder as it was: after each member, zlib's `unused_data` (a copy of the rest of
    the body) became the next input, so N members cost N copies of the body."""
    from shoal.errors import PayloadTooLargeError
    from shoal.http.errors import BadRequestError

    out = bytearray()
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = data
    try:
        while True:
            out += d.decompress(pending, limit - len(out) + 1)
            if len(out) > limit:
                raise PayloadTooLargeError(len(out), limit)
            pending = d.unconsumed_tail
            if pending:
                continue
            if d.eof:
                rest = d.unused_data
                if not rest:
                    return bytes(out)
                d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                pending = rest
                continue
            more = d.decompress(b"", limit - len(out) + 1)
            if not more:
                raise BadRequestError("gzip body is truncated", code="bad_payload")
            out += more
            if len(out) > limit:
                raise PayloadTooLargeError(len(out), limit)
            pending = d.unconsumed_tail
    except zlib.error as e:
        raise BadRequestError(f"body is not valid gzip: {e}", code="bad_payload") from None


def _ndjson(mb: float) -> bytes:
    lines = []
    size = 0
    i = 0
    while size < mb * 1_000_000:
        line = (b'{"ts":"2026-11-29T07:%02d:%02d.%06dZ","service":"checkout-%d","level":"%s",'
                b'"status":%d,"latency_ms":%d,"msg":"GET /api/v1/items/%d answered"}\n'
                % (i // 60 % 60, i % 60, i * 7919 % 1_000_000, i % 17,
                   (b"info", b"warn", b"error")[i % 3], 200 + i % 5, i * 31 % 997, i))
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines)


def _members(raw: bytes, n: int) -> bytes:
    import gzip
    step = -(-len(raw) // n)
    return b"".join(gzip.compress(raw[i:i + step], mtime=0) for i in range(0, len(raw), step))


def _best(fn, body: bytes, repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            out = fn(body, limit=256 << 20)
            outcome = f"{len(out):,} B"
        except Exception as e:  # noqa: BLE001 - the refusal is the outcome being measured
            outcome = f"{type(e).__name__}: {e}"[:70] + "..."
        best = min(best, time.perf_counter() - t0)
    return best, outcome


def bench_decoder(mb: float, repeat: int) -> None:
    import gzip

    from shoal.http import body as body_mod

    raw = _ndjson(mb)
    bodies = {"1 member": _members(raw, 1), "4 members": _members(raw, 4),
              "bgzip 64 KiB blocks": _members(raw, -(-len(raw) // 65280))}
    print(f"# bench_limits --decoder: {len(raw) / 1e6:.0f} MB of NDJSON, best of {repeat}\n")
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| body | gzip MB | before MB/s | after MB/s |")
    print("|---|---|---|---|")
    for name, body in bodies.items():
        before, _ = _best(gunzip_before, body, repeat)
        after, _ = _best(body_mod.gunzip, body, repeat)
        mb_out = len(raw) / 1e6
        print(f"| {name} | {len(body) / 1e6:.1f} | {mb_out / before:.0f} | "
              f"{mb_out / after:.0f} |")
    hostile = gzip.compress(b"", mtime=0) * 120_000
    print(f"\n120,000 empty members ({len(hostile) / 1e6:.1f} MB):\n")
    print("| decoder | s | outcome |")
    print("|---|---|---|")
    dt, outcome = _best(gunzip_before, hostile, 1)
    print(f"| before | {dt:.2f} | {outcome} |")
    dt, outcome = _best(body_mod.gunzip, hostile, repeat)
    print(f"| after | {dt:.4f} | {outcome} |")
    base = body_mod.MEMBERS_BASE
    body_mod.MEMBERS_BASE = 10**9
    try:
        dt, outcome = _best(body_mod.gunzip, hostile, repeat)
    finally:
        body_mod.MEMBERS_BASE = base
    print(f"| after, member bound lifted | {dt:.3f} | {outcome} |")
    big = gzip.compress(b"", mtime=0) * 3_000_000
    dt, outcome = _best(body_mod.gunzip, big, 1)
    print(f"| after, 3,000,000 members ({len(big) / 1e6:.0f} MB; before: hours) | {dt:.4f} | "
          f"{outcome} |")
    body_mod.MEMBERS_BASE = 10**9
    try:
        dt, outcome = _best(body_mod.gunzip, big, 1)
    finally:
        body_mod.MEMBERS_BASE = base
    print(f"| the same, member bound lifted | {dt:.2f} | {outcome} |")


def _timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001, S110 - the refusal is what is timed
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def bench_protobuf(repeat: int) -> None:
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    from shoal.frontends.otlp.codec import check_request_bounds
    from shoal.frontends.otlp.mapping import map_request

    logs = logs_service_pb2.ExportLogsServiceRequest()
    rl = logs.resource_logs.add()
    for k in range(10):
        rl.resource.attributes.add(key=f"service.attr{k}").value.string_value = "x" * 20
    sl = rl.scope_logs.add()
    sl.scope.name = "bench"
    for i in range(8192):
        r = sl.log_records.add(time_unix_nano=1_790_000_000_000_000_000 + i,
                               severity_number=9, severity_text="INFO")
        r.body.string_value = f"GET /api/v1/items/{i} answered 200 in {i % 97} ms"
        for k in range(8):
            r.attributes.add(key=f"http.attr{k}").value.string_value = f"value-{i}"
    spans = trace_service_pb2.ExportTraceServiceRequest()
    ss = spans.resource_spans.add().scope_spans.add()
    for i in range(512):
        sp = ss.spans.add(trace_id=i.to_bytes(16, "big"), span_id=(i + 1).to_bytes(8, "big"),
                          name=f"GET /items/{i}", start_time_unix_nano=1, end_time_unix_nano=2)
        for k in range(12):
            sp.attributes.add(key=f"http.attr{k}").value.string_value = f"v{i}"
        sp.events.add(name="event").attributes.add(key="k").value.int_value = i
    print(f"# bench_limits --protobuf: best of {repeat}\n")
    print("| request | MB | wire check ms | parse ms | map ms |")
    print("|---|---|---|---|---|")
    for signal, name, msg in (("logs", "8,192 log records", logs),
                              ("traces", "512 spans", spans)):
        wire = msg.SerializeToString()
        check = _timed(lambda s=signal, w=wire: check_request_bounds(s, w), repeat)
        parse = _timed(lambda m=msg, w=wire: type(m).FromString(w), repeat)
        parsed = type(msg).FromString(wire)
        mapping = _timed(lambda s=signal, p=parsed: map_request(s, p), repeat)
        print(f"| {name} | {len(wire) / 1e6:.2f} | {check * 1e3:.1f} | {parse * 1e3:.1f} | "
              f"{mapping * 1e3:.1f} |")

    from tests.support.wire import length_delimited as ld

    hostile = {"3,000,000 attributes in one record":
               ld(1, ld(2, ld(2, ld(6, ld(1, b"a")) * 3_000_000))),
               "4,000,000 empty records": ld(1, ld(2, ld(2, b"") * 4_000_000))}
    print("\n| hostile body | MB | refused in ms |")
    print("|---|---|---|")
    for name, wire in hostile.items():
        dt = _timed(lambda w=wire: check_request_bounds("logs", w), repeat)
        print(f"| {name} | {len(wire) / 1e6:.0f} | {dt * 1e3:.1f} |")


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
    ap.add_argument("--decoder", action="store_true", help="bench the gzip body decoder")
    ap.add_argument("--protobuf", action="store_true", help="bench the protobuf wire check")
    ap.add_argument("--capped-answer", action="store_true",
                    help="bench the embedded engine's capped answer over HTTP")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--max-rows", type=int, default=10_000)
    ap.add_argument("--src", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.protobuf:
        bench_protobuf(args.repeat)
        return
    if args.decoder:
        bench_decoder(args.mb, args.repeat)
        return
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
