"""What every part of `SqlCatalog` stands on: the SQLAlchemy engine, its transactions, and
`SqlDb`, the `Db` that runs `shoal.catalog.statements` over a SQLAlchemy connection.

Transactions: SQLite runs in WAL mode (`shoal.catalog.sqlite.PRAGMAS`, the same set-up as
`LiteCatalog`'s connections) and every write transaction starts with `BEGIN IMMEDIATE`, so
writers queue on the database lock instead of failing on upgrade; Postgres runs at READ
COMMITTED. `_read()` and `_write()` yield a `SqlDb` whose `conn` takes SQLAlchemy Core
statements too (the operations only `SqlCatalog` runs are written in Core).

Time comes from the injected `clock` (default `time.time`). Opening migrates the catalog to
the current version (`shoal.catalog.sql.model`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Engine, bindparam, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.selectable import TextualSelect

from shoal.catalog.base import Clock
from shoal.catalog.cache import DEFAULT_CACHE_BYTES, ExtentCache
from shoal.catalog.rows import SCHEMA_CACHE_ENTRIES, decoding
from shoal.catalog.sql import model as T
from shoal.catalog.sqlite import BUSY_TIMEOUT_S, set_up
from shoal.catalog.statements import Statement
from shoal.errors import ConfigError
from shoal.lru import Lru

log = logging.getLogger(__name__)


@lru_cache(maxsize=512)
def _clause(stmt: Statement, dialect: str) -> TextClause | TextualSelect:
    """`stmt` as a SQLAlchemy construct, its JSON parameters and columns typed `Json` (so
    SQLAlchemy encodes and decodes them as the dialect needs), built once."""
    clause = text(stmt.text(dialect))
    if stmt.json_params:
        clause = clause.bindparams(*[bindparam(p, type_=T.Json) for p in stmt.json_params])
    if stmt.json_columns:
        return clause.columns(**dict.fromkeys(stmt.json_columns, T.Json))
    return clause


class SqlDb:
    """`Db` over a SQLAlchemy connection; `conn` for Core statements."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name

    def one(self, stmt: Statement, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        row = self.conn.execute(_clause(stmt, self.dialect), params).mappings().first()
        return cast(Mapping[str, Any] | None, row)

    def all(self, stmt: Statement, params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        rows = self.conn.execute(_clause(stmt, self.dialect), params).mappings()
        return cast(list[Mapping[str, Any]], list(rows))

    def run(self, stmt: Statement, params: Mapping[str, Any]) -> int:
        result: CursorResult[Any] = self.conn.execute(_clause(stmt, self.dialect), params)
        return result.rowcount

    def many(self, stmt: Statement, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.execute(_clause(stmt, self.dialect), list(rows))


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class SqlConnections:
    """The engine and transactions of one catalog database (see the module's docstring);
    the role mixins of `SqlCatalog` build on it."""

    def __init__(self, url: str, *, engine: Engine | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, clock: Clock = time.time,
                 pool_size: int = 8, max_overflow: int = 24) -> None:
        self.url = url
        self._clock = clock
        # Decoded manifest entries and membership filters for stage 1 (immutable per
        # extent id; see `shoal.catalog.cache`).
        self.extent_cache = ExtentCache(cache_bytes)
        # Decoded schemas by (table id, version), filled by read transactions only: a
        # committed schema version never changes (versions are appended, tables never
        # dropped), where one written inside a transaction could still roll back. Saves
        # half of `load_table` (every ingest request calls it).
        self._schema_cache = Lru(SCHEMA_CACHE_ENTRIES)
        sa_url = _normalise_url(url)
        if engine is None:
            if sa_url.startswith("sqlite"):
                engine = create_engine(sa_url, pool_size=pool_size, max_overflow=max_overflow,
                                       connect_args={"timeout": BUSY_TIMEOUT_S,
                                                     "check_same_thread": False})
            elif sa_url.startswith("postgresql"):
                engine = create_engine(sa_url, pool_size=pool_size, max_overflow=max_overflow,
                                       pool_pre_ping=True)
            else:
                raise ConfigError(f"unsupported catalog URL {url!r} (expected sqlite:///... or "
                                  "postgresql://...)")
        self.engine = engine
        self.dialect = engine.dialect.name
        if self.dialect == "sqlite":
            self._setup_sqlite(engine)
        with self._write() as db, decoding("catalog_meta", "version"):
            T.migrate(db.conn)

    @staticmethod
    def _setup_sqlite(engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            set_up(dbapi_conn)

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            mode = "IMMEDIATE" if conn.get_execution_options().get("shoal_write") else "DEFERRED"
            conn.exec_driver_sql(f"BEGIN {mode}")

    def _connect_for_write(self) -> Connection:
        """A connection whose transactions are write transactions (the caller begins one)."""
        return self.engine.connect().execution_options(shoal_write=True)

    @contextmanager
    def _write(self) -> Iterator[SqlDb]:
        with self._connect_for_write() as conn, conn.begin():
            yield SqlDb(conn)

    @contextmanager
    def _read(self) -> Iterator[SqlDb]:
        with self.engine.connect() as conn, conn.begin():
            yield SqlDb(conn)

    def close(self) -> None:
        self.engine.dispose()


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key generated by an INSERT of one row."""
    pk = result.inserted_primary_key
    assert pk is not None  # set for every single-row INSERT
    return int(pk[0])


def rollback(trans: Any) -> None:
    if trans is not None and trans.is_active:
        try:
            trans.rollback()
        except DBAPIError:
            # The connection broke: the transaction ends with it. The caller raises the
            # error that made it roll back; this one is only logged.
            log.warning("catalog rollback failed", exc_info=True)
