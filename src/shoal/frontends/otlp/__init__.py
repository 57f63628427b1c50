"""The OTLP frontend (docs/otlp.md): the protocol, turned into rows on the shared write path.

    decode (codec) -> map to Arrow rows (mapping, values) -> OtlpSink -> WritePath.ingest_arrow

The edges that need auth, body limits and server state (the OTLP/HTTP routes, the OTLP/gRPC
server) are the server's: `shoal.server.otlp_http`, `shoal.server.otlp_grpc`.

Logs, spans and metrics land in standard tables (schemas), created on first use.
"""

from shoal.frontends.otlp.schemas import (LOGS_SCHEMA, METRICS_SCHEMA, SCHEMAS, SPANS_SCHEMA,
                                          OtlpTables, Signal)
from shoal.frontends.otlp.sink import ExportResult, OtlpSink

__all__ = ["LOGS_SCHEMA", "METRICS_SCHEMA", "SCHEMAS", "SPANS_SCHEMA", "ExportResult",
           "OtlpSink", "OtlpTables", "Signal"]
