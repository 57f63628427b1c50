"""`LiteCatalog`: the embedded (SQLite) catalog, its hot operations on the standard library's
`sqlite3`, every other operation through `SqlCatalog`, opened on first use.

Why two ways in: importing SQLAlchemy costs about 0.1 s of CPU, and a one-line `shoal ingest`
took 0.27 s with it, 0.16 s without (this project's 2-vCPU machine, BENCHMARKS.md); what
every ingest asks of the catalog is four plain operations: `load_table`, `ledger_get`,
`commit` and, after a broken commit, `find_commit`. Those run here over `sqlite3`; so a
`shoal ingest` into an existing table never imports SQLAlchemy. Everything else (DDL,
planning, maintenance, work units, migrations) is `SqlCatalog`'s, opened on first use.

The four are not copies of `SqlCatalog`'s: both run `shoal.catalog.operations` over the SQL
texts of `shoal.catalog.statements`; this class only opens the transactions (a pool of
`sqlite3` connections) and maps `sqlite3`'s errors as `SqlCatalog` maps SQLAlchemy's. The
connections are set up as `SqlCatalog`'s on SQLite (`shoal.catalog.sqlite.PRAGMAS`: WAL,
`synchronous=FULL`, a 60 s busy timeout, foreign keys on); a write starts with `BEGIN
IMMEDIATE` (writers queue on the lock), a read with a deferred `BEGIN` (the table row and
its schema version are one snapshot). JSON columns hold the text SQLAlchemy's JSON type
writes; tests/catalog/test_lite_catalog.py replays one history through both and compares
the catalog files row by row, and the catalog contract runs over this class.

A catalog file that does not exist yet, or is at another catalog version, is opened by
`SqlCatalog` straight away (it creates, migrates or refuses it).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from shoal.catalog import operations as ops
from shoal.catalog import statements as S
from shoal.catalog.base import (Clock, DroppedTable, ExpiredSnapshots, LedgerEntry,
                                LedgerRecord, ManifestEntry, PlanResult, Snapshot, SourceOffset,
                                TableInfo, WorkUnit)
from shoal.catalog.cache import DEFAULT_CACHE_BYTES
from shoal.catalog.rows import CATALOG_VERSION, SCHEMA_CACHE_ENTRIES
from shoal.catalog.sqlite import BUSY_TIMEOUT_S, SqliteDb, connect, sqlite_file
from shoal.errors import CatalogBusyError, CommitConflictError, CommitStateUnknownError
from shoal.format.base import BlockPredicate
from shoal.lru import Lru
from shoal.types.schema import Schema, SchemaMode

if TYPE_CHECKING:
    from shoal.catalog.cache import ExtentCache
    from shoal.catalog.sql import SqlCatalog

log = logging.getLogger(__name__)

IDLE_CONNECTIONS = 8            # kept open for reuse; more are opened when threads need them
MAX_CONNECTIONS = 32            # open at once (SqlCatalog's pool: 8 + 24 overflow)
CONNECTION_WAIT_S = 60.0        # how long an operation waits for a connection to be free


def _stored_version(path: str) -> int | None:
    """The catalog version recorded in the file at `path`, or None (no file, no catalog,
    unreadable: `SqlCatalog` decides what that means)."""
    if not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        try:
            row = conn.execute(S.READ_CATALOG_VERSION.sql).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        log.debug("catalog version of %s unreadable with sqlite3: %s", path, e)
        return None
    return None if row is None else int(row[0])


class _Pool:
    """`sqlite3` connections to one file (`shoal.catalog.sqlite.connect`): at most
    `max_connections` open at once (an operation waits up to `wait_s` for one, then
    `CatalogBusyError`), idle ones reused (at most `IDLE_CONNECTIONS` kept), any thread may
    use any of them. No caller holds two at once (the wait could never end)."""

    def __init__(self, path: str, *, max_connections: int = MAX_CONNECTIONS,
                 wait_s: float = CONNECTION_WAIT_S) -> None:
        self.path = path
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._max = max_connections
        self._wait_s = wait_s
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if not self._slots.acquire(timeout=self._wait_s):
            raise CatalogBusyError(self._max, self._wait_s)
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = connect(self.path)
            try:
                yield conn
            finally:
                # A transaction still open (its ROLLBACK failed): the connection is dropped.
                with self._lock:
                    keep = (not conn.in_transaction and not self._closed
                            and len(self._idle) < IDLE_CONNECTIONS)
                    if keep:
                        self._idle.append(conn)
                if not keep:
                    conn.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            # The caller raises the error that made it roll back; the connection is dropped
            # (`_Pool.connection` closes one still in a transaction).
            log.warning("catalog rollback failed", exc_info=True)


class LiteCatalog:
    """The `Catalog` protocol over an embedded SQLite file (see the module's docstring)."""

    dialect = "sqlite"          # as `SqlCatalog.dialect`

    def __init__(self, url: str, *, clock: Clock = time.time,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        path = sqlite_file(url)
        if path is None:
            raise ValueError(f"not a plain SQLite catalog URL: {url!r}")
        self.url = url
        self._clock = clock
        self._cache_bytes = cache_bytes
        self._pool = _Pool(path)
        self._sql: SqlCatalog | None = None
        self._sql_lock = threading.Lock()
        self._schema_cache = Lru(SCHEMA_CACHE_ENTRIES)
        if _stored_version(path) != CATALOG_VERSION:
            self.full()           # creates, migrates or refuses the file

    def full(self) -> SqlCatalog:
        """The `SqlCatalog` on the same file, opened (SQLAlchemy imported) on first use."""
        sql = self._sql
        if sql is None:
            with self._sql_lock:
                if self._sql is None:
                    from shoal.catalog.sql import SqlCatalog

                    self._sql = SqlCatalog(self.url, clock=self._clock,
                                           cache_bytes=self._cache_bytes)
                sql = self._sql
        return sql

    @property
    def engine(self) -> Any:
        return self.full().engine

    @property
    def extent_cache(self) -> ExtentCache:
        return self.full().extent_cache

    @extent_cache.setter
    def extent_cache(self, cache: ExtentCache) -> None:
        self.full().extent_cache = cache

    def close(self) -> None:
        self._pool.close()
        if self._sql is not None:
            self._sql.close()

    # ---- transactions -----------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[SqliteDb]:
        """A read transaction (writes: `commit` runs its own)."""
        with self._pool.connection() as conn:
            conn.execute("BEGIN")
            try:
                yield SqliteDb(conn)
            except BaseException:
                _rollback(conn)
                raise
            conn.execute("COMMIT")

    # ---- the hot operations -----------------------------------------------------------------
    def load_table(self, name: str) -> TableInfo:
        with self._read() as db:
            return ops.load_table(db, name, self._schema_cache)

    def ledger_get(self, key: str) -> LedgerRecord | None:
        with self._read() as db:
            return ops.ledger_get(db, key)

    def find_commit(self, table: str, commit_id: str) -> Snapshot | None:
        with self._read() as db:
            return ops.find_commit(db, table, commit_id)

    def commit(self, table: str, *, expected_snapshot_id: int, operation: str,
               commit_id: str, add: Sequence[ManifestEntry] = (),
               remove: Sequence[str] = (), schema: Schema | None = None,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> Snapshot:
        """`SqlCatalog.commit`'s statements (`operations.commit_rows`) and its error
        mapping, on `sqlite3`."""
        duplicate = False
        with self._pool.connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                snap = ops.commit_rows(
                    SqliteDb(conn), table, expected=expected_snapshot_id, now=self._clock(),
                    operation=operation, commit_id=commit_id, add=add, remove=remove,
                    schema=schema, ledger=ledger, offsets=offsets, summary=summary or {})
            except sqlite3.IntegrityError:
                _rollback(conn)
                duplicate = True        # looked up below, with the connection given back
            except sqlite3.OperationalError as e:
                _rollback(conn)
                if "locked" in str(e).lower():
                    raise CommitConflictError(table, expected_snapshot_id) from None
                raise
            except BaseException:
                _rollback(conn)
                raise
            if not duplicate:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as e:
                    _rollback(conn)
                    raise CommitStateUnknownError(table, e) from e
        if duplicate:
            ops.raise_replay(ledger, self.ledger_get)
            raise CommitConflictError(table, expected_snapshot_id)
        return snap

    # ---- everything else: SqlCatalog, by role --------------------------------------------
    # tables and schema versions
    def create_table(self, name: str, schema: Schema, *, mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo:
        return self.full().create_table(name, schema, mode=mode, properties=properties)

    def list_tables(self) -> list[TableInfo]:
        return self.full().list_tables()

    def schema_history(self, name: str) -> list[Schema]:
        return self.full().schema_history(name)

    def schema_version(self, name: str, version: int) -> Schema:
        return self.full().schema_version(name, version)

    def set_properties(self, name: str, properties: dict[str, Any], *,
                       mode: SchemaMode | None = None) -> TableInfo:
        return self.full().set_properties(name, properties, mode=mode)

    def rename_table(self, name: str, new_name: str) -> TableInfo:
        return self.full().rename_table(name, new_name)

    def drop_table(self, name: str) -> DroppedTable:
        return self.full().drop_table(name)

    def dropped_tables(self, name: str | None = None) -> list[DroppedTable]:
        return self.full().dropped_tables(name)

    def undrop_table(self, table_id: int) -> TableInfo:
        return self.full().undrop_table(table_id)

    def purge_table(self, table_id: int) -> list[str]:
        return self.full().purge_table(table_id)

    # snapshots and manifests
    def snapshot(self, table: str, snapshot_id: int | None = None) -> Snapshot:
        return self.full().snapshot(table, snapshot_id)

    def snapshots(self, table: str) -> list[Snapshot]:
        return self.full().snapshots(table)

    def manifests(self, table: str, snapshot_id: int | None = None) -> list[ManifestEntry]:
        return self.full().manifests(table, snapshot_id)

    def live_extent_ids(self, table: str, extent_ids: Sequence[str]) -> set[str]:
        return self.full().live_extent_ids(table, extent_ids)

    def table_counts(self, table: str, snapshot_id: int | None = None) -> tuple[int, int]:
        return self.full().table_counts(table, snapshot_id)

    def referenced_paths(self) -> set[str]:
        return self.full().referenced_paths()

    def expire_snapshots(self, table: str, *, keep_from: int) -> ExpiredSnapshots:
        return self.full().expire_snapshots(table, keep_from=keep_from)

    # pruning queries
    def plan_extents(self, table: str, predicate: BlockPredicate | None = None, *,
                     snapshot_id: int | None = None) -> PlanResult:
        return self.full().plan_extents(table, predicate, snapshot_id=snapshot_id)

    # ledger and source offsets
    def sweep_ledger(self, older_than_s: float) -> int:
        return self.full().sweep_ledger(older_than_s)

    def source_offsets(self, source: str) -> dict[str, int]:
        return self.full().source_offsets(source)

    # work units
    def enqueue_work(self, kind: str, *, table: str | None = None,
                     payload: dict[str, Any] | None = None, dedupe: bool = False) -> WorkUnit:
        return self.full().enqueue_work(kind, table=table, payload=payload, dedupe=dedupe)

    def claim_work(self, worker: str, *, kinds: Sequence[str] | None = None,
                   lease_s: float = 300.0) -> WorkUnit | None:
        return self.full().claim_work(worker, kinds=kinds, lease_s=lease_s)

    def finish_work(self, unit_id: int, worker: str, *, ok: bool,
                    result: dict[str, Any] | None = None) -> bool:
        return self.full().finish_work(unit_id, worker, ok=ok, result=result)

    def renew_work(self, unit_id: int, worker: str, *, lease_s: float = 300.0) -> bool:
        return self.full().renew_work(unit_id, worker, lease_s=lease_s)

    def list_work(self, *, kinds: Sequence[str] | None = None,
                  states: Sequence[str] | None = None, table: str | None = None,
                  limit: int = 100) -> list[WorkUnit]:
        return self.full().list_work(kinds=kinds, states=states, table=table, limit=limit)

