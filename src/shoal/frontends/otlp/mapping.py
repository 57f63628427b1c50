"""OTLP export requests -> Arrow rows of the standard tables (schemas in `schemas.py`).

`map_request(signal, request)` turns one decoded `Export{Logs,Trace,Metrics}ServiceRequest`
into a `Mapped`: one `pa.RecordBatch` (fields typed as the standard schema, so `dynamic`
columns carry their metadata) plus the records refused, each as a `LineError` whose `line`
is the record's 1-based position in the request (log records, spans, or data points, in
request order). One row per log record, per span, per metric data point.

Refused (reported through OTLP partial success, the rest is written):
- a span whose trace id is not 16 bytes or span id not 8 bytes, or either is all zeros, or
  whose parent span id is neither empty nor 8 bytes;
- a log record whose trace id / span id is neither empty nor 16 / 8 bytes;
- every data point of a metric without a name.

Values: see `values.py` for ids, attributes and `AnyValue`. A time of 0 (unset) is null, and
`_timestamp` null gets the ingest time in the write path (logs fall back to the observed
time first). Non-finite doubles (`NaN`, `Inf`) in `value`, `sum`, `min`, `max` are null:
shoal's `real` holds finite numbers only. Integer metric values are stored as `real`
(exact up to 2^53).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shoal.errors import LineError
from shoal.frontends.otlp.schemas import (LOGS_SCHEMA, METRICS_SCHEMA, SPANS_SCHEMA, Signal)
from shoal.frontends.otlp.values import (attributes, attributes_json, body_text, hex_id,
                                         service_name, to_json)
from shoal.types.schema import Schema


@dataclass(frozen=True)
class Mapped:
    batch: pa.RecordBatch
    rejected: list[LineError] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.batch.num_rows + len(self.rejected)


_KIND = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER",
         5: "CONSUMER"}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
_TEMPORALITY = {0: "UNSPECIFIED", 1: "DELTA", 2: "CUMULATIVE"}
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


def _batch(schema: Schema, names: Sequence[str], rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    fields = [schema.column(n).arrow_field() for n in names]
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, fields, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _reject(out: list[LineError], n: int, what: str, fld: str | None, message: str) -> None:
    out.append(LineError(n, fld, f"{what} {n}: {message}"))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _scoped(resources: Any, scopes_field: str, items_field: str
            ) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every item of a request (log record, span, metric) with its scope context:
    (service_name, resource JSON, scope name, scope version), computed once per resource."""
    for r in resources:
        res_attrs = r.resource.attributes
        svc, res = service_name(res_attrs), attributes_json(res_attrs)
        for s in getattr(r, scopes_field):
            context = (svc, res, s.scope.name or None, s.scope.version or None)
            for item in getattr(s, items_field):
                yield context, item


def map_request(signal: Signal, request: Any) -> Mapped:
    if signal == "logs":
        return map_logs(request)
    if signal == "traces":
        return map_spans(request)
    return map_metrics(request)


# ---- logs ----------------------------------------------------------------------------------
_LOG_COLUMNS = ("_timestamp", "observed_timestamp", "service_name", "severity_number",
                "severity_text", "body", "event_name", "trace_id", "span_id", "flags",
                "attributes", "resource", "scope_name", "scope_version")


def map_logs(request: Any) -> Mapped:
    rows: list[tuple[Any, ...]] = []
    rejected: list[LineError] = []
    records = _scoped(request.resource_logs, "scope_logs", "log_records")
    for n, ((svc, res, scope_name, scope_version), lr) in enumerate(records, 1):
        tid, sid = lr.trace_id, lr.span_id
        if tid and len(tid) != 16:
            _reject(rejected, n, "log record", "trace_id",
                    f"trace_id must be 16 bytes, got {len(tid)}")
            continue
        if sid and len(sid) != 8:
            _reject(rejected, n, "log record", "span_id",
                    f"span_id must be 8 bytes, got {len(sid)}")
            continue
        observed = lr.observed_time_unix_nano or None
        rows.append((
            lr.time_unix_nano or observed, observed, svc, lr.severity_number or None,
            lr.severity_text or None,
            body_text(lr.body) if lr.HasField("body") else None,
            lr.event_name or None,
            None if tid == _ZERO_TRACE else hex_id(tid),
            None if sid == _ZERO_SPAN else hex_id(sid),
            lr.flags, attributes_json(lr.attributes), res, scope_name, scope_version))
    return Mapped(_batch(LOGS_SCHEMA, _LOG_COLUMNS, rows), rejected)


# ---- spans ---------------------------------------------------------------------------------
_SPAN_COLUMNS = ("_timestamp", "trace_id", "span_id", "parent_span_id", "trace_state",
                 "service_name", "name", "kind", "end_timestamp", "duration_ns", "status_code",
                 "status_message", "flags", "attributes", "events", "links", "resource",
                 "scope_name", "scope_version")


def _events(events: Any) -> bytes | None:
    if not events:
        return None
    return to_json([{"timestamp": e.time_unix_nano or None, "name": e.name,
                     "attributes": attributes(e.attributes)} for e in events])


def _links(links: Any) -> bytes | None:
    if not links:
        return None
    out = []
    for ln in links:
        doc: dict[str, Any] = {"trace_id": hex_id(ln.trace_id), "span_id": hex_id(ln.span_id)}
        if ln.trace_state:
            doc["trace_state"] = ln.trace_state
        doc["attributes"] = attributes(ln.attributes)
        doc["flags"] = ln.flags
        out.append(doc)
    return to_json(out)


def _span_problem(sp: Any) -> tuple[str, str] | None:
    tid, sid, pid = sp.trace_id, sp.span_id, sp.parent_span_id
    if len(tid) != 16 or tid == _ZERO_TRACE:
        return "trace_id", f"trace_id must be 16 bytes, not all zero (got {len(tid)} bytes)"
    if len(sid) != 8 or sid == _ZERO_SPAN:
        return "span_id", f"span_id must be 8 bytes, not all zero (got {len(sid)} bytes)"
    if pid and len(pid) != 8:
        return "parent_span_id", f"parent_span_id must be empty or 8 bytes, got {len(pid)}"
    return None


def map_spans(request: Any) -> Mapped:
    rows: list[tuple[Any, ...]] = []
    rejected: list[LineError] = []
    spans = _scoped(request.resource_spans, "scope_spans", "spans")
    for n, ((svc, res, scope_name, scope_version), sp) in enumerate(spans, 1):
        problem = _span_problem(sp)
        if problem is not None:
            _reject(rejected, n, "span", *problem)
            continue
        start, end = sp.start_time_unix_nano, sp.end_time_unix_nano
        status = sp.status
        rows.append((
            start or None, sp.trace_id.hex(), sp.span_id.hex(),
            hex_id(sp.parent_span_id), sp.trace_state or None, svc, sp.name,
            _KIND.get(sp.kind) or str(sp.kind), end or None,
            end - start if start and end else None,
            _STATUS.get(status.code) or str(status.code), status.message or None,
            sp.flags, attributes_json(sp.attributes), _events(sp.events),
            _links(sp.links), res, scope_name, scope_version))
    return Mapped(_batch(SPANS_SCHEMA, _SPAN_COLUMNS, rows), rejected)


# ---- metrics -------------------------------------------------------------------------------
_METRIC_COLUMNS = ("_timestamp", "start_timestamp", "service_name", "name", "description",
                   "unit", "metric_type", "aggregation_temporality", "is_monotonic", "value",
                   "count", "sum", "min", "max", "bucket_counts", "explicit_bounds",
                   "exponential", "quantiles", "flags", "attributes", "resource", "scope_name",
                   "scope_version")

# Per point: (value, count, sum, min, max, bucket_counts, explicit_bounds, exponential,
# quantiles); `_POINT_NONE` fills what a type does not have.
_POINT_NONE = (None,) * 9


def _number(p: Any) -> tuple[Any, ...]:
    kind = p.WhichOneof("value")
    value = (_finite(p.as_double) if kind == "as_double"
             else float(p.as_int) if kind == "as_int" else None)
    return (value, *_POINT_NONE[1:])


def _optional(p: Any, name: str) -> float | None:
    return _finite(getattr(p, name)) if p.HasField(name) else None


def _histogram(p: Any) -> tuple[Any, ...]:
    return (None, p.count, _optional(p, "sum"), _optional(p, "min"), _optional(p, "max"),
            to_json(list(p.bucket_counts)), to_json([_finite(b) for b in p.explicit_bounds]),
            None, None)


def _buckets(b: Any) -> dict[str, Any]:
    return {"offset": b.offset, "bucket_counts": list(b.bucket_counts)}


def _exponential(p: Any) -> tuple[Any, ...]:
    doc = {"scale": p.scale, "zero_count": p.zero_count,
           "zero_threshold": _finite(p.zero_threshold),
           "positive": _buckets(p.positive), "negative": _buckets(p.negative)}
    return (None, p.count, _optional(p, "sum"), _optional(p, "min"), _optional(p, "max"),
            None, None, to_json(doc), None)


def _summary(p: Any) -> tuple[Any, ...]:
    quantiles = [{"quantile": _finite(q.quantile), "value": _finite(q.value)}
                 for q in p.quantile_values]
    return (None, p.count, _finite(p.sum), None, None, None, None, None, to_json(quantiles))


_POINTS = {"gauge": _number, "sum": _number, "histogram": _histogram,
           "exponential_histogram": _exponential, "summary": _summary}


def map_metrics(request: Any) -> Mapped:
    rows: list[tuple[Any, ...]] = []
    rejected: list[LineError] = []
    n = 0
    for (svc, res, scope_name, scope_version), m in _scoped(request.resource_metrics,
                                                            "scope_metrics", "metrics"):
        kind = m.WhichOneof("data")
        if kind is None:
            continue
        data = getattr(m, kind)
        temporality = (_TEMPORALITY.get(data.aggregation_temporality)
                       if kind in ("sum", "histogram", "exponential_histogram") else None)
        monotonic = data.is_monotonic if kind == "sum" else None
        point = _POINTS[kind]
        head = (svc, m.name, m.description or None, m.unit or None, kind, temporality,
                monotonic)
        tail = (res, scope_name, scope_version)
        for p in data.data_points:
            n += 1
            if not m.name:
                _reject(rejected, n, "data point", "name", "the metric has no name")
                continue
            rows.append((p.time_unix_nano or None, p.start_time_unix_nano or None, *head,
                         *point(p), p.flags, attributes_json(p.attributes), *tail))
    return Mapped(_batch(METRICS_SCHEMA, _METRIC_COLUMNS, rows), rejected)
