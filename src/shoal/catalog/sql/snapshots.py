"""`SqlCatalog`'s snapshots and manifests: publish a snapshot (`commit`), read snapshots,
the manifest rows visible at one, and expire old snapshots.

`commit` runs `shoal.catalog.operations.commit_rows` (the statements `LiteCatalog` runs
too) in one write transaction and maps what went wrong: a lost race or a SQLite lock
timeout is `CommitConflictError`, an integrity error is a replayed ledger key
(`LedgerKeyExistsError` with the first ack) or a conflict, and an error raised by COMMIT
itself leaves the outcome unknown (`CommitStateUnknownError`); errors before COMMIT mean
the transaction certainly failed. On Postgres (READ COMMITTED) the commit locks its table
row first and the compare-and-swap re-checks it; the primary key of (table id, snapshot id)
stops two commits from claiming one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from shoal.catalog import operations as ops
from shoal.catalog import statements as S
from shoal.catalog.base import (ExpiredSnapshots, LedgerEntry, ManifestEntry, Snapshot,
                                SourceOffset)
from shoal.catalog.rows import chunks, decoding, manifest_entry
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlDb, rollback
from shoal.catalog.sql.ledger import SqlLedger
from shoal.errors import CommitConflictError, CommitStateUnknownError, TableNotFoundError
from shoal.types.schema import Schema


class SqlSnapshots(SqlLedger):
    """The `SnapshotCatalog` role over SQLAlchemy (on the ledger's: a commit writes ledger
    keys and offsets, and a replayed one looks its key up)."""

    def commit(self, table: str, *, expected_snapshot_id: int, operation: str,
               commit_id: str, add: Sequence[ManifestEntry] = (),
               remove: Sequence[str] = (), schema: Schema | None = None,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> Snapshot:
        conn = self._connect_for_write()
        trans = None
        try:
            trans = conn.begin()
            snap = ops.commit_rows(
                SqlDb(conn), table, expected=expected_snapshot_id, now=self._clock(),
                operation=operation, commit_id=commit_id, add=add, remove=remove,
                schema=schema, ledger=ledger, offsets=offsets, summary=summary or {})
        except IntegrityError:
            rollback(trans)
            conn.close()
            ops.raise_replay(ledger, self.ledger_get)
            raise CommitConflictError(table, expected_snapshot_id) from None
        except OperationalError as e:
            rollback(trans)
            conn.close()
            if self.dialect == "sqlite" and "locked" in str(e).lower():
                raise CommitConflictError(table, expected_snapshot_id) from None
            raise
        except BaseException:
            rollback(trans)
            conn.close()
            raise
        try:
            trans.commit()
        except DBAPIError as e:
            conn.close()
            raise CommitStateUnknownError(table, e) from e
        conn.close()
        return snap

    def snapshot(self, table: str, snapshot_id: int | None = None) -> Snapshot:
        with self._read() as db:
            return ops.snapshot(db, ops.table_row(db, table), snapshot_id)

    def snapshots(self, table: str) -> list[Snapshot]:
        with self._read() as db:
            return ops.snapshots(db, ops.table_row(db, table))

    def find_commit(self, table: str, commit_id: str) -> Snapshot | None:
        with self._read() as db:
            return ops.find_commit(db, table, commit_id)

    def manifests(self, table: str, snapshot_id: int | None = None) -> list[ManifestEntry]:
        with self._read() as db:
            row = ops.table_row(db, table)
            sid = ops.snapshot(db, row, snapshot_id).snapshot_id
            with decoding("manifests", f'table "{table}" snapshot {sid}'):
                rows = db.conn.execute(select(T.manifests).where(T.visible(row["id"], sid))
                                       .order_by(T.manifests.c.min_ts, T.manifests.c.extent_id)
                                       ).all()
                entries = [manifest_entry(r._mapping) for r in rows]
            return self._attach_filters(db, row["id"], entries)

    @staticmethod
    def _attach_filters(db: SqlDb, table_id: int,
                        entries: list[ManifestEntry]) -> list[ManifestEntry]:
        by_id: dict[str, dict[str, bytes]] = {}
        ids = [e.extent_id for e in entries]
        for chunk in chunks(ids):
            for r in db.conn.execute(select(T.manifest_filters).where(
                    T.manifest_filters.c.table_id == table_id,
                    T.manifest_filters.c.extent_id.in_(chunk))):
                by_id.setdefault(r.extent_id, {})[r.column_name] = bytes(r.filter)
        if not by_id:
            return entries
        return [replace(e, membership_filters=by_id.get(e.extent_id, {})) for e in entries]

    def live_extent_ids(self, table: str, extent_ids: Sequence[str]) -> set[str]:
        with self._read() as db:
            row = ops.table_row(db, table)
            out: set[str] = set()
            m = T.manifests.c
            for chunk in chunks(list(extent_ids)):
                out.update(db.conn.execute(select(m.extent_id).where(
                    m.table_id == row["id"], m.extent_id.in_(chunk),
                    m.removed_snapshot_id.is_(None))).scalars())
            return out

    def table_counts(self, table: str, snapshot_id: int | None = None) -> tuple[int, int]:
        with self._read() as db:
            row = ops.table_row(db, table)
            sid = ops.snapshot(db, row, snapshot_id).snapshot_id
            r = db.conn.execute(select(func.coalesce(func.sum(T.manifests.c.row_count), 0),
                                       func.count()).where(T.visible(row["id"], sid))).one()
            return int(r[0]), int(r[1])

    def referenced_paths(self) -> set[str]:
        with self._read() as db:
            return set(db.conn.execute(select(T.manifests.c.object_path)).scalars())

    def expire_snapshots(self, table: str, *, keep_from: int) -> ExpiredSnapshots:
        """Snapshots below `keep_from` (capped at the current one) go, and with them every
        manifest row removed at or before `keep_from`: visible at N needs `removed > N`, so
        no snapshot >= keep_from sees those rows. One transaction; objects are the caller's."""
        m, s = T.manifests.c, T.snapshots.c
        with self._write() as db:
            conn = db.conn
            row = db.one(S.TABLE_FOR_UPDATE, {"name": table})
            if row is None:
                raise TableNotFoundError(table)
            table_id = row["id"]
            keep_from = min(keep_from, row["current_snapshot_id"])
            ids: list[int] = list(conn.execute(select(s.snapshot_id).where(
                s.table_id == table_id, s.snapshot_id < keep_from)
                .order_by(s.snapshot_id)).scalars())
            gone = conn.execute(select(m.extent_id, m.object_path).where(
                m.table_id == table_id, m.removed_snapshot_id.is_not(None),
                m.removed_snapshot_id <= keep_from)).all()
            extent_ids = [g.extent_id for g in gone]
            for chunk in chunks(extent_ids):
                conn.execute(delete(T.manifest_filters).where(
                    T.manifest_filters.c.table_id == table_id,
                    T.manifest_filters.c.extent_id.in_(chunk)))
                conn.execute(delete(T.manifests).where(m.table_id == table_id,
                                                       m.extent_id.in_(chunk)))
            if ids:
                conn.execute(delete(T.snapshots).where(s.table_id == table_id,
                                                       s.snapshot_id < keep_from))
            return ExpiredSnapshots(snapshot_ids=ids, extent_ids=extent_ids,
                                    object_paths=[g.object_path for g in gone])
