"""Benchmark: NDJSON -> Arrow coercion against Arrow's own JSON reader (docs/ingest.md).

    .venv/bin/python bench/bench_coerce.py [--mb 200] [--repeat 3]

Generates realistic log NDJSON (`_timestamp` RFC 3339 with nanoseconds, service, level, a
~10-word message, trace_id (32 hex), status int, duration_ms real, a nested `attrs` object)
and times, in one process, on the same bytes:

- the parse limit: `pyarrow.json.read_json` of the body (schema inferred), and the same with
  an explicit schema of the typed columns (what the fast path itself asks Arrow for);
- `coerce_ndjson` with a typed-scalars schema (attrs not in it, dropped);
- `coerce_ndjson` with `attrs` as a `dynamic` column;
- `coerce_ndjson` of a body with 5 more unknown fields going to `props`, alone and given the
  scan's result (`unknown_fields=`); the evolve-mode pre-scan `scan_unknown_fields`; and the
  two together, as the write path runs them in `evolve` mode;
- `coerce_ndjson` where `status` is a `string` column (what evolution creates) that receives
  numbers: Arrow's reader refuses, the column moves to the raw path.

Throughput is body bytes / wall time (best of `--repeat`). Ratios are against both limits.
Output is Markdown, ready for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.json as pj

from shoal.ingest.coerce import coerce_ndjson
from shoal.ingest.evolve import scan_unknown_fields
from shoal.types import DYNAMIC, INT, REAL, STRING, Column, Schema

WORDS = ("connection failed timeout user login request served cache miss hit database query "
         "slow retry upstream error accepted rejected token expired session opened closed "
         "payment authorized declined queue message consumed published").split()
SERVICES = [f"svc-{name}" for name in ("api", "auth", "billing", "cart", "search", "mail",
                                       "media", "feed", "geo", "ledger", "notify", "orders",
                                       "pay", "profile", "rank", "recs", "ship", "stock",
                                       "tax", "web")]
LEVELS = ["DEBUG", "INFO", "INFO", "INFO", "INFO", "WARN", "ERROR"]
EXTRA_VALUES: list[Callable[[random.Random], str]] = [  # one JSON type per extra field
    lambda r: f'"{r.choice(WORDS)}"', lambda r: str(r.randrange(1000)),
    lambda r: f"{r.random():.4f}", lambda r: r.choice(("true", "false")),
    lambda r: f'{{"k":{r.randrange(9)},"tag":"{r.choice(WORDS)}"}}']


def generate(mb: float, *, extra_fields: int = 0, seed: int = 7) -> bytes:
    """About `mb` MB of log NDJSON, one compact JSON object per line."""
    rnd = random.Random(seed)
    target = int(mb * 1_000_000)
    base = 1_700_000_000
    parts: list[str] = []
    size = 0
    i = 0
    while size < target:
        t = base + i // 50
        hh, mm, ss = (t // 3600) % 24, (t // 60) % 60, t % 60
        msg = " ".join(rnd.choice(WORDS) for _ in range(10))
        extras = "".join(f',"extra_{k}":' + EXTRA_VALUES[k % 5](rnd)
                         for k in range(extra_fields))
        line = (
            f'{{"_timestamp":"2023-11-14T{hh:02d}:{mm:02d}:{ss:02d}.{rnd.randrange(10**9):09d}Z",'
            f'"service":"{rnd.choice(SERVICES)}","level":"{rnd.choice(LEVELS)}",'
            f'"message":"{msg}","trace_id":"{rnd.getrandbits(128):032x}",'
            f'"status":{rnd.choice((200, 200, 200, 201, 204, 404, 500))},'
            f'"duration_ms":{rnd.random() * 500:.3f},'
            f'"attrs":{{"http":{{"method":"{rnd.choice(("GET", "POST"))}",'
            f'"path":"/api/v1/items/{rnd.randrange(10000)}"}},'
            f'"user_id":{rnd.randrange(100000)},"region":"{rnd.choice(("eu-1", "us-2"))}",'
            f'"retry":{"true" if rnd.random() < 0.1 else "false"}}}{extras}}}\n')
        parts.append(line)
        size += len(line)
        i += 1
    return "".join(parts).encode()


def typed_schema(*, attrs: bool, status_type: Any = INT) -> Schema:
    cols = [Column("service", STRING), Column("level", STRING), Column("message", STRING),
            Column("trace_id", STRING), Column("status", status_type),
            Column("duration_ms", REAL)]
    if attrs:
        cols.append(Column("attrs", DYNAMIC))
    return Schema.create(cols)


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    body = generate(args.mb)
    body5 = generate(args.mb, extra_fields=5)
    explicit = pa.schema([("_timestamp", pa.timestamp("ns", tz="UTC")), ("service", pa.string()),
                          ("level", pa.string()), ("message", pa.string()),
                          ("trace_id", pa.string()), ("status", pa.int32()),
                          ("duration_ms", pa.float64())])
    ignore = pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="ignore")

    def read_infer(b: bytes) -> Callable[[], Any]:
        return lambda: pj.read_json(pa.BufferReader(b))

    def read_explicit(b: bytes) -> Callable[[], Any]:
        return lambda: pj.read_json(pa.BufferReader(b), parse_options=ignore)

    def coerce(b: bytes, schema: Schema, unknown: str,
               hint: list[str] | None = None) -> Callable[[], Any]:
        def run() -> Any:
            out = coerce_ndjson(b, schema, unknown=unknown,  # type: ignore[arg-type]
                                ingest_time_ns=0, unknown_fields=hint)
            assert out.rejected_count == 0, out.errors[:3]
            return out
        return run

    def evolve_flow(b: bytes, schema: Schema) -> Callable[[], Any]:
        """What the write path does in `evolve` mode when nothing is added to the schema."""
        def run() -> Any:
            unknown = scan_unknown_fields(b, schema)
            return coerce_ndjson(b, schema, unknown="props", ingest_time_ns=0,
                                 unknown_fields=unknown)
        return run

    cases: list[tuple[str, bytes, Callable[[], Any]]] = [
        ("read_json, schema inferred (parse limit)", body, read_infer(body)),
        ("read_json, explicit typed schema", body, read_explicit(body)),
        ("coerce: typed scalars, attrs dropped", body,
         coerce(body, typed_schema(attrs=False), "drop")),
        ("coerce: + attrs dynamic", body, coerce(body, typed_schema(attrs=True), "drop")),
        ("coerce: + attrs dynamic, unknown=props (none unknown)", body,
         coerce(body, typed_schema(attrs=True), "props")),
        ("read_json, schema inferred, body with 5 more fields", body5, read_infer(body5)),
        ("read_json, explicit typed schema, body with 5 more fields", body5,
         read_explicit(body5)),
        ("coerce: 5 unknown fields -> props", body5,
         coerce(body5, typed_schema(attrs=True), "props")),
        ("scan_unknown_fields (evolve pre-scan), 5 unknown", body5,
         lambda: scan_unknown_fields(body5, typed_schema(attrs=True))),
        ("coerce: 5 unknown -> props, given the scan's result", body5,
         coerce(body5, typed_schema(attrs=True), "props", hint=[f"extra_{k}" for k in range(5)])),
        ("evolve flow: scan + coerce(props, hint), 5 unknown", body5,
         evolve_flow(body5, typed_schema(attrs=True))),
        ("evolve flow: scan + coerce(props, hint), none unknown", body,
         evolve_flow(body, typed_schema(attrs=True))),
        ("coerce: status is string, gets numbers", body,
         coerce(body, typed_schema(attrs=True, status_type=STRING), "drop")),
    ]
    # Rounds interleave the cases, so a busy spell on the machine hits all of them alike.
    best = [float("inf")] * len(cases)
    for _ in range(args.repeat):
        for i, (_, _, fn) in enumerate(cases):
            seconds, _ = best_of(1, fn)
            best[i] = min(best[i], seconds)
    limit = {id(body): best[0], id(body5): best[5]}
    strict = {id(body): best[1], id(body5): best[6]}
    n_lines = body.count(b"\n")
    print(f"# bench_coerce: {len(body) / 1e6:.0f} MB NDJSON, {n_lines} lines; "
          f"python {platform.python_version()}, pyarrow {pa.__version__}, "
          f"{os.cpu_count()} cores, best of {args.repeat}\n")
    print("| case | MB/s | vs parse limit (inferred) | vs read_json explicit |")
    print("|---|---:|---:|---:|")
    for (name, b, _), seconds in zip(cases, best):
        mbps = len(b) / 1e6 / seconds
        print(f"| {name} | {mbps:.0f} | {limit[id(b)] / seconds:.2f}x | "
              f"{strict[id(b)] / seconds:.2f}x |")


if __name__ == "__main__":
    main()
