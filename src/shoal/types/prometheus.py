"""The layout of Prometheus-shaped metrics in shoal: one row per sample.

Remote write (`POST /api/v1/write`) and shoal's own scraper land samples in the table
`prometheus_table` (config; default `prom_samples`), created on first use in mode `drop`:

| column       | type      | holds                                                          |
|--------------|-----------|----------------------------------------------------------------|
| `_timestamp` | timestamp | the sample's time (Prometheus's milliseconds, exactly; ns type)|
| `metric`     | string    | the metric name (label `__name__`; "" when a series has none)  |
| `labels`     | dynamic   | every other label, a flat JSON object of strings               |
| `series`     | string    | the series' canonical text: `name{a="x",b="y"}`, labels sorted |
| `series_id`  | long      | a 64-bit hash of `series` (`series_id()`), for grouping        |
| `value`      | real      | the sample value; null when it is not a finite number          |
| `special`    | string    | null, or what a non-finite value was: `NaN`, `+Inf`, `-Inf`,   |
|              |           | `stale` (Prometheus's staleness marker, a NaN of its own bits) |
| `histogram`  | dynamic   | a native histogram sample (remote write's `Histogram`), else   |
|              |           | null; classic histograms are plain `_bucket` series            |

Why this shape: PromQL selects by metric name first (equality on `metric` prunes extents by
their membership filters and min/max), then by time (`_timestamp` min/max), then by label
matchers, which are answered once per series (`series_id` -> `labels`), not once per sample;
the samples themselves are read as (`series_id`, `_timestamp`, `value`, `special`) only.
shoal's `real` holds finite numbers only, hence `special`; `join_value()` rebuilds the float.

Metadata (remote write's `MetricMetadata`, a scrape's `# TYPE`/`# HELP`/`# UNIT`) lands in
`prometheus_metadata_table` (default `prom_metadata`): `metric`, `type`, `help`, `unit`, one
row per metric each time it is sent; the newest row per metric is the answer.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

import msgspec
import pyarrow as pa
import xxhash

from shoal.types.columns import DYNAMIC, LONG, REAL, STRING
from shoal.types.schema import Column, Schema

NAME_LABEL = "__name__"

PROM_SAMPLES_SCHEMA = Schema.create([
    Column("metric", STRING),
    Column("labels", DYNAMIC),
    Column("series", STRING),
    Column("series_id", LONG),
    Column("value", REAL),
    Column("special", STRING),
    Column("histogram", DYNAMIC),
])

PROM_METADATA_SCHEMA = Schema.create([
    Column("metric", STRING),
    Column("type", STRING),
    Column("help", STRING),
    Column("unit", STRING),
])

# Prometheus's staleness marker: a NaN with these exact bits (value.StaleNaN).
STALE_NAN_BITS = 0x7FF0000000000002
STALE = "stale"
SPECIALS = ("NaN", "+Inf", "-Inf", STALE)

_encode_json = msgspec.json.Encoder().encode
_SAMPLE_COLUMNS = ("_timestamp", "metric", "labels", "series", "series_id", "value",
                   "special", "histogram")


def escape_label_value(value: str) -> str:
    """A label value as the text exposition format writes it inside double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def series_key(metric: str, labels: Mapping[str, str]) -> str:
    """The canonical text of a series: `name{a="x",b="y"}`, labels sorted by name, empty
    label values left out (Prometheus treats an empty value as an absent label)."""
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items())
                     if v != "" and k != NAME_LABEL)
    return f"{metric}{{{inner}}}"


def series_id(key: str) -> int:
    """A signed 64-bit id of a series' canonical text (xxh64; signed to fit `long`)."""
    hashed: int = struct.unpack("<q", xxhash.xxh64_digest(key.encode()))[0]
    return hashed


def is_stale(value: float) -> bool:
    return math.isnan(value) and struct.unpack("<Q", struct.pack("<d", value))[0] == STALE_NAN_BITS


def split_value(value: float) -> tuple[float | None, str | None]:
    """(`value`, `special`) columns of one sample value."""
    if math.isfinite(value):
        return value, None
    if math.isnan(value):
        return None, STALE if is_stale(value) else "NaN"
    return None, "+Inf" if value > 0 else "-Inf"


_STALE_FLOAT = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
_FROM_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, STALE: _STALE_FLOAT}


def join_value(value: float | None, special: str | None) -> float:
    """The sample's float from its (`value`, `special`) columns; a null without `special`
    (a histogram sample) is NaN."""
    if special is not None:
        return _FROM_SPECIAL[special]
    return math.nan if value is None else value


class SampleRows:
    """Accumulates samples and builds one Arrow batch in `PROM_SAMPLES_SCHEMA`'s fields.

    `add(ts_ms, labels, value)` takes the labels as Prometheus has them (`__name__`
    included); the series text, id and JSON are computed once per distinct label set.
    `series_cache` (a dict the caller keeps) carries those across batches, for a caller that
    sees the same series again and again (a scraper: the same target every interval)."""

    def __init__(self, *, series_cache: dict[tuple[tuple[str, str], ...],
                                             tuple[str, bytes, str, int]] | None = None
                 ) -> None:
        self._rows: list[tuple[Any, ...]] = []
        self._series: dict[tuple[tuple[str, str], ...], tuple[str, bytes, str, int]] = (
            {} if series_cache is None else series_cache)

    def __len__(self) -> int:
        return len(self._rows)

    def _head(self, labels: Mapping[str, str]) -> tuple[str, bytes, str, int]:
        items = tuple(sorted((k, v) for k, v in labels.items() if v != ""))
        head = self._series.get(items)
        if head is None:
            metric = labels.get(NAME_LABEL, "")
            rest = {k: v for k, v in items if k != NAME_LABEL}
            key = series_key(metric, rest)
            head = (metric, _encode_json(rest), key, series_id(key))
            self._series[items] = head
        return head

    def add(self, ts_ms: int, labels: Mapping[str, str], value: float) -> None:
        value_col, special = split_value(value)
        self._rows.append((ts_ms * 1_000_000, *self._head(labels), value_col, special, None))

    def add_histogram(self, ts_ms: int, labels: Mapping[str, str],
                      histogram: Mapping[str, Any]) -> None:
        """A native histogram sample (a JSON-able mapping of its fields)."""
        self._rows.append((ts_ms * 1_000_000, *self._head(labels), None, None,
                           _encode_json(dict(histogram))))

    def batch(self) -> pa.RecordBatch:
        fields = [PROM_SAMPLES_SCHEMA.column(n).arrow_field() for n in _SAMPLE_COLUMNS]
        columns = list(zip(*self._rows, strict=True)) if self._rows else [()] * len(fields)
        ts_field = fields[0]
        arrays = [pa.array(columns[0], type=pa.int64()).cast(ts_field.type)]
        arrays += [pa.array(c, type=f.type) for c, f in zip(columns[1:], fields[1:],
                                                             strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
