"""A table's current schema and mode, read from an embedded (SQLite) catalog with the standard
library's `sqlite3`, before SQLAlchemy is imported: a hint, never the truth.

`shoal ingest` spends about a third of its start-up importing SQLAlchemy and opening the
catalog. With this hint it coerces its first chunk meanwhile (the coercion releases the GIL
for most of its work, the import holds it), and the write path takes that coercion only if
the schema it loads through the catalog equals the hint (`shoal.ingest.bulk.Speculation`):
a table changed in between, a Postgres catalog, a catalog this cannot read all mean the
chunk is coerced as usual.

It reads the table row and its current schema version with the statements `load_table`
runs (`shoal.catalog.statements`), on a read-only connection that never waits for a lock;
a catalog laid out otherwise, or anything else that fails, gives None (and a debug log line).
Imports neither SQLAlchemy nor the catalog's records, the extent formats or the stores.
"""

from __future__ import annotations

import logging
import os
import sqlite3

from shoal.catalog import statements as S
from shoal.catalog.sqlite import SqliteDb, connect_read_only, sqlite_file
from shoal.errors import ShoalError
from shoal.types.schema import SCHEMA_MODES, Schema, SchemaMode

logger = logging.getLogger(__name__)

__all__ = ["peek_table"]


def peek_table(url: str, name: str) -> tuple[Schema, SchemaMode] | None:
    """(current schema, mode) of table `name` in the SQLite catalog at `url`
    (`sqlite:///<path>`, as SQLAlchemy spells it), or None when the URL is not a plain
    SQLite file, the file or the table does not exist, or anything fails to read."""
    path = sqlite_file(url)
    if path is None or not os.path.isfile(path):
        return None
    try:
        conn = connect_read_only(path)
        try:
            db = SqliteDb(conn)
            conn.execute("BEGIN")       # the row and its schema version: one snapshot
            row = db.one(S.TABLE_BY_NAME, {"name": name})
            found = None if row is None else db.one(
                S.SCHEMA_VERSION, {"table_id": row["id"], "version": row["schema_version"]})
        finally:
            conn.close()
        if row is None or found is None:
            return None
        schema, mode = Schema.from_json(found["schema"]), row["mode"]
    except (sqlite3.Error, ShoalError, ValueError, KeyError, TypeError) as e:
        logger.debug("no schema hint for table %r from %s: %s: %s", name, path,
                     type(e).__name__, e)
        return None
    if mode not in SCHEMA_MODES:
        logger.debug("no schema hint for table %r: unknown mode %r", name, mode)
        return None
    return schema, mode
