"""How catalog rows map to the records of `shoal.catalog.base`, shared by the two ways the
catalog is reached: SQLAlchemy (`shoal.catalog.sql`, every operation, SQLite and Postgres)
and the standard library's `sqlite3` (`shoal.catalog.lite`, the embedded catalog's hot
operations). A row is a mapping by column name, its JSON columns decoded. Imports neither
SQLAlchemy nor pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from shoal.catalog.base import ManifestEntry, Snapshot
from shoal.errors import CatalogCorruptError, SchemaError

# The catalog schema version this shoal writes (`shoal.catalog.sql.model.MIGRATIONS` has one
# migration per version, and checks it on import).
CATALOG_VERSION = 1
IN_CHUNK = 2000          # ids per `IN (...)` list
SCHEMA_CACHE_ENTRIES = 4096     # decoded schema versions a catalog keeps (committed ones only)

# What decoding a stored value raises when the value is damaged: JSON that does not parse
# (ValueError), a document without its keys or of the wrong shape, a schema that does not
# validate, a membership filter with a bad header (ValueError).
DECODE_ERRORS = (ValueError, KeyError, TypeError, SchemaError)


@contextmanager
def decoding(catalog_table: str, row: str) -> Iterator[None]:
    """Decode failures inside the block are corrupt data of `row` of `catalog_table`.

    Wraps the fetch too: SQLAlchemy decodes JSON columns while it builds the rows."""
    try:
        yield
    except DECODE_ERRORS as e:
        raise CatalogCorruptError(catalog_table, row, f"{type(e).__name__}: {e}") from e


def manifest_row(table_id: int, snapshot_id: int, e: ManifestEntry) -> dict[str, Any]:
    """The `manifests` row of `e`, added by snapshot `snapshot_id` (JSON values unencoded)."""
    return {"table_id": table_id, "extent_id": e.extent_id, "added_snapshot_id": snapshot_id,
            "removed_snapshot_id": None, "object_path": e.object_path, "format": e.format,
            "byte_size": e.byte_size, "row_count": e.row_count, "block_count": e.block_count,
            "min_ts": e.min_ts, "max_ts": e.max_ts, "schema_version": e.schema_version,
            "column_stats": e.column_stats, "present_paths": e.present_paths}


def manifest_entry(m: Mapping[Any, Any]) -> ManifestEntry:
    """The entry of a `manifests` row (its column stats only if the row has them)."""
    return ManifestEntry(
        extent_id=m["extent_id"], object_path=m["object_path"], byte_size=m["byte_size"],
        row_count=m["row_count"], block_count=m["block_count"], min_ts=m["min_ts"],
        max_ts=m["max_ts"], schema_version=m["schema_version"], format=m["format"],
        column_stats=dict(m["column_stats"]) if "column_stats" in m else {},
        present_paths=dict(m["present_paths"] or {}),
        added_snapshot_id=m["added_snapshot_id"], removed_snapshot_id=m["removed_snapshot_id"])


def snapshot_of(s: Any, summary: dict[str, Any]) -> Snapshot:
    """The snapshot of a `snapshots` row (a mapping by column name), its `summary`
    decoded by the caller."""
    return Snapshot(table_id=s["table_id"], snapshot_id=s["snapshot_id"],
                    parent_id=s["parent_id"], schema_version=s["schema_version"],
                    operation=s["operation"], created_at=s["created_at"],
                    commit_id=s["commit_id"], summary=dict(summary))


def chunks(items: list[Any]) -> Iterator[list[Any]]:
    for i in range(0, len(items), IN_CHUNK):
        yield items[i:i + IN_CHUNK]
