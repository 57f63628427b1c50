"""A table's current schema and mode, read from an embedded (SQLite) catalog with the standard
library's `sqlite3`, before SQLAlchemy is imported: a hint, never the truth.

`shoal ingest` spends about a third of its start-up importing SQLAlchemy and opening the
catalog. With this hint it coerces its first chunk meanwhile (the coercion releases the GIL
for most of its work, the import holds it), and the write path takes that coercion only if
the schema it loads through the catalog equals the hint (`shoal.cli.ingest._Speculation`):
a table changed in between, a Postgres catalog, a catalog this cannot read all mean the
chunk is coerced as usual.

It reads two tables of `shoal.catalog.tables` (`tables`, `schema_versions`) by their
column names, read-only; a catalog laid out otherwise gives None (and a debug log line).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from urllib.parse import quote

from shoal.errors import ShoalError
from shoal.types.schema import SCHEMA_MODES, Schema, SchemaMode

logger = logging.getLogger(__name__)

SQLITE_PREFIX = "sqlite:///"
_QUERY = ("SELECT sv.schema, t.mode FROM tables AS t JOIN schema_versions AS sv "
          "ON sv.table_id = t.id AND sv.version = t.schema_version WHERE t.name = ?")


def sqlite_file(url: str) -> str | None:
    """The file of a plain `sqlite:///<path>` URL (as SQLAlchemy spells it), or None for
    anything else (Postgres, `:memory:`, URL parameters)."""
    if not url.startswith(SQLITE_PREFIX) or "?" in url:
        return None
    path = url[len(SQLITE_PREFIX):]
    if not path or path == ":memory:":
        return None
    return path


def peek_table(url: str, name: str) -> tuple[Schema, SchemaMode] | None:
    """(current schema, mode) of table `name` in the SQLite catalog at `url`
    (`sqlite:///<path>`, as SQLAlchemy spells it), or None when the URL is not a plain
    SQLite file, the file or the table does not exist, or anything fails to read."""
    path = sqlite_file(url)
    if path is None or not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=0.0)
        try:
            row = conn.execute(_QUERY, (name,)).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        schema, mode = Schema.from_json(json.loads(row[0])), row[1]
    except (sqlite3.Error, ShoalError, ValueError, KeyError, TypeError) as e:
        logger.debug("no schema hint for table %r from %s: %s: %s", name, path,
                     type(e).__name__, e)
        return None
    if mode not in SCHEMA_MODES:
        logger.debug("no schema hint for table %r: unknown mode %r", name, mode)
        return None
    return schema, mode
