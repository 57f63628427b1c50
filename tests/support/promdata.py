"""A fixed Prometheus history for differential tests: the same samples as OpenMetrics text
(for `promtool` backfill into a real Prometheus) and as shoal rows (`load_samples`).

Counters with a reset, gauges, a classic histogram with several buckets across several
series, job/instance labels, an info metric for `group_left`, a gauge series that stops
half-way (no staleness marker: the lookback delta ends it) and gauges with NaN, +Inf and
-Inf samples, at 15 s resolution.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import msgspec

from shoal.types.prometheus import (NAME_LABEL, PROM_SAMPLES_SCHEMA, series_id, series_key,
                                    split_value)

Sample = tuple[int, dict[str, str], float]     # (ts_ms, labels incl. __name__, value)


@dataclass
class Family:
    name: str
    kind: str                                    # counter | gauge | histogram
    series: list[tuple[dict[str, str], list[tuple[int, float]]]]   # (labels, samples)


def history(t0_s: int, *, minutes: int = 60, step_s: int = 15, seed: int = 7) -> list[Family]:
    rng = random.Random(seed)
    n = minutes * 60 // step_s
    times = [(t0_s + i * step_s) * 1000 for i in range(n)]
    targets = [("api", "i1"), ("api", "i2"), ("web", "i1"), ("web", "i2")]
    counter = []
    for k, (job, inst) in enumerate(targets):
        value, points = 0.0, []
        for i, t in enumerate(times):
            if k == 1 and i == n // 2:
                value = 0.0                         # a counter reset half-way
            value += rng.randint(0, 40) + (0.25 if i % 3 == 0 else 0.0)
            points.append((t, value))
        counter.append(({"job": job, "instance": inst}, points))
    gauges = []
    for k, (job, inst) in enumerate(targets + [("web", "i3")]):
        stop = n // 2 if inst == "i3" else n        # i3 stops half-way
        points = [(t, round(20 + 5 * k + rng.uniform(-3, 3), 3)) for t in times[:stop]]
        gauges.append(({"job": job, "instance": inst}, points))
    info = [({"job": "api", "team": "red"}, [(t, 1.0) for t in times]),
            ({"job": "web", "team": "blue"}, [(t, 1.0) for t in times])]
    bounds = ["0.1", "0.5", "1", "5", "+Inf"]
    hist = []
    for job, inst in targets:
        counts = [0.0] * len(bounds)
        total, series = 0.0, {b: [] for b in [*bounds, "sum", "count"]}
        for t in times:
            for _ in range(rng.randint(0, 12)):
                obs = rng.expovariate(1.2)
                total += obs
                for j, b in enumerate(bounds):
                    if obs <= float(b):
                        counts[j] += 1
            for j, b in enumerate(bounds):
                series[b].append((t, counts[j]))
            series["sum"].append((t, round(total, 6)))
            series["count"].append((t, counts[-1]))
        for b in bounds:
            hist.append(({"__suffix__": "_bucket", "job": job, "instance": inst, "le": b},
                         series[b]))
        hist.append(({"__suffix__": "_sum", "job": job, "instance": inst}, series["sum"]))
        hist.append(({"__suffix__": "_count", "job": job, "instance": inst}, series["count"]))
    odd = [({"job": "api", "instance": "i1"},
            [(t, math.nan if i % 7 == 3 else float(i % 5)) for i, t in enumerate(times)]),
           ({"job": "web", "instance": "i1"},
            [(t, math.inf if i % 11 == 4 else -math.inf if i % 13 == 6 else float(i % 4))
             for i, t in enumerate(times)])]
    return [Family("http_requests", "counter", counter), Family("temperature", "gauge", gauges),
            Family("job_info", "gauge", info), Family("odd", "gauge", odd),
            Family("request_duration_seconds", "histogram", hist)]


def _sample_name(family: Family, labels: dict[str, str]) -> str:
    if family.kind == "counter":
        return family.name + "_total"
    return family.name + labels.get("__suffix__", "")


def samples(families: list[Family]) -> Iterator[Sample]:
    for f in families:
        for labels, points in f.series:
            full = {k: v for k, v in labels.items() if k != "__suffix__"}
            full[NAME_LABEL] = _sample_name(f, labels)
            for t, v in points:
                yield t, full, v


def openmetrics(families: list[Family]) -> str:
    """The history as OpenMetrics text with timestamps (what promtool backfills)."""
    lines: list[str] = []
    for f in families:
        lines.append(f"# TYPE {f.name} {f.kind}")
        for labels, points in f.series:
            name = _sample_name(f, labels)
            inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())
                             if k != "__suffix__")
            for t, v in points:
                lines.append(f"{name}{{{inner}}} {_text(v)} {t / 1000:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def load_samples(url: str, rows: list[Sample], *, table: str = "prom_samples",
                 headers: dict[str, str] | None = None, chunk: int = 20_000) -> None:
    """Write `rows` into shoal's Prometheus table over HTTP (one place to switch to remote
    write: today NDJSON through `/v1/ingest`, rows laid out as `PROM_SAMPLES_SCHEMA`)."""
    with httpx.Client(base_url=url, headers=headers or {}, timeout=120) as http:
        columns = [{"name": c.name, "type": c.type.kind}
                   for c in PROM_SAMPLES_SCHEMA.columns if c.name not in ("_timestamp", "props")]
        r = http.post("/v1/tables", json={"name": table, "columns": columns, "mode": "drop"})
        assert r.status_code in (201, 409), r.text
        encode = msgspec.json.Encoder().encode
        for start in range(0, len(rows), chunk):
            body = bytearray()
            for ts, labels, value in rows[start:start + chunk]:
                metric = labels.get(NAME_LABEL, "")
                rest = {k: v for k, v in labels.items() if k != NAME_LABEL}
                key = series_key(metric, rest)
                val, special = split_value(value)
                body += encode({"_timestamp": ts * 1_000_000, "metric": metric, "labels": rest,
                                "series": key, "series_id": series_id(key), "value": val,
                                "special": special})
                body += b"\n"
            r = http.post(f"/v1/ingest/{table}", content=bytes(body))
            assert r.status_code == 200, r.text
