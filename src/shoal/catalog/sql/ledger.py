"""`SqlCatalog`'s idempotency ledger and source positions: look a key up (shared with
`LiteCatalog`: `shoal.catalog.operations`), sweep old keys, read a source's offsets. Both are
written only by commits (`shoal.catalog.operations.commit_rows`), in the snapshot's
transaction.

The sweep keeps keys under `PERMANENT_LEDGER_PREFIXES` for good.
"""

from __future__ import annotations

from sqlalchemy import delete

from shoal.catalog import operations as ops
from shoal.catalog.base import PERMANENT_LEDGER_PREFIXES, LedgerRecord
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlConnections


class SqlLedger(SqlConnections):
    """The `LedgerCatalog` role over SQLAlchemy."""

    def ledger_get(self, key: str) -> LedgerRecord | None:
        with self._read() as db:
            return ops.ledger_get(db, key)

    def sweep_ledger(self, older_than_s: float) -> int:
        cutoff = self._clock() - older_than_s
        with self._write() as db:
            return db.conn.execute(delete(T.ingest_ledger).where(
                T.ingest_ledger.c.created_at < cutoff,
                *[~T.ingest_ledger.c.key.startswith(p, autoescape=True)
                  for p in PERMANENT_LEDGER_PREFIXES])).rowcount

    def source_offsets(self, source: str) -> dict[str, int]:
        with self._read() as db:
            return ops.source_offsets(db, source)
