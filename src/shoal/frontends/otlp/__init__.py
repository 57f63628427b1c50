"""The OTLP frontend (SPEC §7.2): OTLP/HTTP routes and an OTLP/gRPC server over one sink.

    decode (codec) -> map to Arrow rows (mapping, values) -> OtlpSink -> WritePath.ingest_arrow

Logs, spans and metrics land in standard tables (schemas), created on first use.
"""

from shoal.frontends.otlp.schemas import (LOGS_SCHEMA, METRICS_SCHEMA, SCHEMAS, SPANS_SCHEMA,
                                          OtlpTables, Signal)
from shoal.frontends.otlp.sink import ExportResult, OtlpSink

__all__ = [
                                          "LOGS_SCHEMA",
                                          "METRICS_SCHEMA",
                                          "SCHEMAS",
                                          "SPANS_SCHEMA",
                                          "ExportResult",
                                          "OtlpSink",
                                          "OtlpTables",
                                          "Signal",
]
