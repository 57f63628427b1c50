"""A fixed Prometheus history for differential tests: the same samples as OpenMetrics text
(for `promtool` backfill into a real Prometheus) and remote-written into shoal (`load_samples`).

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

import cramjam
import httpx

from shoal.frontends.prometheus.remote_write_pb2 import WriteRequest
from shoal.types.prometheus import NAME_LABEL

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


REMOTE_WRITE_HEADERS = {"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
                        "X-Prometheus-Remote-Write-Version": "0.1.0"}


def write_request(*series: tuple[dict[str, str], list[tuple[int, float]]]) -> WriteRequest:
    """A remote write 1.0 `WriteRequest` of (labels incl. __name__, [(ts_ms, value)]) series,
    labels sorted by name as Prometheus sends them."""
    req = WriteRequest()
    for labels, points in series:
        ts = req.timeseries.add()
        for name, value in sorted(labels.items()):
            ts.labels.add(name=name, value=value)
        for t, v in points:
            ts.samples.add(timestamp=t, value=v)
    return req


def snappy(req: WriteRequest | bytes) -> bytes:
    """The body of a remote write: the serialized request, snappy block format."""
    raw = req if isinstance(req, bytes) else req.SerializeToString()
    return bytes(cramjam.snappy.compress_raw(raw))


def load_samples(url: str, rows: list[Sample], *, headers: dict[str, str] | None = None,
                 per_request: int = 10_000) -> None:
    """Remote-write `rows` into shoal (`POST /api/v1/write`, into `prom_samples`), as
    Prometheus sends them: each request a `WriteRequest` of whole series, samples in time
    order, at most `per_request` samples (the receiver takes up to 100,000)."""
    by_series: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
    for ts, labels, value in rows:
        by_series.setdefault(tuple(sorted(labels.items())), []).append((ts, value))
    batch: list[tuple[dict[str, str], list[tuple[int, float]]]] = []
    size = 0
    with httpx.Client(base_url=url, headers={**REMOTE_WRITE_HEADERS, **(headers or {})},
                      timeout=120) as http:
        def send() -> None:
            r = http.post("/api/v1/write", content=snappy(write_request(*batch)))
            assert r.status_code == 204, r.text
            batch.clear()

        for key, points in by_series.items():
            points.sort()
            for start in range(0, len(points), per_request):
                part = points[start:start + per_request]
                if size + len(part) > per_request and batch:
                    send()
                    size = 0
                batch.append((dict(key), part))
                size += len(part)
        if batch:
            send()
