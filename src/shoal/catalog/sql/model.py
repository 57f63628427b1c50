"""The catalog's own SQL tables, as SQLAlchemy metadata, and their migrations (SQLite and
Postgres, one definition).

`MIGRATIONS` is an append-only list; migration *i* moves the catalog from version *i* to
*i + 1*. `migrate()` applies the missing ones in one transaction each and records the version
in `catalog_meta`, so an old catalog file is upgraded in place and a newer one is refused.
JSON columns are JSONB on Postgres (indexable, `@>` containment for stage-1 pruning) and JSON
text on SQLite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (JSON, BigInteger, Column, Connection, Dialect, Float, ForeignKey, Index,
                        Integer, LargeBinary, MetaData, String, Table, Text, and_, or_, text)
from sqlalchemy.types import TypeDecorator, TypeEngine

from shoal.catalog.rows import CATALOG_VERSION
from shoal.catalog.statements import READ_CATALOG_VERSION
from shoal.errors import ConfigError

metadata = MetaData()


class _Json(TypeDecorator[Any]):
    """JSON, JSONB on Postgres. Chosen per dialect as it is used, so that SQLAlchemy's
    Postgres dialect is imported only by a Postgres catalog (35-60 ms of every embedded
    start-up otherwise: `shoal ingest`'s included)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


Json = _Json()

catalog_meta = Table(
    "catalog_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

tables = Table(
    "tables", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("current_snapshot_id", BigInteger, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("mode", String(16), nullable=False),
    Column("properties", Json, nullable=False),
    Column("created_at", Float, nullable=False),
)

schema_versions = Table(
    "schema_versions", metadata,
    Column("table_id", Integer, ForeignKey("tables.id"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("schema", Json, nullable=False),
    Column("created_at", Float, nullable=False),
)

snapshots = Table(
    "snapshots", metadata,
    Column("table_id", Integer, ForeignKey("tables.id"), primary_key=True),
    Column("snapshot_id", BigInteger, primary_key=True),
    Column("parent_id", BigInteger),
    Column("schema_version", Integer, nullable=False),
    Column("operation", String(32), nullable=False),
    Column("commit_id", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("summary", Json, nullable=False),
)

manifests = Table(
    "manifests", metadata,
    Column("table_id", Integer, ForeignKey("tables.id"), primary_key=True),
    Column("extent_id", String(64), primary_key=True),
    Column("added_snapshot_id", BigInteger, nullable=False),
    Column("removed_snapshot_id", BigInteger),
    Column("object_path", Text, nullable=False),
    Column("format", String(16), nullable=False),
    Column("byte_size", BigInteger, nullable=False),
    Column("row_count", BigInteger, nullable=False),
    Column("block_count", Integer, nullable=False),
    Column("min_ts", BigInteger),
    Column("max_ts", BigInteger),
    Column("schema_version", Integer, nullable=False),
    Column("column_stats", Json, nullable=False),
    Column("present_paths", Json, nullable=False),
    Index("ix_manifests_live", "table_id", "removed_snapshot_id", "added_snapshot_id"),
    Index("ix_manifests_max_ts", "table_id", "max_ts"),
    Index("ix_manifests_min_ts", "table_id", "min_ts"),
)

# Membership filters (bloom) of columns whose distinct set overflowed; fetched only for the
# candidates that survive the SQL part of stage 1.
manifest_filters = Table(
    "manifest_filters", metadata,
    Column("table_id", Integer, primary_key=True),
    Column("extent_id", String(64), primary_key=True),
    Column("column_name", String(255), primary_key=True),
    Column("filter", LargeBinary, nullable=False),
)

ingest_ledger = Table(
    "ingest_ledger", metadata,
    Column("key", String(512), primary_key=True),
    Column("table_id", Integer, ForeignKey("tables.id"), nullable=False),
    Column("snapshot_id", BigInteger, nullable=False),
    Column("ack", Json, nullable=False),
    Column("created_at", Float, nullable=False, index=True),
)

source_offsets = Table(
    "source_offsets", metadata,
    Column("source", String(512), primary_key=True),
    Column("partition", String(64), primary_key=True),
    Column("table_id", Integer, ForeignKey("tables.id"), nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("snapshot_id", BigInteger, nullable=False),
    Column("updated_at", Float, nullable=False),
)

work_units = Table(
    "work_units", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("table_id", Integer, ForeignKey("tables.id")),
    Column("payload", Json, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("lease_owner", String(255)),
    Column("lease_expires_at", Float),
    Column("result", Json),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_work_units_claim", "state", "kind", "id"),
)


def _v1(conn: Connection) -> None:
    # No GIN index on column_stats: stage 1 narrows by the time indexes first and token sets
    # of 10,000 entries would make every commit pay for index maintenance.
    metadata.create_all(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1]
assert len(MIGRATIONS) == CATALOG_VERSION, "one migration per catalog version"


def current_version(conn: Connection) -> int:
    if not conn.dialect.has_table(conn, "catalog_meta"):
        return 0
    row = conn.execute(text(READ_CATALOG_VERSION.sql)).first()
    return int(row[0]) if row else 0


def migrate(conn: Connection) -> int:
    """Bring the catalog schema to `CATALOG_VERSION` inside the caller's transaction.

    Concurrent first starts are serialised: SQLite by the caller's IMMEDIATE transaction,
    Postgres by a transaction-scoped advisory lock.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7302451)"))
    version = current_version(conn)
    if version > CATALOG_VERSION:
        raise ConfigError(f"the catalog is at version {version}, newer than this shoal "
                          f"understands ({CATALOG_VERSION}); upgrade shoal")
    for i in range(version, CATALOG_VERSION):
        MIGRATIONS[i](conn)
    if version != CATALOG_VERSION:
        if version == 0:
            conn.execute(catalog_meta.insert().values(key="version",
                                                      value=str(CATALOG_VERSION)))
        else:
            conn.execute(catalog_meta.update().where(catalog_meta.c.key == "version")
                         .values(value=str(CATALOG_VERSION)))
    return CATALOG_VERSION


def visible(table_id: int, snapshot_id: int) -> Any:
    """The manifest rows of table `table_id` visible at snapshot `snapshot_id`: added at or
    before it, not removed at or before it."""
    m = manifests.c
    return and_(m.table_id == table_id, m.added_snapshot_id <= snapshot_id,
                or_(m.removed_snapshot_id.is_(None), m.removed_snapshot_id > snapshot_id))
