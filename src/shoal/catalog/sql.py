"""`SqlCatalog`: the catalog on SQLite (embedded default) or Postgres, via SQLAlchemy Core.

For an embedded SQLite file `open_catalog` gives `shoal.catalog.lite.LiteCatalog`, which
runs `load_table`, `ledger_get`, `commit` and `find_commit` on `sqlite3` (statement for
statement as here: tests/catalog/test_lite_catalog.py compares the rows both leave) and
hands every other operation to this class. A change to those four belongs in both.

Transactions: SQLite runs in WAL mode and every write transaction starts with
`BEGIN IMMEDIATE`, so writers queue on the database lock instead of failing on upgrade;
Postgres runs at READ COMMITTED, where the compare-and-swap `UPDATE ... WHERE
current_snapshot_id = :expected` re-checks the row after waiting for a concurrent writer and
the primary key of `(table_id, snapshot_id)` stops two commits from claiming one snapshot.
Errors raised before COMMIT mean the transaction certainly failed; an error raised by COMMIT
itself leaves the outcome unknown (`CommitStateUnknownError`).

Time comes from the injected `clock` (default `time.time`): row timestamps, the ledger
sweep's cutoff and work-unit leases. Stored values that do not decode (JSON, schema
documents, membership filters) raise `CatalogCorruptError` naming the catalog table and row.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import (Connection, CursorResult, Engine, and_, create_engine, delete, event, func,
                        insert, or_, select, update)
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from shoal.catalog import tables as T
from shoal.catalog.base import (PERMANENT_LEDGER_PREFIXES, Clock, ExpiredSnapshots, LedgerEntry,
                                LedgerKeyExistsError, LedgerRecord, ManifestEntry, PlanResult,
                                Snapshot, SourceOffset, TableInfo, WorkUnit)
from shoal.catalog.cache import (DEFAULT_CACHE_BYTES, MISSING, ExtentCache, entry_bytes,
                                 filter_bytes)
from shoal.catalog.pruning import bloom_leaves, compile_predicate, survives_filters
from shoal.catalog.rows import (DECODE_ERRORS, SCHEMA_CACHE_ENTRIES, chunks, decoding,
                                manifest_row, snapshot_of)
from shoal.errors import (CatalogCorruptError, CommitConflictError, CommitStateUnknownError,
                          ConfigError, InvalidSchemaError, SnapshotNotFoundError,
                          TableAlreadyExistsError, TableNotFoundError)
from shoal.format.base import BlockPredicate
from shoal.format.membership import BloomFilter
from shoal.lru import Lru
from shoal.types.schema import SCHEMA_MODES, Schema, SchemaMode, check_table_name

log = logging.getLogger(__name__)


# The columns of a table row that commits and expiry lock and read (no stored JSON).
_CAS_COLUMNS = (T.tables.c.id, T.tables.c.current_snapshot_id, T.tables.c.schema_version)


def _normalise_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class SqlCatalog:
    """The `Catalog` protocol over one SQL database."""

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
                                       connect_args={"timeout": 60, "check_same_thread": False})
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
        with self._write() as conn, decoding("catalog_meta", "version"):
            T.migrate(conn)

    # ---- connection plumbing ----------------------------------------------------------------
    @staticmethod
    def _setup_sqlite(engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            mode = "IMMEDIATE" if conn.get_execution_options().get("shoal_write") else "DEFERRED"
            conn.exec_driver_sql(f"BEGIN {mode}")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(shoal_write=True) as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def close(self) -> None:
        self.engine.dispose()

    # ---- tables and schemas -----------------------------------------------------------------
    def _table_row(self, conn: Connection, name: str) -> Any:
        with decoding("tables", f'table "{name}"'):
            row = conn.execute(select(T.tables).where(T.tables.c.name == name)).first()
        if row is None:
            raise TableNotFoundError(name)
        return row

    def _schema(self, conn: Connection, row: Any, version: int, *,
                committed: bool = False) -> Schema:
        """`committed`: `conn` is a read transaction, so the version it finds is committed
        and may be cached."""
        key = (row.id, version)
        if committed and (hit := self._schema_cache.get(key)) is not MISSING:
            return cast(Schema, hit)
        with decoding("schema_versions", f'table "{row.name}" version {version}'):
            doc: dict[str, Any] = conn.execute(select(T.schema_versions.c.schema).where(
                T.schema_versions.c.table_id == row.id,
                T.schema_versions.c.version == version)).scalar_one()
            schema = Schema.from_json(doc)
        if committed:
            self._schema_cache.put(key, schema, 1)
        return schema

    def _schemas(self, conn: Connection, row: Any) -> list[Schema]:
        """Every schema version of the table, oldest first."""
        with decoding("schema_versions", f'table "{row.name}"'):
            docs: Sequence[dict[str, Any]] = conn.execute(
                select(T.schema_versions.c.schema).where(T.schema_versions.c.table_id == row.id)
                                .order_by(T.schema_versions.c.version)).scalars().all()
            return [Schema.from_json(d) for d in docs]

    def _info(self, conn: Connection, row: Any, *, committed: bool = False) -> TableInfo:
        with decoding("tables", f'table "{row.name}"'):
            properties = dict(row.properties)
        return TableInfo(id=row.id, name=row.name, current_snapshot_id=row.current_snapshot_id,
                         schema=self._schema(conn, row, row.schema_version,
                                             committed=committed),
                         mode=row.mode, properties=properties, created_at=row.created_at)

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
            with self._write() as conn:
                if conn.execute(select(T.tables.c.id).where(T.tables.c.name == name)).first():
                    raise TableAlreadyExistsError(name)
                table_id = _inserted_id(conn.execute(insert(T.tables).values(
                    name=name, current_snapshot_id=1, schema_version=1, mode=mode,
                    properties=properties or {}, created_at=now)))
                conn.execute(insert(T.schema_versions).values(
                    table_id=table_id, version=1, schema=schema.to_json(), created_at=now))
                conn.execute(insert(T.snapshots).values(
                    table_id=table_id, snapshot_id=1, parent_id=None, schema_version=1,
                    operation="create", commit_id=uuid.uuid4().hex, created_at=now,
                    summary={}))
                return self._info(conn, self._table_row(conn, name))
        except IntegrityError:
            raise TableAlreadyExistsError(name) from None

    def load_table(self, name: str) -> TableInfo:
        with self._read() as conn:
            return self._info(conn, self._table_row(conn, name), committed=True)

    def list_tables(self) -> list[TableInfo]:
        with self._read() as conn:
            # Names first (no stored JSON), then row by row: a corrupt row is named.
            names: Sequence[str] = conn.execute(
                select(T.tables.c.name).order_by(T.tables.c.name)).scalars().all()
            return [self._info(conn, self._table_row(conn, n), committed=True) for n in names]

    def schema_history(self, name: str) -> list[Schema]:
        with self._read() as conn:
            return self._schemas(conn, self._table_row(conn, name))

    def schema_version(self, name: str, version: int) -> Schema:
        with self._read() as conn:
            row = self._table_row(conn, name)
            return self._schema(conn, row, version, committed=True)

    def set_properties(self, name: str, properties: dict[str, Any], *,
                       mode: SchemaMode | None = None) -> TableInfo:
        if mode is not None and mode not in SCHEMA_MODES:
            raise InvalidSchemaError(f"unknown schema mode {mode!r}")
        with self._write() as conn:
            row = self._table_row(conn, name)
            with decoding("tables", f'table "{name}"'):
                merged = {**row.properties, **properties}
            merged = {k: v for k, v in merged.items() if v is not None}
            conn.execute(update(T.tables).where(T.tables.c.id == row.id)
                         .values(properties=merged, mode=mode or row.mode))
            return self._info(conn, self._table_row(conn, name))

    # ---- commit -----------------------------------------------------------------------------
    def commit(self, table: str, *, expected_snapshot_id: int, operation: str,
               commit_id: str, add: Sequence[ManifestEntry] = (),
               remove: Sequence[str] = (), schema: Schema | None = None,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> Snapshot:
        new_id = expected_snapshot_id + 1
        now = self._clock()
        conn = self.engine.connect().execution_options(shoal_write=True)
        trans = None
        try:
            trans = conn.begin()
            # Postgres: lock the table row first, so racing committers queue here and the
            # losers fail fast on the check below instead of after all their inserts.
            row = conn.execute(select(*_CAS_COLUMNS).where(T.tables.c.name == table)
                               .with_for_update()).first()
            if row is None:
                raise TableNotFoundError(table)
            if row.current_snapshot_id != expected_snapshot_id:
                raise CommitConflictError(table, expected_snapshot_id, row.current_snapshot_id)
            version = row.schema_version
            if schema is not None:
                if schema.version != version + 1:
                    raise CommitConflictError(table, expected_snapshot_id,
                                              row.current_snapshot_id)
                version = schema.version
                conn.execute(insert(T.schema_versions).values(
                    table_id=row.id, version=version, schema=schema.to_json(), created_at=now))
            conn.execute(insert(T.snapshots).values(
                table_id=row.id, snapshot_id=new_id, parent_id=expected_snapshot_id,
                schema_version=version, operation=operation, commit_id=commit_id,
                created_at=now, summary=summary or {}))
            if add:
                conn.execute(insert(T.manifests), [manifest_row(row.id, new_id, e) for e in add])
                filters = [{"table_id": row.id, "extent_id": e.extent_id, "column_name": c,
                            "filter": f} for e in add for c, f in e.membership_filters.items()]
                if filters:
                    conn.execute(insert(T.manifest_filters), filters)
            if remove:
                removed = 0
                for chunk in chunks(list(remove)):
                    removed += conn.execute(update(T.manifests).where(
                        T.manifests.c.table_id == row.id,
                        T.manifests.c.extent_id.in_(chunk),
                        T.manifests.c.removed_snapshot_id.is_(None),
                    ).values(removed_snapshot_id=new_id)).rowcount
                if removed != len(set(remove)):
                    raise CommitConflictError(table, expected_snapshot_id)
            if ledger:
                conn.execute(insert(T.ingest_ledger), [
                    {"key": le.key, "table_id": row.id, "snapshot_id": new_id,
                     "ack": {**le.ack, "snapshot_id": new_id}, "created_at": now}
                    for le in ledger])
            for off in offsets:
                self._upsert_offset(conn, row.id, new_id, off, now)
            cas = conn.execute(update(T.tables).where(
                T.tables.c.id == row.id,
                T.tables.c.current_snapshot_id == expected_snapshot_id,
            ).values(current_snapshot_id=new_id, schema_version=version))
            if cas.rowcount != 1:
                raise CommitConflictError(table, expected_snapshot_id)
        except IntegrityError:
            _rollback(trans)
            conn.close()
            self._raise_replay(ledger)
            raise CommitConflictError(table, expected_snapshot_id) from None
        except OperationalError as e:
            _rollback(trans)
            conn.close()
            if self.dialect == "sqlite" and "locked" in str(e).lower():
                raise CommitConflictError(table, expected_snapshot_id) from None
            raise
        except BaseException:
            _rollback(trans)
            conn.close()
            raise
        try:
            trans.commit()
        except DBAPIError as e:
            conn.close()
            raise CommitStateUnknownError(table, e) from e
        conn.close()
        return Snapshot(table_id=row.id, snapshot_id=new_id, parent_id=expected_snapshot_id,
                        schema_version=version, operation=operation, created_at=now,
                        commit_id=commit_id, summary=summary or {})

    def _raise_replay(self, ledger: Sequence[LedgerEntry]) -> None:
        for le in ledger:
            rec = self.ledger_get(le.key)
            if rec is not None:
                raise LedgerKeyExistsError(rec)

    def _upsert_offset(self, conn: Connection, table_id: int, snapshot_id: int,
                       off: SourceOffset, now: float) -> None:
        values = {"source": off.source, "partition": off.partition, "table_id": table_id,
                  "offset": off.offset, "snapshot_id": snapshot_id, "updated_at": now}
        keys = ["source", "partition"]
        changed = {"offset": off.offset, "table_id": table_id, "snapshot_id": snapshot_id,
                   "updated_at": now}
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert
            conn.execute(pg_insert(T.source_offsets).values(values)
                         .on_conflict_do_update(index_elements=keys, set_=changed))
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert
            conn.execute(sqlite_insert(T.source_offsets).values(values)
                         .on_conflict_do_update(index_elements=keys, set_=changed))

    # ---- snapshots and manifests ------------------------------------------------------------
    def _snapshot_row(self, conn: Connection, row: Any, snapshot_id: int | None) -> Snapshot:
        sid = row.current_snapshot_id if snapshot_id is None else snapshot_id
        with decoding("snapshots", f'table "{row.name}" snapshot {sid}'):
            s = conn.execute(select(T.snapshots).where(T.snapshots.c.table_id == row.id,
                                                       T.snapshots.c.snapshot_id == sid)).first()
            if s is None:
                raise SnapshotNotFoundError(row.name, sid)
            return _snapshot(s)

    def snapshot(self, table: str, snapshot_id: int | None = None) -> Snapshot:
        with self._read() as conn:
            return self._snapshot_row(conn, self._table_row(conn, table), snapshot_id)

    def snapshots(self, table: str) -> list[Snapshot]:
        with self._read() as conn:
            row = self._table_row(conn, table)
            with decoding("snapshots", f'table "{table}"'):
                rows = conn.execute(select(T.snapshots).where(T.snapshots.c.table_id == row.id)
                                    .order_by(T.snapshots.c.snapshot_id)).all()
                return [_snapshot(s) for s in rows]

    def find_commit(self, table: str, commit_id: str) -> Snapshot | None:
        with self._read() as conn:
            row = self._table_row(conn, table)
            with decoding("snapshots", f'table "{table}" commit {commit_id}'):
                s = conn.execute(select(T.snapshots).where(T.snapshots.c.table_id == row.id,
                                                           T.snapshots.c.commit_id == commit_id)
                                 ).first()
                return None if s is None else _snapshot(s)

    @staticmethod
    def _visible(table_id: int, sid: int) -> Any:
        m = T.manifests.c
        return and_(m.table_id == table_id, m.added_snapshot_id <= sid,
                    or_(m.removed_snapshot_id.is_(None), m.removed_snapshot_id > sid))

    def manifests(self, table: str, snapshot_id: int | None = None) -> list[ManifestEntry]:
        with self._read() as conn:
            row = self._table_row(conn, table)
            sid = self._snapshot_row(conn, row, snapshot_id).snapshot_id
            with decoding("manifests", f'table "{table}" snapshot {sid}'):
                rows = conn.execute(select(T.manifests).where(self._visible(row.id, sid))
                                    .order_by(T.manifests.c.min_ts, T.manifests.c.extent_id)
                                    ).all()
                entries = [_entry(r) for r in rows]
            return self._attach_filters(conn, row.id, entries)

    def _attach_filters(self, conn: Connection, table_id: int,
                        entries: list[ManifestEntry]) -> list[ManifestEntry]:
        by_id: dict[str, dict[str, bytes]] = {}
        ids = [e.extent_id for e in entries]
        for chunk in chunks(ids):
            for r in conn.execute(select(T.manifest_filters).where(
                    T.manifest_filters.c.table_id == table_id,
                    T.manifest_filters.c.extent_id.in_(chunk))):
                by_id.setdefault(r.extent_id, {})[r.column_name] = bytes(r.filter)
        if not by_id:
            return entries
        return [replace(e, membership_filters=by_id.get(e.extent_id, {})) for e in entries]

    def live_extent_ids(self, table: str, extent_ids: Sequence[str]) -> set[str]:
        with self._read() as conn:
            row = self._table_row(conn, table)
            out: set[str] = set()
            for chunk in chunks(list(extent_ids)):
                out.update(conn.execute(select(T.manifests.c.extent_id).where(
                    T.manifests.c.table_id == row.id, T.manifests.c.extent_id.in_(chunk),
                    T.manifests.c.removed_snapshot_id.is_(None))).scalars())
            return out

    def plan_extents(self, table: str, predicate: BlockPredicate | None = None, *,
                     snapshot_id: int | None = None) -> PlanResult:
        """Stage 1. The SQL part decides which extents are live at the snapshot and pass the
        time/distinct/token/path conditions (ids only); their manifest entries and
        membership filters come from `self.extent_cache` (see `shoal.catalog.cache`)."""
        with self._read() as conn:
            row = self._table_row(conn, table)
            sid = self._snapshot_row(conn, row, snapshot_id).snapshot_id
            history = self._schemas(conn, row)
            visible = self._visible(row.id, sid)
            considered = conn.execute(select(func.count()).select_from(T.manifests)
                                      .where(visible)).scalar_one()
            cond, params = compile_predicate(predicate, dialect=self.dialect, history=history)
            m = T.manifests.c
            stmt = (select(m.extent_id, m.removed_snapshot_id).where(visible, cond)
                    .order_by(m.min_ts, m.extent_id))
            live = conn.execute(stmt, params).all()
            with decoding("manifests", f'table "{table}" snapshot {sid}'):
                entries = self._cached_entries(conn, row.id, live)
            if len(entries) != len(live):   # rows gone between two statements (Postgres
                raise SnapshotNotFoundError(table, sid)  # READ COMMITTED): sid was expired
            leaves = bloom_leaves(predicate)
            if leaves and entries:
                entries = self._bloom_filter(conn, row.id, entries, leaves, predicate, history)
            return PlanResult(snapshot_id=sid, entries=entries, considered=considered,
                              pruned=considered - len(entries))

    def _cached_entries(self, conn: Connection, table_id: int,
                        live: Sequence[Any]) -> list[ManifestEntry]:
        """Manifest entries (without column stats) of `live` rows (extent id, removed
        snapshot id), in their order: from the cache, the misses read in chunks."""
        cache = self.extent_cache
        found: dict[str, ManifestEntry] = {}
        missing = []
        for r in live:
            e = cache.get(("entry", table_id, r.extent_id))
            if e is MISSING:
                missing.append(r.extent_id)
            else:
                found[r.extent_id] = e
        light = [c for c in T.manifests.c if c.name != "column_stats"]
        for chunk in chunks(missing):
            for r in conn.execute(select(*light).where(T.manifests.c.table_id == table_id,
                                                       T.manifests.c.extent_id.in_(chunk))):
                e = replace(_entry(r), removed_snapshot_id=None)
                cache.put(("entry", table_id, e.extent_id), e, entry_bytes(e))
                found[e.extent_id] = e
        return [e if r.removed_snapshot_id is None
                else replace(e, removed_snapshot_id=r.removed_snapshot_id)
                for r in live if (e := found.get(r.extent_id)) is not None]

    def _cached_filters(self, conn: Connection, table_id: int, extent_ids: Sequence[str],
                        columns: Sequence[str]) -> dict[tuple[str, str], BloomFilter]:
        """Decoded membership filters of `columns` of these extents, by (extent id, column):
        from the cache, the misses read from the catalog (a miss with no row is cached as
        'no filter')."""
        cache = self.extent_cache
        out: dict[tuple[str, str], BloomFilter] = {}
        missing: dict[str, list[str]] = {}
        for eid in extent_ids:
            for col in columns:
                f = cache.get(("filter", table_id, eid, col))
                if f is MISSING:
                    missing.setdefault(eid, []).append(col)
                elif f is not None:
                    out[(eid, col)] = f
        if not missing:
            return out
        loaded: dict[tuple[str, str], BloomFilter] = {}
        wanted = sorted({c for cols in missing.values() for c in cols})
        for chunk in chunks(list(missing)):
            for r in conn.execute(select(T.manifest_filters).where(
                    T.manifest_filters.c.table_id == table_id,
                    T.manifest_filters.c.column_name.in_(wanted),
                    T.manifest_filters.c.extent_id.in_(chunk))):
                with decoding("manifest_filters", f"extent {r.extent_id} column "
                               f"{r.column_name}"):
                    loaded[(r.extent_id, r.column_name)] = BloomFilter.from_bytes(r.filter)
        for eid, cols in missing.items():
            for col in cols:
                f = loaded.get((eid, col))
                cache.put(("filter", table_id, eid, col), f, filter_bytes(f))
                if f is not None:
                    out[(eid, col)] = f
        return out

    def _bloom_filter(self, conn: Connection, table_id: int, entries: list[ManifestEntry],
                      leaves: dict[str, set[Any]], predicate: BlockPredicate | None,
                      history: list[Schema]) -> list[ManifestEntry]:
        filters = self._cached_filters(conn, table_id, [e.extent_id for e in entries],
                                       sorted(leaves))
        if not filters:
            return entries
        kinds = {s.version: {c.name: c.type.kind for c in s.columns} for s in history}
        kept = []
        for e in entries:
            def might_contain(column: str, value: Any, e: ManifestEntry = e) -> bool:
                bloom = filters.get((e.extent_id, column))
                if bloom is None:
                    return True
                kind = kinds.get(e.schema_version, {}).get(column)
                if not ((kind == "string" and isinstance(value, str)) or
                        (kind in ("int", "long") and isinstance(value, int)
                         and not isinstance(value, bool))):
                    return True  # the extent's values are of another type: cannot decide
                return bloom.might_contain(value)

            if survives_filters(predicate, might_contain):
                kept.append(e)
        return kept

    def table_counts(self, table: str, snapshot_id: int | None = None) -> tuple[int, int]:
        with self._read() as conn:
            row = self._table_row(conn, table)
            sid = self._snapshot_row(conn, row, snapshot_id).snapshot_id
            r = conn.execute(select(func.coalesce(func.sum(T.manifests.c.row_count), 0),
                                    func.count()).where(self._visible(row.id, sid))).one()
            return int(r[0]), int(r[1])

    def referenced_paths(self) -> set[str]:
        with self._read() as conn:
            return set(conn.execute(select(T.manifests.c.object_path)).scalars())

    def expire_snapshots(self, table: str, *, keep_from: int) -> ExpiredSnapshots:
        """Snapshots below `keep_from` (capped at the current one) go, and with them every
        manifest row removed at or before `keep_from`: visible at N needs `removed > N`, so
        no snapshot >= keep_from sees those rows. One transaction; objects are the caller's."""
        m, s = T.manifests.c, T.snapshots.c
        with self._write() as conn:
            row = conn.execute(select(*_CAS_COLUMNS).where(T.tables.c.name == table)
                               .with_for_update()).first()
            if row is None:
                raise TableNotFoundError(table)
            keep_from = min(keep_from, row.current_snapshot_id)
            ids: list[int] = list(conn.execute(select(s.snapshot_id).where(
                s.table_id == row.id, s.snapshot_id < keep_from)
                .order_by(s.snapshot_id)).scalars())
            gone = conn.execute(select(m.extent_id, m.object_path).where(
                m.table_id == row.id, m.removed_snapshot_id.is_not(None),
                m.removed_snapshot_id <= keep_from)).all()
            extent_ids = [g.extent_id for g in gone]
            for chunk in chunks(extent_ids):
                conn.execute(delete(T.manifest_filters).where(
                    T.manifest_filters.c.table_id == row.id,
                    T.manifest_filters.c.extent_id.in_(chunk)))
                conn.execute(delete(T.manifests).where(m.table_id == row.id,
                                                       m.extent_id.in_(chunk)))
            if ids:
                conn.execute(delete(T.snapshots).where(s.table_id == row.id,
                                                       s.snapshot_id < keep_from))
            return ExpiredSnapshots(snapshot_ids=ids, extent_ids=extent_ids,
                                    object_paths=[g.object_path for g in gone])

    # ---- ledger and offsets -----------------------------------------------------------------
    def ledger_get(self, key: str) -> LedgerRecord | None:
        with self._read() as conn, decoding("ingest_ledger", f'key "{key}"'):
            r = conn.execute(select(T.ingest_ledger).where(T.ingest_ledger.c.key == key)).first()
            if r is None:
                return None
            return LedgerRecord(key=r.key, table_id=r.table_id, snapshot_id=r.snapshot_id,
                                ack=dict(r.ack), created_at=r.created_at)

    def sweep_ledger(self, older_than_s: float) -> int:
        cutoff = self._clock() - older_than_s
        with self._write() as conn:
            return conn.execute(delete(T.ingest_ledger).where(
                T.ingest_ledger.c.created_at < cutoff,
                *[~T.ingest_ledger.c.key.startswith(p, autoescape=True)
                  for p in PERMANENT_LEDGER_PREFIXES])).rowcount

    def source_offsets(self, source: str) -> dict[str, int]:
        with self._read() as conn:
            rows = conn.execute(select(T.source_offsets.c.partition, T.source_offsets.c.offset)
                                .where(T.source_offsets.c.source == source)).all()
            return {str(r.partition): int(r.offset) for r in rows}

    # ---- work units -------------------------------------------------------------------------
    def enqueue_work(self, kind: str, *, table: str | None = None,
                     payload: dict[str, Any] | None = None, dedupe: bool = False) -> WorkUnit:
        now = self._clock()
        w = T.work_units.c
        with self._write() as conn:
            table_id = None if table is None else self._table_row(conn, table).id
            if dedupe:
                if self.dialect == "postgresql":  # serialise enqueuers of this kind and table
                    conn.execute(select(func.pg_advisory_xact_lock(
                        7302452, func.hashtext(f"{kind}:{table_id}"))))
                same_table = w.table_id.is_(None) if table_id is None else w.table_id == table_id
                same = conn.execute(select(w.id).where(
                    w.kind == kind, same_table, w.state.in_(["pending", "running"]))
                    .order_by(w.id).limit(1)).scalar()
                if same is not None:
                    return _units(conn, [same])[0]
            uid = _inserted_id(conn.execute(insert(T.work_units).values(
                kind=kind, table_id=table_id, payload=payload or {}, state="pending",
                attempts=0, created_at=now, updated_at=now)))
            return _units(conn, [uid])[0]

    def claim_work(self, worker: str, *, kinds: Sequence[str] | None = None,
                   lease_s: float = 300.0) -> WorkUnit | None:
        """Claim the oldest pending unit, or a running one whose lease expired.

        Postgres: `FOR UPDATE SKIP LOCKED`, so concurrent workers never wait on each other.
        SQLite: the IMMEDIATE write lock serialises claimers; the lease fields are the claim.
        """
        now = self._clock()
        w = T.work_units.c
        claimable = or_(w.state == "pending",
                        and_(w.state == "running", w.lease_expires_at < now))
        stmt = select(w.id, w.attempts).where(claimable)
        if kinds:
            stmt = stmt.where(w.kind.in_(list(kinds)))
        stmt = stmt.order_by(w.id).limit(1)
        if self.dialect == "postgresql":
            stmt = stmt.with_for_update(skip_locked=True)
        with self._write() as conn:
            r = conn.execute(stmt).first()
            if r is None:
                return None
            conn.execute(update(T.work_units).where(w.id == r.id).values(
                state="running", lease_owner=worker, lease_expires_at=now + lease_s,
                attempts=r.attempts + 1, updated_at=now))
            return _units(conn, [r.id])[0]

    def finish_work(self, unit_id: int, worker: str, *, ok: bool,
                    result: dict[str, Any] | None = None) -> bool:
        """Record the outcome; False if the lease was lost to another worker meanwhile."""
        w = T.work_units.c
        with self._write() as conn:
            n = conn.execute(update(T.work_units).where(
                w.id == unit_id, w.lease_owner == worker, w.state == "running").values(
                state="done" if ok else "failed", result=result, lease_expires_at=None,
                updated_at=self._clock())).rowcount
            return n == 1

    def renew_work(self, unit_id: int, worker: str, *, lease_s: float = 300.0) -> bool:
        w = T.work_units.c
        now = self._clock()
        with self._write() as conn:
            n = conn.execute(update(T.work_units).where(
                w.id == unit_id, w.lease_owner == worker, w.state == "running").values(
                lease_expires_at=now + lease_s, updated_at=now)).rowcount
            return n == 1

    def list_work(self, *, kinds: Sequence[str] | None = None,
                  states: Sequence[str] | None = None, table: str | None = None,
                  limit: int = 100) -> list[WorkUnit]:
        w = T.work_units.c
        with self._read() as conn:
            stmt = select(w.id)
            if kinds:
                stmt = stmt.where(w.kind.in_(list(kinds)))
            if states:
                stmt = stmt.where(w.state.in_(list(states)))
            if table is not None:
                stmt = stmt.where(w.table_id == self._table_row(conn, table).id)
            ids: Sequence[int] = conn.execute(
                stmt.order_by(w.id.desc()).limit(limit)).scalars().all()
            return _units(conn, ids)


# ---- row mapping ------------------------------------------------------------------------------
def _entry(r: Any) -> ManifestEntry:
    m = r._mapping
    return ManifestEntry(
        extent_id=m["extent_id"], object_path=m["object_path"], byte_size=m["byte_size"],
        row_count=m["row_count"], block_count=m["block_count"], min_ts=m["min_ts"],
        max_ts=m["max_ts"], schema_version=m["schema_version"], format=m["format"],
        column_stats=dict(m["column_stats"]) if "column_stats" in m else {},
        present_paths=dict(m["present_paths"] or {}),
        added_snapshot_id=m["added_snapshot_id"], removed_snapshot_id=m["removed_snapshot_id"])


def _snapshot(s: Any) -> Snapshot:
    return snapshot_of(s._mapping, s.summary)


def _units(conn: Connection, ids: Sequence[int]) -> list[WorkUnit]:
    """The work units of `ids`, in that order. Stored JSON is decoded while the rows are
    fetched: if that fails, the units are read again one by one to name the damaged one."""
    w = T.work_units.c
    try:
        rows = {r.id: r for chunk in chunks(list(ids))
                for r in conn.execute(select(T.work_units).where(w.id.in_(chunk)))}
    except DECODE_ERRORS as e:
        for uid in ids:
            with decoding("work_units", f"unit {uid}"):
                conn.execute(select(T.work_units).where(w.id == uid)).one()
        raise CatalogCorruptError("work_units", f"units {list(ids)}",
                                  f"{type(e).__name__}: {e}") from e
    return [_unit(rows[i]) for i in ids]


def _unit(r: Any) -> WorkUnit:
    with decoding("work_units", f"unit {r.id}"):
        return WorkUnit(id=r.id, kind=r.kind, table_id=r.table_id, payload=dict(r.payload),
                        state=r.state, attempts=r.attempts, lease_owner=r.lease_owner,
                        lease_expires_at=r.lease_expires_at,
                        result=None if r.result is None else dict(r.result),
                        created_at=r.created_at, updated_at=r.updated_at)


def _inserted_id(result: CursorResult[Any]) -> int:
    """The primary key generated by an INSERT of one row."""
    pk = result.inserted_primary_key
    assert pk is not None  # set for every single-row INSERT
    return int(pk[0])


def _rollback(trans: Any) -> None:
    if trans is not None and trans.is_active:
        try:
            trans.rollback()
        except DBAPIError:
            # The connection broke: the transaction ends with it. The caller raises the
            # error that made it roll back; this one is only logged.
            log.warning("catalog rollback failed", exc_info=True)

