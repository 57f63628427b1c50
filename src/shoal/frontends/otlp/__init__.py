"""The OTLP frontend (docs/otlp.md): the protocol, turned into rows on the shared write path.

    decode (codec) -> map to Arrow rows (mapping, values) -> OtlpSink -> WritePath.ingest_arrow

The edges, which take auth, body limits and server state from `shoal.http`: the OTLP/HTTP
routes (`http`) and the OTLP/gRPC server (`grpc`, imported only when it is served).

Logs, spans and metrics land in standard tables (schemas), created on first use.
"""

from shoal.frontends.otlp.schemas import (LOGS_SCHEMA, METRICS_SCHEMA, SCHEMAS, SPANS_SCHEMA,
                                          OtlpTables, Signal)
from shoal.frontends.otlp.sink import ExportResult, OtlpSink

__all__ = ["LOGS_SCHEMA", "METRICS_SCHEMA", "SCHEMAS", "SPANS_SCHEMA", "ExportResult",
           "OtlpSink", "OtlpTables", "Signal"]
