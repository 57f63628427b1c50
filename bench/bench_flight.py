"""A 1M-row answer three ways: Arrow Flight SQL (ADBC) vs `POST /v1/query` with
Arrow IPC vs `POST /v1/query` with JSON. Targets: Flight SQL >= 1x Arrow-over-HTTP and
>= 10x JSON.

    .venv/bin/python bench/bench_flight.py [--rows 1000000] [--repeat 3] [--paths flight,arrow,json]

(`--paths flight` measures Flight SQL alone: the quick A/B of a change to the Flight server.)

One process: a server app over a fresh data directory (uvicorn on a free port, the Flight
port beside it, the embedded engine), a table of `--rows` rows (`_timestamp`, `n` long,
`service` string, `status` long) written straight through the commit coordinator, then
`SELECT _timestamp, n, service, status FROM big` fetched whole by each client:

- Flight SQL: `adbc-driver-flightsql`'s cursor, `execute` + `fetch_arrow_table`;
- Arrow/HTTP: httpx, `Accept: application/vnd.apache.arrow.stream`, the body read as an
  Arrow IPC stream into a table;
- JSON/HTTP: httpx, the JSON document parsed (`response.json()`).

Each path's time is end to end (request, the engine's answer, transfer, decoding into the
client's form); the best of `--repeat` runs is reported. MB/s is the answer's Arrow size
(`pa.Table.nbytes`, the same for all three) over that time; the wire size is also printed.

Time to first batch (same runs, the best): from the request to the first record batch in the
client's hands for Flight SQL (`fetch_record_batch().read_next_batch()`: the server streams
batches as the embedded engine produces them), and to the first bytes of the body for the
two HTTP paths (which build the whole answer before sending it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adbc_driver_flightsql.dbapi as flight_sql            # noqa: E402
import httpx                                                 # noqa: E402
import pyarrow as pa                                         # noqa: E402

import shoal                                                 # noqa: E402
from shoal.server import create_app                          # noqa: E402
from shoal.types import LONG, STRING, Column                 # noqa: E402
from tests.support.server import free_port, serve_app        # noqa: E402

SQL = "SELECT _timestamp, n, service, status FROM big"
ARROW = "application/vnd.apache.arrow.stream"
BASE_NS = 1_772_323_200 * 10**9


def fill(db, rows: int, extents: int = 4) -> None:
    db.create_table("big", [Column("n", LONG), Column("service", STRING),
                            Column("status", LONG)])
    info = db.catalog.load_table("big")
    schema = info.schema.arrow()
    step = rows // extents
    entries = []
    for e in range(extents):
        lo, hi = e * step, (rows if e == extents - 1 else (e + 1) * step)
        n = pa.array(range(lo, hi), pa.int64())
        t = pa.table({"_timestamp": pa.array([BASE_NS + i * 1000 for i in range(lo, hi)],
                                             pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                      "props": pa.nulls(hi - lo, pa.binary()), "n": n,
                      "service": pa.array([f"svc-{i % 40}" for i in range(lo, hi)]),
                      "status": pa.array([200 + i % 7 for i in range(lo, hi)], pa.int64()),
                      }).cast(schema)
        entries.append(db.coordinator.write_extent(info, t.to_batches()))
    db.coordinator.append("big", entries)


def best(fn, repeat: int) -> tuple[float, int, int, int, float]:
    """(best seconds, rows, Arrow bytes, wire bytes, best seconds to the first batch) of
    `repeat` runs of `fn`, which returns (rows, Arrow bytes, wire bytes, first-batch time
    as `time.perf_counter()`)."""
    out = None
    first = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows, nbytes, wire, t_first = fn()
        dt = time.perf_counter() - t0
        first = min(first, t_first - t0)
        if out is None or dt < out[0]:
            out = (dt, rows, nbytes, wire)
    assert out is not None
    return (*out, first)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paths", default="flight,arrow,json",
                    help="which paths to measure (comma-separated: flight, arrow, json)")
    args = ap.parse_args()
    paths = set(args.paths.split(","))
    with tempfile.TemporaryDirectory(prefix="shoal-bench-flight-") as tmp:
        db = shoal.connect(data_dir=tmp, query_engine="local")
        try:
            fill(db, args.rows)
            app = create_app(db, config=db.config, flight_port=free_port())
            with serve_app(app) as url:
                uri = f"grpc://127.0.0.1:{app.state.flight.bound_port}"
                arrow_bytes = 0

                def via_flight() -> tuple[int, int, int, float]:
                    with flight_sql.connect(uri, autocommit=True) as conn, \
                            conn.cursor() as cur:
                        cur.execute(SQL)
                        reader = cur.fetch_record_batch()
                        batches = [reader.read_next_batch()]
                        t_first = time.perf_counter()
                        batches.extend(reader)
                        table = pa.Table.from_batches(batches, schema=reader.schema)
                    return table.num_rows, table.nbytes, table.nbytes, t_first

                def http_body(c: httpx.Client, headers: dict[str, str]) -> tuple[bytes, float]:
                    with c.stream("POST", "/v1/query", json={"sql": SQL},
                                  headers=headers) as r:
                        r.raise_for_status()
                        chunks = r.iter_bytes()
                        parts = [next(chunks)]
                        t_first = time.perf_counter()
                        parts.extend(chunks)
                    return b"".join(parts), t_first

                def via_arrow_http() -> tuple[int, int, int, float]:
                    with httpx.Client(base_url=url, timeout=600) as c:
                        body, t_first = http_body(c, {"Accept": ARROW})
                        table = pa.ipc.open_stream(body).read_all()
                    return table.num_rows, table.nbytes, len(body), t_first

                def via_json_http() -> tuple[int, int, int, float]:
                    with httpx.Client(base_url=url, timeout=600) as c:
                        body, t_first = http_body(c, {})
                        doc = json.loads(body)
                    return len(doc["rows"]), arrow_bytes, len(body), t_first

                results = {}
                if "flight" in paths:
                    results["Flight SQL (ADBC)"] = best(via_flight, args.repeat)
                if "arrow" in paths:
                    results["Arrow IPC over HTTP"] = best(via_arrow_http, args.repeat)
                    arrow_bytes = results["Arrow IPC over HTTP"][2]
                if "json" in paths:
                    results["JSON over HTTP"] = best(via_json_http, args.repeat)
        finally:
            db.close()
    load = os.getloadavg()
    print(f"Flight SQL vs HTTP — {platform.machine()}, {os.cpu_count()} cores, "
          f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min), "
          f"{args.rows} rows, best of {args.repeat}\n")
    print("| path | s | rows/s | MB/s (Arrow size) | wire MB | first batch, s |")
    print("|---|---|---|---|---|---|")
    for name, (dt, rows, nbytes, wire, first) in results.items():
        assert rows == args.rows, (name, rows)
        print(f"| {name} | {dt:.2f} | {rows / dt:,.0f} | {nbytes / dt / 1e6:,.1f} | "
              f"{wire / 1e6:,.1f} | {first:.3f} |")
    if len(results) == 3:
        flight_s = results["Flight SQL (ADBC)"][0]
        print(f"\nFlight SQL vs Arrow/HTTP: {results['Arrow IPC over HTTP'][0] / flight_s:.2f}x;"
              f" vs JSON: {results['JSON over HTTP'][0] / flight_s:.1f}x")


if __name__ == "__main__":
    main()
