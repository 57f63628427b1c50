"""PromQL latency: shoal's Prometheus HTTP API vs a real Prometheus on the same data (issue
16; target: shoal's median <= 2x Prometheus's).

    .venv/bin/python bench/bench_promql.py [--series 1000] [--hours 24] [--repeat 7]

Data: `--series` counters (default 1,000) in 10 `group`s, one sample every 15 s for
`--hours` (default 24: 5.76M samples). Prometheus gets them as OpenMetrics text backfilled
with `promtool tsdb create-blocks-from openmetrics`; shoal gets the same samples in its
`prom_samples` table (Arrow batches through the write path of an embedded client, in time
order as remote write would land them), then a `shoal serve --lazy-spark` over that data
directory answers over HTTP (PromQL never starts Spark; a warming JVM would only steal
CPU). Both servers run at once, on the same machine.

Queries (each warmed twice, then `--repeat` times alternating; median wall time of the HTTP
request as a client sees it): `sum by (group) (rate(x[5m]))` as a range query over the
whole day (step 60 s: 1,440 steps) and as an instant query at the end of the day.

    .venv/bin/python bench/bench_promql.py --parse-only [--repeat 2000]

times parsing alone, for dashboard-sized expressions: promql-parser, the bounds checked on
the text before it (`shoal.frontends.prometheus.promql.bounds`), and shoal's `parse` (both),
p50 in µs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shoal.client import connect                                   # noqa: E402
from shoal.types.prometheus import (PROM_SAMPLES_SCHEMA, series_id,  # noqa: E402
                                    series_key)
from tests.support.prometheus import prometheus_server            # noqa: E402
from tests.support.server import start_server                      # noqa: E402

STEP_S = 15
QUERY = "sum by (group) (rate(x_total[5m]))"
PARSE_CASES = [
    ("selector", 'up{job="api", instance=~"10\\\\.0\\\\..*"}'),
    ("rate by", QUERY),
    ("ratio", 'sum(rate(http_requests_total{code=~"5.."}[5m])) by (route) / '
              "sum(rate(http_requests_total[5m])) by (route) > 0.05"),
    ("quantile", "histogram_quantile(0.99, sum by (le, svc) (rate(latency_bucket[5m])))"),
    ("subquery", "max_over_time(rate(x_total[1m])[1h:1m]) - min_over_time(x_total[1h] "
                 "offset 1d) or on(job) vector(0)"),
    ("50 terms", " + ".join(f"m{i}" for i in range(50))),
]


def parse_costs(repeat: int) -> None:
    import promql_parser as pp

    from shoal.frontends.prometheus.promql.bounds import check_bounds
    from shoal.frontends.prometheus.promql.engine import parse

    def p50_us(fn, expr: str) -> float:
        for _ in range(20):
            fn(expr)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn(expr)
            times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)

    print(f"PromQL parsing — {platform.machine()}, {os.cpu_count()} cores, {repeat} runs "
          "(µs, p50)\n")
    print("| expression | chars | promql-parser | bounds check | shoal parse |")
    print("|---|---|---|---|---|")
    for name, expr in PARSE_CASES:
        print(f"| {name} | {len(expr)} | {p50_us(pp.parse, expr):.1f} | "
              f"{p50_us(check_bounds, expr):.1f} | {p50_us(parse, expr):.1f} |")


def make_values(series: int, points: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.integers(0, 20, size=(series, points)), axis=1).astype(np.float64)


def labels_of(i: int) -> dict[str, str]:
    return {"group": f"g{i % 10}", "instance": f"host-{i:04d}", "job": "bench"}


def openmetrics(path: Path, values: np.ndarray, t0: int) -> None:
    with open(path, "w") as f:
        f.write("# TYPE x counter\n")
        for i in range(values.shape[0]):
            lab = labels_of(i)
            inner = ",".join(f'{k}="{v}"' for k, v in sorted(lab.items()))
            prefix = f"x_total{{{inner}}} "
            f.writelines(f"{prefix}{int(v)} {t0 + j * STEP_S}\n"
                         for j, v in enumerate(values[i].tolist()))
        f.write("# EOF\n")


def load_shoal(data_dir: Path, values: np.ndarray, t0: int) -> None:
    db = connect(data_dir=str(data_dir))
    try:
        columns = [c for c in PROM_SAMPLES_SCHEMA.columns if c.name not in ("_timestamp",
                                                                            "props")]
        db.create_table("prom_samples", columns, mode="drop")
        points = values.shape[1]
        ts = (t0 + np.arange(points, dtype=np.int64) * STEP_S) * 1_000_000_000
        fields = {f.name: f for f in (c.arrow_field() for c in PROM_SAMPLES_SCHEMA.columns)}
        # time-major, as remote write or a scraper lands samples: each batch is a slice of
        # time across every series (so extents and blocks have narrow time ranges)
        nseries = values.shape[0]
        keys = [series_key("x_total", labels_of(i)) for i in range(nseries)]
        label_json = pa.array([json.dumps(labels_of(i)).encode() for i in range(nseries)],
                              fields["labels"].type)
        sids = pa.array([series_id(k) for k in keys], pa.int64())
        per_batch = max(1, 1_000_000 // nseries)
        for start in range(0, points, per_batch):
            cols = range(start, min(points, start + per_batch))
            # within a batch too: every series' sample at t, then at t + 15 s, ...
            rep = pa.array(np.tile(np.arange(nseries), len(cols)))
            batch = pa.table({
                "_timestamp": pa.array(np.repeat(ts[start:start + len(cols)], nseries)
                                       ).cast(fields["_timestamp"].type),
                "metric": pa.array(["x_total"] * len(rep), pa.string()),
                "labels": label_json.take(rep),
                "series": pa.array(keys).take(rep),
                "series_id": sids.take(rep),
                "value": pa.array(values[:, start:start + len(cols)].T.ravel()),
                "special": pa.nulls(len(rep), pa.string()),
            })
            # the fields' metadata says which binary column is `dynamic` JSON
            batch = pa.Table.from_arrays(batch.columns, schema=pa.schema(
                [fields[n] for n in batch.column_names]))
            db.ingest_arrow("prom_samples", batch)
    finally:
        db.close()


def timed(http: httpx.Client, path: str, params: dict[str, object]) -> tuple[float, dict]:
    t = time.perf_counter()
    r = http.get(f"/api/v1/{path}", params=params)
    elapsed = time.perf_counter() - t
    doc = r.json()
    assert r.status_code == 200 and doc["status"] == "success", doc
    return elapsed, doc["data"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--parse-only", action="store_true")
    args = ap.parse_args()
    if args.parse_only:
        parse_costs(max(args.repeat, 2000))
        return
    points = int(args.hours * 3600 // STEP_S)
    end = 1_700_000_000 - 1_700_000_000 % 86400
    t0 = end - (points - 1) * STEP_S
    values = make_values(args.series, points)
    work = Path(tempfile.mkdtemp(prefix="bench-promql-"))
    t = time.perf_counter()
    openmetrics(work / "data.om", values, t0)
    om_text = (work / "data.om").read_text()
    print(f"# {args.series * points:,} samples; OpenMetrics written in "
          f"{time.perf_counter() - t:.1f}s", flush=True)
    t = time.perf_counter()
    load_shoal(work / "shoal", values, t0)
    print(f"# shoal loaded in {time.perf_counter() - t:.1f}s", flush=True)
    cases = [("range, 1 day, step 60 s", "query_range",
              {"query": QUERY, "start": t0, "end": end, "step": 60}),
             ("instant", "query", {"query": QUERY, "time": end})]
    t = time.perf_counter()
    with prometheus_server(work / "prom", backfill_text=om_text) as prom, \
            start_server(work / "shoal", extra_args=["--lazy-spark"]) as shoal:
        print(f"# Prometheus backfilled + both servers up in {time.perf_counter() - t:.1f}s",
              flush=True)
        print(f"\nx86_64 {platform.python_version()}, {os.cpu_count()} cores, load "
              f"{os.getloadavg()[0]:.2f}\n")
        print("| query | Prometheus median s | shoal median s | ratio |")
        print("|---|---|---|---|")
        # one keep-alive client per server: a fresh httpx client per request costs ~25 ms
        # (its TLS context) on either side, more than an instant query itself
        prom_http = httpx.Client(base_url=prom.url, timeout=600)
        shoal_http = httpx.Client(base_url=shoal.url, timeout=600)
        for name, path, params in cases:
            for _ in range(2):                               # warm-up, and the answers
                _, want = timed(prom_http, path, params)
                _, got = timed(shoal_http, path, params)
            assert len(got["result"]) == len(want["result"]) == 10
            p_times, s_times = [], []
            for _ in range(args.repeat):
                p_times.append(timed(prom_http, path, params)[0])
                s_times.append(timed(shoal_http, path, params)[0])
            p, s = statistics.median(p_times), statistics.median(s_times)
            print(f"| {name} | {p:.3f} | {s:.3f} | {s / p:.2f}x |", flush=True)
        prom_http.close()
        shoal_http.close()


if __name__ == "__main__":
    main()
