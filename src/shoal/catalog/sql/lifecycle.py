"""`SqlCatalog`'s table lifecycle: rename, drop, undrop and purge (part of `TableCatalog`).

A table's name is the only thing that ties it to its users; its id ties it to its rows.
Renaming changes the name alone. Dropping publishes a `drop` snapshot (one more snapshot
on the table's chain, by the same compare-and-swap as a commit) and stores the table under
`dropped_name(name, id)`, which no live table can have, so the name is free at once and the
rows (snapshots, manifests, so the files) stay until maintenance purges them. Undropping
takes the name back with an `undrop` snapshot. Purging deletes every row of a dropped table
and gives the caller the object paths its manifests named.

Each is one write transaction that locks the table row first (Postgres `FOR UPDATE`; SQLite
holds the database lock for the whole write transaction); the unique index on names decides
two racing renames or undrops.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from shoal.catalog import operations as ops
from shoal.catalog import statements as S
from shoal.catalog.base import DROPPED_SEPARATOR, DroppedTable, TableInfo, dropped_name
from shoal.catalog.rows import decoding
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlDb
from shoal.catalog.sql.tables import SqlTables
from shoal.errors import (CommitConflictError, TableAlreadyExistsError, TableNameReusedError,
                          TableNotFoundError)
from shoal.types.schema import check_table_name


class SqlLifecycle(SqlTables):
    """Rename, drop, undrop and purge over SQLAlchemy (see the module docstring)."""

    def rename_table(self, name: str, new_name: str) -> TableInfo:
        check_table_name(new_name)
        try:
            with self._write() as db:
                row = db.one(S.TABLE_FOR_UPDATE, {"name": name})
                if row is None or DROPPED_SEPARATOR in name:
                    raise TableNotFoundError(name)
                if new_name != name and self._name_taken(db, new_name):
                    raise TableAlreadyExistsError(new_name)
                db.conn.execute(update(T.tables).where(T.tables.c.id == row["id"])
                                .values(name=new_name))
                return ops.load_table(db, new_name)
        except IntegrityError:
            raise TableAlreadyExistsError(new_name) from None

    def drop_table(self, name: str) -> DroppedTable:
        with self._write() as db:
            row = db.one(S.TABLE_FOR_UPDATE, {"name": name})
            if row is None or DROPPED_SEPARATOR in name:
                raise TableNotFoundError(name)
            now = self._clock()
            stored = dropped_name(name, row["id"])
            self._advance(db, name, row, stored, "drop", now)
            with decoding("tables", f'table "{name}"'):
                props: dict[str, Any] = db.conn.execute(select(T.tables.c.properties)
                                        .where(T.tables.c.id == row["id"])).scalar_one()
            return DroppedTable(row["id"], name, stored, now, dict(props))

    def dropped_tables(self, name: str | None = None) -> list[DroppedTable]:
        t, s = T.tables.c, T.snapshots.c
        pattern = (name if name is not None else "%") + DROPPED_SEPARATOR + "%"
        with self._read() as db, decoding("tables", "dropped tables"):
            rows = db.conn.execute(
                select(t.id, t.name, t.properties, s.created_at)
                .join(T.snapshots, (s.table_id == t.id)
                      & (s.snapshot_id == t.current_snapshot_id))
                .where(t.name.like(pattern))).all()
        out = []
        for r in rows:
            base, _, tid = r.name.rpartition(DROPPED_SEPARATOR)
            if tid != str(r.id) or (name is not None and base != name):
                continue
            out.append(DroppedTable(r.id, base, r.name, float(r.created_at),
                                    dict(r.properties)))
        return sorted(out, key=lambda d: (-d.dropped_at, -d.id))

    def undrop_table(self, table_id: int) -> TableInfo:
        stored: str | None = None
        try:
            with self._write() as db:
                stored = db.conn.execute(select(T.tables.c.name)
                                         .where(T.tables.c.id == table_id)).scalar()
                if stored is None or DROPPED_SEPARATOR not in stored:
                    raise TableNotFoundError(f"dropped table #{table_id}")
                name = stored.rpartition(DROPPED_SEPARATOR)[0]
                if self._name_taken(db, name):
                    raise TableNameReusedError(name)
                row = db.one(S.TABLE_FOR_UPDATE, {"name": stored})
                if row is None:     # purged meanwhile
                    raise TableNotFoundError(f"dropped table #{table_id}")
                self._advance(db, stored, row, name, "undrop", self._clock())
                return ops.load_table(db, name)
        except IntegrityError:
            raise TableNameReusedError((stored or "").rpartition(DROPPED_SEPARATOR)[0]) from None

    def purge_table(self, table_id: int) -> list[str]:
        m = T.manifests.c
        with self._write() as db:
            conn = db.conn
            stored = conn.execute(select(T.tables.c.name)
                                  .where(T.tables.c.id == table_id)).scalar()
            if stored is None:
                return []
            if DROPPED_SEPARATOR not in stored:
                raise ValueError(f'table "{stored}" is not dropped: it cannot be purged')
            db.one(S.TABLE_FOR_UPDATE, {"name": stored})
            paths: list[str] = list(conn.execute(
                select(m.object_path).where(m.table_id == table_id)).scalars())
            for table in (T.manifest_filters, T.manifests, T.ingest_ledger, T.source_offsets,
                          T.work_units, T.snapshots, T.schema_versions):
                conn.execute(delete(table).where(table.c.table_id == table_id))
            conn.execute(delete(T.tables).where(T.tables.c.id == table_id))
            return paths

    # ---- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _name_taken(db: SqlDb, name: str) -> bool:
        return db.conn.execute(select(T.tables.c.id).where(T.tables.c.name == name)
                               ).first() is not None

    @staticmethod
    def _advance(db: SqlDb, name: str, row: Any, new_name: str, operation: str,
                 now: float) -> None:
        """Publish snapshot current + 1 (`operation`, no data change) and rename, by the
        compare-and-swap every commit ends in."""
        current = row["current_snapshot_id"]
        db.run(S.INSERT_SNAPSHOT, {
            "table_id": row["id"], "snapshot_id": current + 1, "parent_id": current,
            "schema_version": row["schema_version"], "operation": operation,
            "commit_id": uuid.uuid4().hex, "created_at": now,
            "summary": {"name": new_name if operation == "undrop" else name}})
        changed = db.conn.execute(
            update(T.tables).where(T.tables.c.id == row["id"],
                                   T.tables.c.current_snapshot_id == current)
            .values(name=new_name, current_snapshot_id=current + 1)).rowcount
        if changed != 1:
            raise CommitConflictError(name, current)
