"""The OTLP metrics table (`config.otlp_metrics_table`) as PromQL series, as Prometheus's
OTLP receiver translates OTLP (without its unit and type suffixes).

- Prefix: by default (`promql_otlp_metrics = prefixed`) every name gets `otel_` in front
  (`otel_http_server_duration`), so OTLP metrics never mix with Prometheus's own series of
  the same name; `bare` leaves the names as below, `off` keeps the table out of PromQL.
- Names: every character outside `[a-zA-Z0-9_:]` becomes `_` (`http.server.duration` ->
  `http_server_duration`); a leading digit gets a `_` prefix. Label names likewise, minus
  `:`.
- Labels: the point's attributes (nested JSON flattened back to dotted keys, then
  sanitised), `job` = the resource's `service.name` (`service_name`), `instance` = the
  resource's `service.instance.id` when present. Non-string attribute values as JSON text.
- Gauges -> a series of that name. Sums with CUMULATIVE temporality (monotonic ones are
  counters) -> a series of that name. Explicit-bucket histograms with CUMULATIVE temporality
  -> `<name>_bucket{le="..."}` (cumulative counts, `+Inf` = the count), `<name>_sum`,
  `<name>_count`. Summaries -> `<name>{quantile="..."}`, `<name>_sum`, `<name>_count`.
- Not mapped: DELTA sums and histograms (PromQL's functions expect cumulative counters),
  exponential histograms (native histograms in Prometheus), exemplars, start timestamps
  (no synthetic zero samples at a series' start), metadata (description, unit).

Rows are read through the pruning cascade with `name IN (...)` and the time bounds; the
mapping then runs per row in Python, so this source suits modest OTLP volumes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np

from shoal.format.base import And, InSet, TimeRange
from shoal.lru import MISSING, Lru
from shoal.frontends.prometheus.promql.model import (NAME, Labels, RawSeries, format_value,
                                                     make_labels)

_BAD_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_BAD_LABEL = re.compile(r"[^a-zA-Z0-9_]")
_decode = msgspec.json.Decoder().decode
OTLP_PREFIX = "otel_"
_COLUMNS = ["_timestamp", "service_name", "name", "metric_type", "aggregation_temporality",
            "value", "count", "sum", "bucket_counts", "explicit_bounds", "quantiles",
            "attributes", "resource"]


def metric_name(name: str, prefix: str = "") -> str:
    out = prefix + _BAD_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def label_name(name: str) -> str:
    out = _BAD_LABEL.sub("_", name)
    return "key_" + out if out[:1].isdigit() else out


def _flat(doc: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif prefix:
        if isinstance(doc, str):
            yield prefix, doc
        elif doc is not None:
            yield prefix, msgspec.json.encode(doc).decode()


def _json(value: Any) -> Any:
    if isinstance(value, (bytes, str)):
        return _decode(value)
    return value


def names_of(name: str, kind: str | None, temporality: str | None, prefix: str = ""
             ) -> list[str]:
    """The PromQL names an OTLP metric becomes (none when it is not mapped)."""
    base = metric_name(name, prefix)
    if kind == "gauge":
        return [base]
    if kind == "sum" and temporality == "CUMULATIVE":
        return [base]
    if kind == "histogram" and temporality == "CUMULATIVE":
        return [base + "_bucket", base + "_sum", base + "_count"]
    if kind == "summary":
        return [base, base + "_sum", base + "_count"]
    return []


class OtlpSeriesSource:
    """Reads `table` (OTLP metrics layout) through `read(table, predicate, ...)`."""

    def __init__(self, read: Any, table: str, *, prefix: str = "") -> None:
        self.read = read
        self.table = table
        self.prefix = prefix
        self._names = Lru(4 << 20)

    def names(self, snapshot: int, lo_ms: int, hi_ms: int) -> dict[str, set[str]]:
        """PromQL name -> the OTLP names it comes from, for points in [lo, hi] (cached per
        snapshot and bounds)."""
        key = (snapshot, lo_ms, hi_ms)
        hit = self._names.get(key)
        if hit is not MISSING:
            return dict(hit)
        out = self._read_names(snapshot, lo_ms, hi_ms)
        self._names.put(key, out, 256 + 64 * len(out))
        return dict(out)

    def _read_names(self, snapshot: int, lo_ms: int, hi_ms: int) -> dict[str, set[str]]:
        t, _ = self.read(self.table, TimeRange(lo_ms * 1_000_000, hi_ms * 1_000_000),
                         snapshot_id=snapshot,
                         columns=["name", "metric_type", "aggregation_temporality"])
        out: dict[str, set[str]] = {}
        for row in t.group_by(["name", "metric_type", "aggregation_temporality"]
                              ).aggregate([]).to_pylist():
            for prom in names_of(row["name"] or "", row["metric_type"],
                                 row["aggregation_temporality"], self.prefix):
                out.setdefault(prom, set()).add(row["name"])
        return out

    def series(self, snapshot: int, otlp_names: Sequence[str], lo_ms: int, hi_ms: int
               ) -> list[RawSeries]:
        """Every series the points of `otlp_names` in [lo, hi] map to."""
        if not otlp_names:
            return []
        pred = And((InSet("name", tuple(sorted(otlp_names))),
                    TimeRange(lo_ms * 1_000_000, hi_ms * 1_000_000)))
        t, _ = self.read(self.table, pred, snapshot_id=snapshot, columns=_COLUMNS)
        samples: dict[Labels, list[tuple[int, float]]] = {}
        for row in t.to_pylist():
            ts = row["_timestamp"]
            ms = (ts if isinstance(ts, int) else int(ts.timestamp() * 1_000_000_000)
                  ) // 1_000_000
            if not lo_ms <= ms <= hi_ms:
                continue
            for labels, value in _points(row, self.prefix):
                samples.setdefault(labels, []).append((ms, value))
        out = []
        for labels, points in samples.items():
            points.sort()
            ts_arr = np.array([p[0] for p in points], dtype=np.int64)
            val = np.array([p[1] for p in points], dtype=np.float64)
            keep = np.append(ts_arr[1:] != ts_arr[:-1], True)   # one sample per time
            out.append(RawSeries(labels, ts_arr[keep], val[keep],
                                 np.zeros(int(keep.sum()), dtype=bool)))
        return out


def _points(row: dict[str, Any], prefix: str) -> Iterator[tuple[Labels, float]]:
    base: dict[str, str] = {label_name(k): v for k, v in _flat(_json(row["attributes"]))}
    if row["service_name"]:
        base["job"] = row["service_name"]
    resource = _json(row["resource"]) or {}
    instance = dict(_flat(resource)).get("service.instance.id")
    if instance:
        base["instance"] = instance
    name = metric_name(row["name"] or "", prefix)
    kind, temporality = row["metric_type"], row["aggregation_temporality"]

    def series(metric: str, **extra: str) -> Labels:
        return make_labels({**base, **extra, NAME: metric})

    if kind == "gauge" or (kind == "sum" and temporality == "CUMULATIVE"):
        if row["value"] is not None:
            yield series(name), float(row["value"])
    elif kind == "histogram" and temporality == "CUMULATIVE":
        counts = _json(row["bucket_counts"]) or []
        bounds = _json(row["explicit_bounds"]) or []
        running = 0.0
        for bound, count in zip(bounds, counts, strict=False):
            running += float(count)
            yield series(name + "_bucket", le=format_value(float(bound))), running
        if row["count"] is not None:
            yield series(name + "_bucket", le="+Inf"), float(row["count"])
            yield series(name + "_count"), float(row["count"])
        if row["sum"] is not None:
            yield series(name + "_sum"), float(row["sum"])
    elif kind == "summary":
        for q in _json(row["quantiles"]) or []:
            if q.get("quantile") is not None and q.get("value") is not None:
                yield series(name, quantile=format_value(float(q["quantile"]))), float(
                    q["value"])
        if row["count"] is not None:
            yield series(name + "_count"), float(row["count"])
        if row["sum"] is not None:
            yield series(name + "_sum"), float(row["sum"])
