"""`LiteCatalog`: the embedded (SQLite) catalog, its hot operations on the standard library's
`sqlite3`, every other operation through `SqlCatalog`, opened on first use.

Why two ways in: importing SQLAlchemy costs about 0.1 s of CPU, and a one-line `shoal ingest`
took 0.27 s with it, 0.16 s without (this project's 2-vCPU machine, BENCHMARKS.md); what
every ingest asks of the catalog is four plain statements: `load_table`, `ledger_get`,
`commit` and, after a broken commit, `find_commit`. Those run here over `sqlite3`; so a
`shoal ingest` into an existing table never imports SQLAlchemy. Everything else (DDL,
planning, maintenance, work units, migrations) is `SqlCatalog`'s, opened on first use: one
implementation each, and stage 1's SQL, which SQLAlchemy writes for both dialects, stays
there.

The transactions are `SqlCatalog`'s on SQLite: WAL, `synchronous=FULL`, a 60 s busy
timeout, foreign keys on; a write starts with `BEGIN IMMEDIATE` (writers queue on the lock),
a read with a deferred `BEGIN` (the table row and its schema version are one snapshot). The
rows are the same: JSON columns hold the text SQLAlchemy's JSON type writes
(`rows.to_json`); tests/catalog/test_lite_catalog.py replays one history through both and
compares the catalog files row by row, and the catalog contract runs over this class.

A catalog file that does not exist yet, or is at another catalog version, is opened by
`SqlCatalog` straight away (it creates, migrates or refuses it).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from shoal.catalog.base import (Clock, ExpiredSnapshots, LedgerEntry,
                                LedgerKeyExistsError, LedgerRecord, ManifestEntry, PlanResult,
                                Snapshot, SourceOffset, TableInfo, WorkUnit)
from shoal.catalog.cache import DEFAULT_CACHE_BYTES, MISSING
from shoal.catalog.peek import sqlite_file
from shoal.catalog.rows import (CATALOG_VERSION, SCHEMA_CACHE_ENTRIES, chunks, decoding,
                                manifest_row, snapshot_of, to_json)
from shoal.errors import (CatalogBusyError, CatalogCorruptError, CommitConflictError,
                          CommitStateUnknownError, TableNotFoundError)
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

_TABLE = ("SELECT id, name, current_snapshot_id, schema_version, mode, properties, created_at "
          "FROM tables WHERE name = ?")
_MANIFEST_COLUMNS = ("table_id", "extent_id", "added_snapshot_id", "removed_snapshot_id",
                     "object_path", "format", "byte_size", "row_count", "block_count", "min_ts",
                     "max_ts", "schema_version", "column_stats", "present_paths")
_JSON_MANIFEST_COLUMNS = ("column_stats", "present_paths")


def _insert(table: str, columns: Sequence[str], suffix: str = "") -> str:
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" for _ in columns)
    return f'INSERT INTO "{table}" ({names}) VALUES ({marks}){suffix}'


_INSERT_SCHEMA = _insert("schema_versions", ("table_id", "version", "schema", "created_at"))
_INSERT_SNAPSHOT = _insert("snapshots", ("table_id", "snapshot_id", "parent_id",
                                         "schema_version", "operation", "commit_id",
                                         "created_at", "summary"))
_INSERT_MANIFEST = _insert("manifests", _MANIFEST_COLUMNS)
_INSERT_FILTER = _insert("manifest_filters", ("table_id", "extent_id", "column_name", "filter"))
_INSERT_LEDGER = _insert("ingest_ledger", ("key", "table_id", "snapshot_id", "ack",
                                           "created_at"))
_UPSERT_OFFSET = _insert(
    "source_offsets", ("source", "partition", "table_id", "offset", "snapshot_id",
                       "updated_at"),
    ' ON CONFLICT ("source", "partition") DO UPDATE SET "offset" = excluded."offset", '
    '"table_id" = excluded."table_id", "snapshot_id" = excluded."snapshot_id", '
    '"updated_at" = excluded."updated_at"')
_CAS = ('UPDATE tables SET current_snapshot_id = ?, schema_version = ? '
        'WHERE id = ? AND current_snapshot_id = ?')


def _stored_version(path: str) -> int | None:
    """The catalog version recorded in the file at `path`, or None (no file, no catalog,
    unreadable: `SqlCatalog` decides what that means)."""
    if not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(path, timeout=60.0)
        try:
            row = conn.execute("SELECT value FROM catalog_meta WHERE key = 'version'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        log.debug("catalog version of %s unreadable with sqlite3: %s", path, e)
        return None
    return None if row is None else int(row[0])


class _Pool:
    """`sqlite3` connections to one file, set up as `SqlCatalog` sets its own up: at most
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

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=60000",
                       "foreign_keys=ON"):
            conn.execute(f"PRAGMA {pragma}")
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if not self._slots.acquire(timeout=self._wait_s):
            raise CatalogBusyError(self._max, self._wait_s)
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._connect()
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
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction (writes: `commit` runs its own)."""
        with self._pool.connection() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                _rollback(conn)
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _table_row(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
        row = conn.execute(_TABLE, (name,)).fetchone()
        if row is None:
            raise TableNotFoundError(name)
        return row

    # ---- the hot operations -----------------------------------------------------------------
    def load_table(self, name: str) -> TableInfo:
        with self._read() as conn:
            row = self._table_row(conn, name)
            with decoding("tables", f'table "{name}"'):
                properties = dict(json.loads(row["properties"]))
            version = row["schema_version"]
            key = (row["id"], version)
            schema = self._schema_cache.get(key)
            if schema is MISSING:
                with decoding("schema_versions", f'table "{name}" version {version}'):
                    found = conn.execute(
                        "SELECT schema FROM schema_versions WHERE table_id = ? AND version = ?",
                        key).fetchone()
                    if found is None:
                        raise CatalogCorruptError("schema_versions",
                                                  f'table "{name}" version {version}',
                                                  "the table's schema version is missing")
                    schema = Schema.from_json(json.loads(found[0]))
                self._schema_cache.put(key, schema, 1)
        return TableInfo(id=row["id"], name=row["name"],
                         current_snapshot_id=row["current_snapshot_id"], schema=schema,
                         mode=row["mode"], properties=properties, created_at=row["created_at"])

    def ledger_get(self, key: str) -> LedgerRecord | None:
        with self._read() as conn, decoding("ingest_ledger", f'key "{key}"'):
            r = conn.execute('SELECT "key", table_id, snapshot_id, ack, created_at '
                             'FROM ingest_ledger WHERE "key" = ?', (key,)).fetchone()
            if r is None:
                return None
            return LedgerRecord(key=r["key"], table_id=r["table_id"],
                                snapshot_id=r["snapshot_id"], ack=dict(json.loads(r["ack"])),
                                created_at=r["created_at"])

    def find_commit(self, table: str, commit_id: str) -> Snapshot | None:
        with self._read() as conn:
            row = self._table_row(conn, table)
            with decoding("snapshots", f'table "{table}" commit {commit_id}'):
                s = conn.execute("SELECT * FROM snapshots WHERE table_id = ? AND commit_id = ?",
                                 (row["id"], commit_id)).fetchone()
                return None if s is None else snapshot_of(s, json.loads(s["summary"]))

    def commit(self, table: str, *, expected_snapshot_id: int, operation: str,
               commit_id: str, add: Sequence[ManifestEntry] = (),
               remove: Sequence[str] = (), schema: Schema | None = None,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> Snapshot:
        """`SqlCatalog.commit`'s transaction, statement for statement."""
        new_id = expected_snapshot_id + 1
        now = self._clock()
        summary = summary or {}
        duplicate = False
        with self._pool.connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                table_id, version = self._commit_rows(
                    conn, table, expected_snapshot_id, new_id, now, operation=operation,
                    commit_id=commit_id, add=add, remove=remove, schema=schema, ledger=ledger,
                    offsets=offsets, summary=summary)
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
            self._raise_replay(ledger)
            raise CommitConflictError(table, expected_snapshot_id)
        return Snapshot(table_id=table_id, snapshot_id=new_id, parent_id=expected_snapshot_id,
                        schema_version=version, operation=operation, created_at=now,
                        commit_id=commit_id, summary=summary)

    def _commit_rows(self, conn: sqlite3.Connection, table: str, expected: int, new_id: int,
                     now: float, *, operation: str, commit_id: str,
                     add: Sequence[ManifestEntry], remove: Sequence[str],
                     schema: Schema | None, ledger: Sequence[LedgerEntry],
                     offsets: Sequence[SourceOffset], summary: dict[str, Any]
                     ) -> tuple[int, int]:
        """The statements of one commit inside its open transaction: (table id, the
        snapshot's schema version)."""
        row = conn.execute("SELECT id, current_snapshot_id, schema_version FROM tables "
                           "WHERE name = ?", (table,)).fetchone()
        if row is None:
            raise TableNotFoundError(table)
        table_id, current, version = row
        if current != expected:
            raise CommitConflictError(table, expected, current)
        if schema is not None:
            if schema.version != version + 1:
                raise CommitConflictError(table, expected, current)
            version = schema.version
            conn.execute(_INSERT_SCHEMA, (table_id, version, to_json(schema.to_json()), now))
        conn.execute(_INSERT_SNAPSHOT, (table_id, new_id, expected, version, operation,
                                        commit_id, now, to_json(summary)))
        if add:
            conn.executemany(_INSERT_MANIFEST, [_manifest_values(table_id, new_id, e)
                                                for e in add])
            conn.executemany(_INSERT_FILTER, [(table_id, e.extent_id, c, f) for e in add
                                              for c, f in e.membership_filters.items()])
        if remove:
            removed = 0
            for chunk in chunks(list(remove)):
                marks = ", ".join("?" for _ in chunk)
                removed += conn.execute(
                    "UPDATE manifests SET removed_snapshot_id = ? WHERE table_id = ? AND "
                    f"extent_id IN ({marks}) AND removed_snapshot_id IS NULL",
                    (new_id, table_id, *chunk)).rowcount
            if removed != len(set(remove)):
                raise CommitConflictError(table, expected)
        if ledger:
            conn.executemany(_INSERT_LEDGER, [
                (le.key, table_id, new_id, to_json({**le.ack, "snapshot_id": new_id}), now)
                for le in ledger])
        for off in offsets:
            conn.execute(_UPSERT_OFFSET, (off.source, off.partition, table_id, off.offset,
                                          new_id, now))
        if conn.execute(_CAS, (new_id, version, table_id, expected)).rowcount != 1:
            raise CommitConflictError(table, expected)
        return table_id, version

    def _raise_replay(self, ledger: Sequence[LedgerEntry]) -> None:
        for le in ledger:
            rec = self.ledger_get(le.key)
            if rec is not None:
                raise LedgerKeyExistsError(rec)

    # ---- everything else: SqlCatalog ----------------------------------------------------------
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

    def snapshot(self, table: str, snapshot_id: int | None = None) -> Snapshot:
        return self.full().snapshot(table, snapshot_id)

    def snapshots(self, table: str) -> list[Snapshot]:
        return self.full().snapshots(table)

    def manifests(self, table: str, snapshot_id: int | None = None) -> list[ManifestEntry]:
        return self.full().manifests(table, snapshot_id)

    def live_extent_ids(self, table: str, extent_ids: Sequence[str]) -> set[str]:
        return self.full().live_extent_ids(table, extent_ids)

    def plan_extents(self, table: str, predicate: BlockPredicate | None = None, *,
                     snapshot_id: int | None = None) -> PlanResult:
        return self.full().plan_extents(table, predicate, snapshot_id=snapshot_id)

    def table_counts(self, table: str, snapshot_id: int | None = None) -> tuple[int, int]:
        return self.full().table_counts(table, snapshot_id)

    def referenced_paths(self) -> set[str]:
        return self.full().referenced_paths()

    def expire_snapshots(self, table: str, *, keep_from: int) -> ExpiredSnapshots:
        return self.full().expire_snapshots(table, keep_from=keep_from)

    def sweep_ledger(self, older_than_s: float) -> int:
        return self.full().sweep_ledger(older_than_s)

    def source_offsets(self, source: str) -> dict[str, int]:
        return self.full().source_offsets(source)

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


def _manifest_values(table_id: int, snapshot_id: int, e: ManifestEntry) -> tuple[Any, ...]:
    values = manifest_row(table_id, snapshot_id, e)
    for c in _JSON_MANIFEST_COLUMNS:
        values[c] = to_json(values[c])
    return tuple(values[c] for c in _MANIFEST_COLUMNS)
