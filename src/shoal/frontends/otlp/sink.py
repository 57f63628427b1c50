"""The OTLP frontend's one call into the write path, shared by OTLP/HTTP and OTLP/gRPC.

`OtlpSink.export(signal, request, idempotency_key=...)` maps a decoded export request to
rows (`mapping.py`) and hands them to `WritePath.ingest_arrow()`: the same group commit,
idempotency ledger and ack-after-commit as REST. It returns once the rows are committed.

- The signal's standard table is created on first use (mode `drop`, `schemas.py`); a race
  between two first requests is harmless (the loser finds the table).
- Records the mapping refused are part of the ack (so a replay with the same key reports
  them again) and become OTLP's partial success; the rest is written.
- A request without a record to write writes nothing (unless it carries an idempotency key,
  which is recorded so that a replay answers the same).
- Errors are the write path's (`BackpressureError` is retryable); each edge maps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.frontends.otlp.codec import OtlpPayloadError
from shoal.frontends.otlp.mapping import map_request
from shoal.frontends.otlp.schemas import SCHEMAS, OtlpTables, Signal
from shoal.ingest.keys import client_key_problem
from shoal.ingest.write_path import IngestAck, WritePath

MAX_MESSAGE_ERRORS = 3


def check_idempotency_key(key: str | None) -> str | None:
    """The client's key (`X-Idempotency-Key` header / `x-idempotency-key` gRPC metadata),
    validated like REST's (`shoal.ingest.keys`)."""
    if key is None:
        return None
    problem = client_key_problem(key)
    if problem is not None:
        raise OtlpPayloadError(problem)
    return key


@dataclass(frozen=True)
class ExportResult:
    table: str
    rows: int
    rejected: int
    message: str              # OTLP partial_success.error_message ("" when none refused)
    replayed: bool = False
    snapshot_id: int | None = None


class OtlpSink:
    def __init__(self, write_path: WritePath, tables: OtlpTables | None = None) -> None:
        self.write_path = write_path
        self.tables = tables or OtlpTables()

    def export(self, signal: Signal, request: Any, *,
               idempotency_key: str | None = None) -> ExportResult:
        table = self.tables.for_signal(signal)
        mapped = map_request(signal, request)
        if mapped.batch.num_rows == 0 and idempotency_key is None:
            # Nothing to write (and no key to record): answer without touching the catalog.
            ack = IngestAck(table=table, snapshot_id=0, rows=0, rejected=mapped.rejected)
            return ExportResult(table, 0, len(mapped.rejected), _message(ack))
        ack = self.write_path.ingest_arrow(table, mapped.batch, idempotency_key=idempotency_key,
                                           rejected=mapped.rejected, create=SCHEMAS[signal])
        return ExportResult(table, ack.rows, len(ack.rejected), _message(ack),
                            replayed=ack.replayed, snapshot_id=ack.snapshot_id)


def _message(ack: IngestAck) -> str:
    if not ack.rejected:
        return ""
    head = "; ".join(r.message for r in ack.rejected[:MAX_MESSAGE_ERRORS])
    more = len(ack.rejected) - MAX_MESSAGE_ERRORS
    return f"{len(ack.rejected)} rejected: {head}" + (f" (and {more} more)" if more > 0 else "")
