"""The SQL texts of the catalog operations that more than one path runs, each written once.

Three readers reach the catalog's tables: `SqlCatalog` (SQLAlchemy, SQLite and Postgres),
`LiteCatalog` (the standard library's `sqlite3`, the embedded catalog's hot operations) and
`peek_table` (a read-only hint before anything heavy is imported). An operation two of them
run reads its SQL from here, and `shoal.catalog.operations` runs it the same way for both
(`Db` is what it needs of a transaction): the rows a commit leaves cannot drift apart.

A `Statement` is plain text with `:name` parameters, which `sqlite3` and SQLAlchemy's
`text()` both bind. Where Postgres needs other SQL for the same operation (a row lock, an
upsert's spelling) the statement carries that text as its `postgresql` variant, chosen by
the dialect of the transaction that runs it. JSON columns are named (`json_params` to
encode, `json_columns` to decode) so each path encodes them as its driver needs: JSON text on
SQLite, JSONB on Postgres, the same `json.dumps` text in both SQLite paths.

Column names that are SQL keywords (`key`, `offset`, `partition`, `source`, `schema`,
`filter`) are double-quoted, which both SQLite and Postgres read as identifiers.

Imports nothing but the standard library (`shoal ingest` reads its schema hint through
here before SQLAlchemy is imported).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol


@dataclass(frozen=True)
class Statement:
    """One operation's SQL with `:name` parameters (see the module's docstring)."""

    sql: str
    postgresql: str | None = None           # the Postgres text, where it differs
    json_params: tuple[str, ...] = ()       # parameters bound as JSON documents
    json_columns: tuple[str, ...] = ()      # result columns that hold JSON documents

    def text(self, dialect: str) -> str:
        if dialect == "postgresql" and self.postgresql is not None:
            return self.postgresql
        return self.sql


class Db(Protocol):
    """What an operation needs of an open transaction: rows as mappings by column name,
    JSON columns decoded; JSON parameters encoded. `shoal.catalog.sqlite.SqliteDb` over
    `sqlite3`, `shoal.catalog.sql.connections.SqlDb` over SQLAlchemy."""

    dialect: str                # "sqlite" | "postgresql"

    def one(self, stmt: Statement, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The first row, or None."""
        ...

    def all(self, stmt: Statement, params: Mapping[str, Any]) -> list[Mapping[str, Any]]: ...

    def run(self, stmt: Statement, params: Mapping[str, Any]) -> int:
        """Run a write; the number of rows it changed."""
        ...

    def many(self, stmt: Statement, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run a write once per parameter set."""
        ...


def _insert(table: str, columns: Sequence[str], suffix: str = "",
            json: tuple[str, ...] = ()) -> Statement:
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join(f":{c}" for c in columns)
    return Statement(f'INSERT INTO "{table}" ({names}) VALUES ({marks}){suffix}',
                     json_params=json)


def in_list(prefix: str, n: int) -> str:
    """`(:p0, :p1, ...)`: `n` parameters for an `IN` list (bound as `{prefix}{i}`)."""
    return "(" + ", ".join(f":{prefix}{i}" for i in range(n)) + ")"


def in_params(prefix: str, values: Sequence[Any]) -> dict[str, Any]:
    """The parameters of `in_list(prefix, len(values))`."""
    return {f"{prefix}{i}": v for i, v in enumerate(values)}


# ---- the catalog's version ----------------------------------------------------------------
READ_CATALOG_VERSION = Statement("SELECT value FROM catalog_meta WHERE \"key\" = 'version'")

# ---- tables and schema versions -----------------------------------------------------------
TABLE_COLUMNS = ("id", "name", "current_snapshot_id", "schema_version", "mode", "properties",
                 "created_at")
TABLE_BY_NAME = Statement(
    "SELECT id, name, current_snapshot_id, schema_version, mode, properties, created_at "
    "FROM tables WHERE name = :name", json_columns=("properties",))
SCHEMA_VERSION = Statement(
    'SELECT "schema" FROM schema_versions WHERE table_id = :table_id AND version = :version',
    json_columns=("schema",))
SCHEMA_HISTORY = Statement(
    'SELECT "schema" FROM schema_versions WHERE table_id = :table_id ORDER BY version',
    json_columns=("schema",))
INSERT_SCHEMA_VERSION = _insert("schema_versions", ("table_id", "version", "schema",
                                                    "created_at"), json=("schema",))

# ---- snapshots and manifests --------------------------------------------------------------
# A commit (and snapshot expiry) locks its table row first on Postgres: racing committers
# queue there, and the losers fail on the snapshot check before any insert. On SQLite the
# write transaction holds the database lock already (BEGIN IMMEDIATE). No stored JSON.
_TABLE_FOR_UPDATE = "SELECT id, current_snapshot_id, schema_version FROM tables WHERE name = :name"
TABLE_FOR_UPDATE = Statement(_TABLE_FOR_UPDATE, postgresql=_TABLE_FOR_UPDATE + " FOR UPDATE")

_SNAPSHOT_COLUMNS = ("table_id", "snapshot_id", "parent_id", "schema_version", "operation",
                     "commit_id", "created_at", "summary")
_SNAPSHOTS = f"SELECT {', '.join(_SNAPSHOT_COLUMNS)} FROM snapshots WHERE table_id = :table_id"
SNAPSHOT_BY_ID = Statement(_SNAPSHOTS + " AND snapshot_id = :snapshot_id",
                           json_columns=("summary",))
SNAPSHOT_BY_COMMIT = Statement(_SNAPSHOTS + " AND commit_id = :commit_id",
                               json_columns=("summary",))
SNAPSHOTS_OF_TABLE = Statement(_SNAPSHOTS + " ORDER BY snapshot_id", json_columns=("summary",))
INSERT_SNAPSHOT = _insert("snapshots", _SNAPSHOT_COLUMNS, json=("summary",))

MANIFEST_COLUMNS = ("table_id", "extent_id", "added_snapshot_id", "removed_snapshot_id",
                    "object_path", "format", "byte_size", "row_count", "block_count", "min_ts",
                    "max_ts", "schema_version", "column_stats", "present_paths")
INSERT_MANIFEST = _insert("manifests", MANIFEST_COLUMNS,
                          json=("column_stats", "present_paths"))
INSERT_FILTER = _insert("manifest_filters", ("table_id", "extent_id", "column_name", "filter"))


@lru_cache(maxsize=64)
def mark_removed(n: int) -> Statement:
    """Mark `n` live extents (`:e0` ... ) removed by snapshot `:snapshot_id`."""
    return Statement("UPDATE manifests SET removed_snapshot_id = :snapshot_id "
                     f"WHERE table_id = :table_id AND extent_id IN {in_list('e', n)} "
                     "AND removed_snapshot_id IS NULL")


# The compare-and-swap that publishes snapshot `:new_id` (see `shoal.catalog.base`).
ADVANCE_TABLE = Statement(
    "UPDATE tables SET current_snapshot_id = :new_id, schema_version = :schema_version "
    "WHERE id = :table_id AND current_snapshot_id = :expected")

# ---- ledger and source offsets --------------------------------------------------------------
LEDGER_BY_KEY = Statement(
    'SELECT "key", table_id, snapshot_id, ack, created_at FROM ingest_ledger '
    'WHERE "key" = :key', json_columns=("ack",))
INSERT_LEDGER = _insert("ingest_ledger", ("key", "table_id", "snapshot_id", "ack",
                                          "created_at"), json=("ack",))
UPSERT_OFFSET = _insert(
    "source_offsets", ("source", "partition", "table_id", "offset", "snapshot_id",
                       "updated_at"),
    ' ON CONFLICT ("source", "partition") DO UPDATE SET "offset" = excluded."offset", '
    '"table_id" = excluded."table_id", "snapshot_id" = excluded."snapshot_id", '
    '"updated_at" = excluded."updated_at"')
SOURCE_OFFSETS = Statement(
    'SELECT "partition", "offset" FROM source_offsets WHERE "source" = :source')
