"""Prometheus remote write vs OTLP metrics vs REST NDJSON: the same samples, in one run.

    .venv/bin/python bench/bench_remote_write.py [--series 1000] [--samples 100]
                                                 [--batch 2000] [--clients 4]

`--series` series (10 metric names x job/instance/method/code labels) with `--samples`
samples each (one per "scrape", 15 s apart, float values), sent three ways to one
`shoal serve` (embedded SQLite + local store, Spark lazy so it does not compete for the
cores), `--clients` concurrent httpx clients per path, requests of `--batch` samples:

1. remote write (`POST /api/v1/write`): bodies as Prometheus 2.x builds them -- one
   `TimeSeries` per sample, full label set each time, snappy block compression -- into
   `prom_samples`;
2. OTLP/HTTP metrics (`POST /v1/metrics`, protobuf): the samples as gauge data points of
   one `Metric` per name and request, the labels as attributes, into `otel_metrics`;
3. REST NDJSON (`POST /v1/ingest/prom_rest`): exactly the rows remote write produces
   (`shoal.types.prometheus` layout), as JSON lines.

Bodies are encoded before timing, and each path gets one untimed warm-up request first
(its table is created then), so samples/s is the server's share: receive, decode, map,
group commit (each call returns once its rows are committed). Row counts are checked after.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_otlp import pct, run_clients  # noqa: E402  (the shared client pool)

Sample = tuple[dict[str, str], int, float]          # (labels incl. __name__, ms, value)


def make_samples(n_series: int, n_samples: int, *, t0: int = 1_764_000_000_000
                 ) -> list[Sample]:
    """Scrape-ordered samples: every series once per 15 s step, as a WAL holds them."""
    series = []
    for i in range(n_series):
        series.append({"__name__": f"app_metric_{i % 10}_total", "job": "api",
                       "instance": f"10.0.{i // 250}.{i % 250}:9100",
                       "method": ("GET", "POST", "PUT", "DELETE")[i % 4],
                       "code": str(200 + (i // 40) % 5)})
    return [(labels, t0 + step * 15_000, float(step * 7 + i % 13) + 0.25)
            for step in range(n_samples) for i, labels in enumerate(series)]


def remote_write_bodies(batches: list[list[Sample]]) -> list[bytes]:
    import cramjam

    from shoal.frontends.prometheus.remote_write_pb2 import WriteRequest

    bodies = []
    for batch in batches:
        req = WriteRequest()
        for labels, ts, value in batch:
            series = req.timeseries.add()
            for name, v in sorted(labels.items()):
                series.labels.add(name=name, value=v)
            series.samples.add(timestamp=ts, value=value)
        bodies.append(bytes(cramjam.snappy.compress_raw(req.SerializeToString())))
    return bodies


def otlp_bodies(batches: list[list[Sample]]) -> list[bytes]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest)
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    bodies = []
    for batch in batches:
        req = ExportMetricsServiceRequest()
        scope = req.resource_metrics.add().scope_metrics.add()
        metrics = {}
        for labels, ts, value in batch:
            name = labels["__name__"]
            if name not in metrics:
                metrics[name] = scope.metrics.add(name=name)
            point = metrics[name].gauge.data_points.add(time_unix_nano=ts * 1_000_000,
                                                        as_double=value)
            point.attributes.extend(KeyValue(key=k, value=AnyValue(string_value=v))
                                    for k, v in labels.items() if k != "__name__")
        bodies.append(req.SerializeToString())
    return bodies


def ndjson_bodies(batches: list[list[Sample]]) -> list[bytes]:
    """The rows remote write makes of each batch (via `SampleRows`), as NDJSON."""
    from shoal.types.prometheus import SampleRows

    bodies = []
    for batch in batches:
        rows = SampleRows()
        for labels, ts, value in batch:
            rows.add(ts, labels, value)
        table = rows.batch()
        stamps = table.column("_timestamp").cast("int64").to_pylist()
        lines = []
        for i, row in enumerate(table.to_pylist()):
            row["_timestamp"] = stamps[i]
            row["labels"] = json.loads(row["labels"])
            lines.append(json.dumps(row, separators=(",", ":")))
        bodies.append(("\n".join(lines) + "\n").encode())
    return bodies


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()

    import httpx

    from shoal.types.prometheus import PROM_SAMPLES_SCHEMA
    from tests.support.server import start_server

    t = time.perf_counter()
    samples = make_samples(args.series, args.samples)
    batches = [samples[i:i + args.batch] for i in range(0, len(samples), args.batch)]
    # One request per path before timing (other samples: an hour earlier), so that no path
    # pays for creating its table or for first-use warm-up inside the timed part.
    warm = [make_samples(args.series, 1, t0=1_763_996_400_000)[:args.batch]]
    paths: list[tuple[str, str, dict[str, str], list[bytes], str]] = [
        ("remote write (snappy protobuf)", "/api/v1/write",
         {"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy"},
         remote_write_bodies(warm + batches), "prom_samples"),
        ("OTLP/HTTP metrics (protobuf gauges)", "/v1/metrics",
         {"Content-Type": "application/x-protobuf"}, otlp_bodies(warm + batches),
         "otel_metrics"),
        ("REST NDJSON, same rows", "/v1/ingest/prom_rest",
         {"Content-Type": "application/x-ndjson"}, ndjson_bodies(warm + batches), "prom_rest"),
    ]
    prep = time.perf_counter() - t
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-prw-"))
    server = start_server(work / "data", extra_args=["--lazy-spark"])
    results: list[tuple[str, float, list[float], int]] = []
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            cols = [{"name": c.name, "type": str(c.type)}
                    for c in PROM_SAMPLES_SCHEMA.user_columns]
            r = http.post("/v1/tables", json={"name": "prom_rest", "columns": cols,
                                              "mode": "drop"})
            assert r.status_code == 201, r.text
            for _name, path, headers, bodies, _table in paths:
                r = http.post(path, content=bodies[0], headers=headers)
                assert r.status_code in (200, 204), (r.status_code, r.text)

        for name, path, headers, bodies, _table in paths:
            def make(path: str = path, headers: dict[str, str] = headers
                     ) -> Callable[[bytes], None]:
                http = httpx.Client(base_url=server.url, timeout=120, headers=headers)

                def send(body: bytes) -> None:
                    r = http.post(path, content=body)
                    assert r.status_code in (200, 204), (r.status_code, r.text)
                return send

            dt, lat = run_clients(bodies[1:], args.clients, make)
            results.append((name, dt, lat, sum(len(b) for b in bodies[1:])))
        with httpx.Client(base_url=server.url, timeout=120) as http:
            counts = {p[4]: http.get(f"/v1/tables/{p[4]}").json()["row_count"] for p in paths}
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = len(samples)
    assert counts == {p[4]: n + len(warm[0]) for p in paths}, counts
    print(f"## {n:,} samples ({args.series:,} series x {args.samples} samples), "
          f"{args.clients} concurrent clients, {len(batches)} requests of {args.batch} samples "
          f"per path ({sys.platform}, server and clients on the same machine)")
    print("| path | samples/s | vs remote write | p50 ms | p99 ms | wire B/sample |\n"
          "|---|---:|---:|---:|---:|---:|")
    rw_rate = n / results[0][1]
    for name, dt, lat, nbytes in results:
        print(f"| {name} | {n / dt:,.0f} | {n / dt / rw_rate:.2f}x | "
              f"{statistics.median(lat) * 1000:.0f} | {pct(lat, 0.99):.0f} | "
              f"{nbytes / n:,.1f} |")
    print(f"\nbodies prepared in {prep:.1f}s (not timed); rows checked: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
