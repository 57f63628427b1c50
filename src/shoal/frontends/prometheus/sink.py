"""The remote write receiver's one call into the write path: `PromWriteSink.write(body)`.

`write()` decodes a remote write body (`remote_write.py`), hands the samples and the metadata
to `WritePath.ingest_arrow()` (group commit; the call returns once the rows are committed,
so the HTTP edge answers 204 only for committed samples) and returns what it wrote.

- The tables (`prometheus_table`, `prometheus_metadata_table`; layout in
  `shoal.types.prometheus`) are created on first use in mode `drop`; a race between two
  first requests is harmless (the loser finds the table).
- Exactly-once under retries: Prometheus resends the *identical* body when a send failed or
  timed out, including a send whose rows were in fact committed (the ack was lost, or shoal
  died between commit and answer). Each write carries the idempotency key
  `prw:<table>:<blake2b-128 of the compressed body>`, recorded in the ledger in the same
  commit as the rows (a client's own `X-Idempotency-Key` may not start with `prw:`,
  `shoal.ingest.keys`), so a resend is answered from the ledger and writes nothing. Two
  *different* requests with identical bodies (the same series, timestamps and values) also
  share a key and are written once; that is harmless, because they carry exactly the same
  samples and a sample is identified by its series and timestamp: writing them twice would
  only duplicate it (Prometheus's own TSDB drops such a duplicate too). A 128-bit
  cryptographic hash makes two different bodies sharing a key practically impossible, even
  for a sender that tries. Ledger keys expire after 25 h, far beyond Prometheus's retries.
- The samples and the metadata of one body are two commits (two tables). A crash between
  them leaves the samples written and the metadata not; Prometheus resends the body, the
  samples' key answers from the ledger and the metadata is written: still exactly once.
- Errors: `RemoteWriteError` (400), `PayloadTooLargeError` (413), and the write path's
  (`BackpressureError` 429, not-ready 503: both retried by Prometheus).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


from shoal.config import Config
from shoal.errors import (ConfigError, InvalidSchemaError)
from shoal.frontends.prometheus.remote_write import MappedWrite, decode_write, map_write
from shoal.ingest.keys import REMOTE_WRITE_KEY_PREFIX
from shoal.ingest.write_path import WritePath
from shoal.types.prometheus import PROM_METADATA_SCHEMA, PROM_SAMPLES_SCHEMA
from shoal.types.schema import check_table_name


@dataclass(frozen=True)
class PromTables:
    """Where remote write lands: samples, and metric metadata."""

    samples: str = "prom_samples"
    metadata: str = "prom_metadata"

    def __post_init__(self) -> None:
        for name in (self.samples, self.metadata):
            try:
                check_table_name(name)
            except InvalidSchemaError as e:
                raise ConfigError(f"Prometheus table: {e}") from None

    @classmethod
    def from_config(cls, config: Config) -> PromTables:
        return cls(config.prometheus_table, config.prometheus_metadata_table)


@dataclass(frozen=True)
class TableWrite:
    """What one table received from one body."""

    table: str
    rows: int
    replayed: bool


@dataclass(frozen=True)
class WriteResult:
    writes: tuple[TableWrite, ...]    # only the tables that had rows
    decoded_bytes: int
    exemplars_dropped: int


def body_digest(body: bytes) -> str:
    """The hex blake2b-128 of a (compressed) request body: its idempotency key's core."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


class PromWriteSink:
    def __init__(self, write_path: WritePath, tables: PromTables | None = None) -> None:
        self.write_path = write_path
        self.tables = tables or PromTables()

    def write(self, body: bytes, *, max_bytes: int) -> WriteResult:
        """Decode `body` (snappy + protobuf, decoded to at most `max_bytes`) and commit its
        samples and metadata, exactly once per distinct body."""
        request = decode_write(body, max_bytes=max_bytes)
        mapped: MappedWrite = map_write(request)
        digest = body_digest(body)
        writes = []
        for table, schema, batch in ((self.tables.samples, PROM_SAMPLES_SCHEMA, mapped.samples),
                                     (self.tables.metadata, PROM_METADATA_SCHEMA,
                                      mapped.metadata)):
            if batch.num_rows:
                key = f"{REMOTE_WRITE_KEY_PREFIX}{table}:{digest}"
                ack = self.write_path.ingest_arrow(table, batch, idempotency_key=key,
                                                   create=schema)
                writes.append(TableWrite(table, ack.rows, ack.replayed))
        return WriteResult(tuple(writes), request.ByteSize(), mapped.exemplars_dropped)
