"""The embedded catalog on the standard library's `sqlite3`: which URLs name a plain SQLite
file, how every connection to one is set up (both paths set theirs up from `PRAGMAS`), and
`SqliteDb`, the `Db` that runs `shoal.catalog.statements` over a `sqlite3` connection.

Imports nothing but the standard library and `shoal.catalog.statements`: `shoal ingest`
reads its schema hint through here before SQLAlchemy, the catalog's records or the extent
formats are imported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

from shoal.catalog.statements import Statement

SQLITE_PREFIX = "sqlite:///"
# Every connection to an embedded catalog: WAL (readers never wait for the writer), a commit
# is durable when it returns, writers wait up to 60 s for the lock, foreign keys checked.
PRAGMAS = ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=60000", "foreign_keys=ON")
BUSY_TIMEOUT_S = 60.0


def sqlite_file(url: str) -> str | None:
    """The file of a plain `sqlite:///<path>` URL (as SQLAlchemy spells it), or None for
    anything else (Postgres, `:memory:`, URL parameters)."""
    if not url.startswith(SQLITE_PREFIX) or "?" in url:
        return None
    path = url[len(SQLITE_PREFIX):]
    if not path or path == ":memory:":
        return None
    return path


def set_up(conn: Any) -> None:
    """Apply `PRAGMAS` to a new DB-API connection to the catalog file."""
    cur = conn.cursor()
    for pragma in PRAGMAS:
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def connect(path: str) -> sqlite3.Connection:
    """A read-write connection, set up, transactions begun by the caller."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    set_up(conn)
    return conn


def connect_read_only(path: str) -> sqlite3.Connection:
    """A read-only connection that never waits for a lock and never creates the file."""
    conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=0.0,
                           isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


class SqliteDb:
    """`Db` over a `sqlite3` connection whose rows are `sqlite3.Row`: JSON parameters
    encoded and JSON columns decoded with `json`, as SQLAlchemy's JSON type does on SQLite
    (the two paths write the same bytes)."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @staticmethod
    def _params(stmt: Statement, params: Mapping[str, Any]) -> Mapping[str, Any]:
        if not stmt.json_params:
            return params
        return {**params, **{k: json.dumps(params[k]) for k in stmt.json_params}}

    @staticmethod
    def _row(stmt: Statement, row: sqlite3.Row) -> Mapping[str, Any]:
        if not stmt.json_columns:
            return cast(Mapping[str, Any], row)     # by column name, as a mapping
        out = dict(zip(row.keys(), row, strict=True))
        for c in stmt.json_columns:
            if out[c] is not None:
                out[c] = json.loads(out[c])
        return out

    def one(self, stmt: Statement, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        row = self.conn.execute(stmt.sql, self._params(stmt, params)).fetchone()
        return None if row is None else self._row(stmt, row)

    def all(self, stmt: Statement, params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return [self._row(stmt, r)
                for r in self.conn.execute(stmt.sql, self._params(stmt, params)).fetchall()]

    def run(self, stmt: Statement, params: Mapping[str, Any]) -> int:
        return self.conn.execute(stmt.sql, self._params(stmt, params)).rowcount

    def many(self, stmt: Statement, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.executemany(stmt.sql, [self._params(stmt, r) for r in rows])
