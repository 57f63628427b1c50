"""`SqlCatalog`'s tables and schema versions: create a table, load one (the operation every
ingest request runs: `shoal.catalog.operations`, shared with `LiteCatalog`), list them, read
their schema history, change their properties and mode.

Table names are unique (a second `create_table` raises `TableAlreadyExistsError`, also when
two race); a table starts at snapshot 1 (`create`) with schema version 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from shoal.catalog import operations as ops
from shoal.catalog import statements as S
from shoal.catalog.base import DROPPED_SEPARATOR, TableInfo
from shoal.catalog.rows import decoding
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlConnections, inserted_id
from shoal.errors import InvalidSchemaError, TableAlreadyExistsError
from shoal.types.schema import SCHEMA_MODES, Schema, SchemaMode, check_table_name


class SqlTables(SqlConnections):
    """The `TableCatalog` role over SQLAlchemy."""

    def create_table(self, name: str, schema: Schema, *, mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo:
        check_table_name(name)
        if mode not in SCHEMA_MODES:
            raise InvalidSchemaError(f"unknown schema mode {mode!r} (expected one of "
                                     f"{', '.join(SCHEMA_MODES)})")
        if schema.version != 1:
            schema = Schema(schema.columns, 1)
        now = self._clock()
        try:
            with self._write() as db:
                conn = db.conn
                if conn.execute(select(T.tables.c.id).where(T.tables.c.name == name)).first():
                    raise TableAlreadyExistsError(name)
                table_id = inserted_id(conn.execute(insert(T.tables).values(
                    name=name, current_snapshot_id=1, schema_version=1, mode=mode,
                    properties=properties or {}, created_at=now)))
                db.run(S.INSERT_SCHEMA_VERSION, {"table_id": table_id, "version": 1,
                                                 "schema": schema.to_json(), "created_at": now})
                db.run(S.INSERT_SNAPSHOT, {
                    "table_id": table_id, "snapshot_id": 1, "parent_id": None,
                    "schema_version": 1, "operation": "create",
                    "commit_id": uuid.uuid4().hex, "created_at": now, "summary": {}})
                return ops.load_table(db, name)
        except IntegrityError:
            raise TableAlreadyExistsError(name) from None

    def load_table(self, name: str) -> TableInfo:
        with self._read() as db:
            return ops.load_table(db, name, self._schema_cache)

    def list_tables(self) -> list[TableInfo]:
        with self._read() as db:
            # Names first (no stored JSON), then row by row: a corrupt row is named.
            # Dropped tables (stored under a name with the separator) are not listed.
            names: Sequence[str] = db.conn.execute(
                select(T.tables.c.name)
                .where(T.tables.c.name.not_like(f"%{DROPPED_SEPARATOR}%"))
                .order_by(T.tables.c.name)).scalars().all()
            return [ops.load_table(db, n, self._schema_cache) for n in names]

    def schema_history(self, name: str) -> list[Schema]:
        with self._read() as db:
            return ops.schema_history(db, ops.table_row(db, name))

    def schema_version(self, name: str, version: int) -> Schema:
        with self._read() as db:
            return ops.schema_at(db, ops.table_row(db, name), version, self._schema_cache)

    def set_properties(self, name: str, properties: dict[str, Any], *,
                       mode: SchemaMode | None = None) -> TableInfo:
        if mode is not None and mode not in SCHEMA_MODES:
            raise InvalidSchemaError(f"unknown schema mode {mode!r}")
        with self._write() as db:
            row = ops.table_row(db, name)
            with decoding("tables", f'table "{name}"'):
                merged = {**row["properties"], **properties}
            merged = {k: v for k, v in merged.items() if v is not None}
            db.conn.execute(update(T.tables).where(T.tables.c.id == row["id"])
                            .values(properties=merged, mode=mode or row["mode"]))
            return ops.load_table(db, name)
