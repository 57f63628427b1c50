"""Prometheus remote write 1.0: a request body -> Arrow rows in shoal's Prometheus layout.

    decode_write(body, max_bytes)  snappy block format -> `prometheus.WriteRequest` (protobuf)
    map_write(request)             -> `MappedWrite`: a samples batch and a metadata batch

The layout of both tables is `shoal.types.prometheus`'s; rows come from its `SampleRows`.

- Snappy is the *block* format (remote write does not use the framed format). Its header
  declares the decoded size, which is checked against `max_bytes` before anything is
  decoded: a snappy bomb costs a 413, never `max_bytes` of memory it was not allowed.
- Each sample is one row. NaN, +Inf, -Inf and Prometheus's staleness marker go to `special`
  with a null `value` (shoal's `real` holds finite numbers only).
- A native histogram sample is one row whose `histogram` is a JSON object of its fields
  (`count`, `sum`, `schema`, `zero_threshold`, `zero_count`, `negative_spans`/`_deltas`/
  `_counts`, `positive_...`, `reset_hint`, `custom_values`; the spans as `[offset, length]`
  pairs, integer histograms keep their bucket deltas, float ones their counts, and a
  non-finite float inside is the string `NaN`/`+Inf`/`-Inf`). A histogram whose sum is the
  staleness marker is a staleness marker: `special = "stale"`, no `histogram`.
- Exemplars are dropped (counted in `MappedWrite.exemplars_dropped`): shoal has no exemplar
  table yet, and remote write lets a receiver ignore them.
- Metadata (`MetricMetadata`) becomes one row per entry: `metric`, `type` (lower case:
  `counter`, `gauge`, ...), `help`, `unit`; its `_timestamp` is the time it was ingested.

Before the decoded body is parsed, its wire format is checked (`shoal.frontends.protobounds`):
at most `MAX_LABELS` labels in one series or exemplar and `MAX_ELEMENTS` sub-messages
(series, labels, samples, exemplars, histograms, metadata, ...) in one request, else 413
(`TooManyElementsError`) naming the field and the bound: an empty series or sample is two
bytes on the wire and a hundred once parsed. A request of more than `MAX_SAMPLES` samples,
histogram samples and metadata entries is refused (413, `TooManySamplesError`), which
bounds the memory one request can take. A body that cannot be read is a `RemoteWriteError`
(400: Prometheus drops the batch rather than retrying it forever) naming what and where:
bad snappy, bad protobuf, a series without labels or with an empty or repeated label name,
a timestamp outside shoal's range. Checks run before anything is written, so a 400 or 413
writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cramjam
import pyarrow as pa
from google.protobuf.message import DecodeError

from shoal.errors import IngestError, PayloadTooLargeError
from shoal.frontends.protobounds import check_bounds
from shoal.frontends.prometheus.remote_write_pb2 import (Histogram, MetricMetadata,
                                                         WriteRequest)
from shoal.types.prometheus import PROM_METADATA_SCHEMA, SampleRows, is_stale

# shoal timestamps are int64 nanoseconds: milliseconds beyond this overflow them.
MAX_TIMESTAMP_MS = (2**63 - 1) // 1_000_000
# Samples (and histogram samples) one request may hold. A row costs ~1 KB of Python objects
# while the batch is built, against ~15-30 bytes of protobuf: without a count cap a body
# under the byte cap could take gigabytes. Prometheus sends `max_samples_per_send` (500 to
# 2,000 by default) a request, so the cap only ever refuses a misconfigured sender.
MAX_SAMPLES = 100_000
# Labels of one series (Prometheus's own series have tens) and sub-messages of one request
# (100,000 samples in series of ~15 labels fit).
MAX_LABELS = 1024
MAX_ELEMENTS = 2_000_000
_METADATA_COLUMNS = ("metric", "type", "help", "unit")


class RemoteWriteError(IngestError):
    """A remote write request that cannot be read (400); nothing of it was written."""

    code = "bad_remote_write"


class TooManySamplesError(PayloadTooLargeError):
    """A request with more rows than `MAX_SAMPLES` (413); nothing of it was written."""

    code = "too_many_samples"

    def __init__(self, count: int, limit: int) -> None:
        self.size = count
        self.limit = limit
        IngestError.__init__(self, f"the request holds more than {limit:,} samples, the most "
                                   "one remote write request may hold (lower the sender's "
                                   "queue_config.max_samples_per_send)")


@dataclass(frozen=True)
class MappedWrite:
    samples: pa.RecordBatch          # PROM_SAMPLES_SCHEMA's columns (with `_timestamp`)
    metadata: pa.RecordBatch         # PROM_METADATA_SCHEMA's columns
    exemplars_dropped: int = 0


def decode_write(body: bytes, *, max_bytes: int) -> WriteRequest:
    """The `WriteRequest` in a snappy-compressed body, decoded to at most `max_bytes`."""
    try:
        declared = cramjam.snappy.decompress_raw_len(body)
    except cramjam.DecompressionError as e:
        raise RemoteWriteError(f"body is not valid snappy (block format): {e}") from None
    if declared > max_bytes:
        raise PayloadTooLargeError(declared, max_bytes)
    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as e:
        raise RemoteWriteError(f"body is not valid snappy (block format): {e}") from None
    check_bounds(raw, WriteRequest, per_field={"labels": MAX_LABELS},
                 max_elements=MAX_ELEMENTS)
    request = WriteRequest()
    try:
        request.ParseFromString(raw)
    except DecodeError as e:
        raise RemoteWriteError(f"body is not a protobuf prometheus.WriteRequest: {e}") from None
    return request


def map_write(request: WriteRequest) -> MappedWrite:
    """Rows of every sample, histogram sample and metadata entry; `RemoteWriteError` for the
    first series or entry that cannot be stored (the whole request is mapped before any of
    it is written, so a refusal writes nothing)."""
    rows = SampleRows()
    exemplars = 0
    total = len(request.metadata)
    for i, series in enumerate(request.timeseries):
        total += len(series.samples) + len(series.histograms)
        if total > MAX_SAMPLES:           # before the rows are built: memory stays bounded
            raise TooManySamplesError(total, MAX_SAMPLES)
        labels = _labels(i, series.labels)
        for j, sample in enumerate(series.samples):
            rows.add(_ts(i, "samples", j, sample.timestamp), labels, sample.value)
        for j, hist in enumerate(series.histograms):
            ts = _ts(i, "histograms", j, hist.timestamp)
            if is_stale(hist.sum):
                rows.add(ts, labels, hist.sum)
            else:
                rows.add_histogram(ts, labels, histogram_fields(hist))
        exemplars += len(series.exemplars)
    return MappedWrite(rows.batch(), _metadata(request), exemplars_dropped=exemplars)


def _labels(i: int, pairs: Any) -> dict[str, str]:
    labels = {label.name: label.value for label in pairs}
    if len(labels) == len(pairs) and "" not in labels and any(labels.values()):
        return labels                       # the usual case, checked in one pass
    if not pairs:
        raise RemoteWriteError(f"timeseries[{i}]: a series without labels")
    if "" in labels:
        raise RemoteWriteError(f"timeseries[{i}]: a label with an empty name")
    if len(labels) != len(pairs):
        seen: set[str] = set()
        for label in pairs:
            if label.name in seen:
                raise RemoteWriteError(f"timeseries[{i}]: label {label.name!r} appears twice")
            seen.add(label.name)
    raise RemoteWriteError(f"timeseries[{i}]: every label value is empty")


def _ts(i: int, field: str, j: int, ts_ms: int) -> int:
    if not -MAX_TIMESTAMP_MS <= ts_ms <= MAX_TIMESTAMP_MS:
        raise RemoteWriteError(f"timeseries[{i}].{field}[{j}]: timestamp {ts_ms} ms is "
                               "outside the range shoal stores (years 1677-2262)")
    return ts_ms


def _number(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf")


def histogram_fields(h: Histogram) -> dict[str, Any]:
    """A native histogram's fields as a JSON-able object (see the module docstring)."""
    integer = h.WhichOneof("count") != "count_float"
    out: dict[str, Any] = {
        "count": h.count_int if integer else _number(h.count_float),
        "sum": _number(h.sum), "schema": h.schema,
        "zero_threshold": _number(h.zero_threshold),
        "zero_count": (h.zero_count_int if h.WhichOneof("zero_count") != "zero_count_float"
                       else _number(h.zero_count_float)),
        "reset_hint": _enum_name(Histogram.ResetHint, h.reset_hint),
    }
    for side in ("negative", "positive"):
        spans = getattr(h, f"{side}_spans")
        out[f"{side}_spans"] = [[s.offset, s.length] for s in spans]
        if integer:
            out[f"{side}_deltas"] = list(getattr(h, f"{side}_deltas"))
        else:
            out[f"{side}_counts"] = [_number(c) for c in getattr(h, f"{side}_counts")]
    if h.custom_values:
        out["custom_values"] = [_number(v) for v in h.custom_values]
    return out


def _enum_name(enum: Any, value: int) -> str:
    """The lower-case name of an enum value; `unknown` for a number this version lacks
    (proto3 enums are open: a newer sender may use one)."""
    try:
        return str(enum.Name(value)).lower()
    except ValueError:
        return "unknown"


def _metadata(request: WriteRequest) -> pa.RecordBatch:
    fields = [PROM_METADATA_SCHEMA.column(n).arrow_field() for n in _METADATA_COLUMNS]
    cols: list[list[str | None]] = [[], [], [], []]
    for i, meta in enumerate(request.metadata):
        if not meta.metric_family_name:
            raise RemoteWriteError(f"metadata[{i}]: no metric_family_name")
        cols[0].append(meta.metric_family_name)
        cols[1].append(_enum_name(MetricMetadata.MetricType, meta.type))
        cols[2].append(meta.help or None)
        cols[3].append(meta.unit or None)
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, fields,
                                                                                 strict=True)],
                                      schema=pa.schema(fields))
