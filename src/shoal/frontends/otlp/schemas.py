"""The standard OTLP tables: logs, spans and metrics (documented in docs/otlp.md).

Created on first use in mode `drop` (unknown fields dropped) under the names of
`OtlpTables` (config `otlp_logs_table`, `otlp_spans_table`, `otlp_metrics_table`). A table
the user made beforehand under such a name is used as it is: the rows are matched to its
columns by name, columns it lacks are dropped (or follow its own mode), so an operator may
keep a subset.

Shared conventions: ids are lowercase hex strings (null when absent); times are `timestamp`
(ns, UTC) and `_timestamp` is the record's own time (log time, span start, point time);
`resource`, `attributes` and the other maps are `dynamic` JSON objects whose dotted keys are
nested (`http.method` -> `{"http": {"method": ...}}`, see `values.py`); `service_name` is
the resource attribute `service.name`; enums are their short names (`SERVER`, `ERROR`,
`CUMULATIVE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shoal.config import Config
from shoal.errors import ConfigError, InvalidSchemaError
from shoal.types.columns import BOOL, DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP
from shoal.types.schema import Column, Schema, check_table_name

Signal = Literal["logs", "traces", "metrics"]
SIGNALS: tuple[Signal, ...] = ("logs", "traces", "metrics")

_COMMON = [Column("service_name", STRING), Column("resource", DYNAMIC),
           Column("scope_name", STRING), Column("scope_version", STRING)]

LOGS_SCHEMA = Schema.create([
    Column("observed_timestamp", TIMESTAMP),
    *_COMMON[:1],
    Column("severity_number", INT),
    Column("severity_text", STRING),
    Column("body", STRING),
    Column("event_name", STRING),
    Column("trace_id", STRING),
    Column("span_id", STRING),
    Column("flags", LONG),
    Column("attributes", DYNAMIC),
    *_COMMON[1:],
])

SPANS_SCHEMA = Schema.create([
    Column("trace_id", STRING),
    Column("span_id", STRING),
    Column("parent_span_id", STRING),
    Column("trace_state", STRING),
    *_COMMON[:1],
    Column("name", STRING),
    Column("kind", STRING),
    Column("end_timestamp", TIMESTAMP),
    Column("duration_ns", LONG),
    Column("status_code", STRING),
    Column("status_message", STRING),
    Column("flags", LONG),
    Column("attributes", DYNAMIC),
    Column("events", DYNAMIC),
    Column("links", DYNAMIC),
    *_COMMON[1:],
])

METRICS_SCHEMA = Schema.create([
    Column("start_timestamp", TIMESTAMP),
    *_COMMON[:1],
    Column("name", STRING),
    Column("description", STRING),
    Column("unit", STRING),
    Column("metric_type", STRING),
    Column("aggregation_temporality", STRING),
    Column("is_monotonic", BOOL),
    Column("value", REAL),
    Column("count", LONG),
    Column("sum", REAL),
    Column("min", REAL),
    Column("max", REAL),
    Column("bucket_counts", DYNAMIC),
    Column("explicit_bounds", DYNAMIC),
    Column("exponential", DYNAMIC),
    Column("quantiles", DYNAMIC),
    Column("flags", LONG),
    Column("attributes", DYNAMIC),
    *_COMMON[1:],
])

SCHEMAS: dict[Signal, Schema] = {"logs": LOGS_SCHEMA, "traces": SPANS_SCHEMA,
                                 "metrics": METRICS_SCHEMA}


@dataclass(frozen=True)
class OtlpTables:
    """Where each signal lands."""

    logs: str = "otel_logs"
    spans: str = "otel_spans"
    metrics: str = "otel_metrics"

    def __post_init__(self) -> None:
        for name in (self.logs, self.spans, self.metrics):
            try:
                check_table_name(name)
            except InvalidSchemaError as e:
                raise ConfigError(f"OTLP table: {e}") from None

    @classmethod
    def from_config(cls, config: Config) -> OtlpTables:
        return cls(config.otlp_logs_table, config.otlp_spans_table, config.otlp_metrics_table)

    def for_signal(self, signal: Signal) -> str:
        return {"logs": self.logs, "traces": self.spans, "metrics": self.metrics}[signal]
