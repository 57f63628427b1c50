"""`SqlCatalog`'s pruning queries: stage 1 of the pruning cascade (`plan_extents`).

The SQL part (`shoal.catalog.pruning.compile_predicate`, written by SQLAlchemy for each
dialect) decides which extents are live at the snapshot and pass the time, distinct, token
and path conditions, and reads their ids only; their manifest entries and membership
filters come from `extent_cache` (see `shoal.catalog.cache`), the misses read in chunks.
Membership (bloom) filters are then applied in Python to the extents the SQL part kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, func, select

from shoal.catalog import operations as ops
from shoal.catalog.base import ManifestEntry, PlanResult
from shoal.catalog.cache import MISSING, entry_bytes, filter_bytes
from shoal.catalog.pruning import (bloom_leaves, compile_predicate, names_by_version,
                                   survives_filters)
from shoal.catalog.rows import chunks, decoding, manifest_entry
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlConnections
from shoal.errors import SnapshotNotFoundError
from shoal.format.base import BlockPredicate
from shoal.format.membership import BloomFilter
from shoal.types.schema import Schema


class SqlPruning(SqlConnections):
    """The `PruningCatalog` role over SQLAlchemy."""

    def plan_extents(self, table: str, predicate: BlockPredicate | None = None, *,
                     snapshot_id: int | None = None) -> PlanResult:
        with self._read() as db:
            conn = db.conn
            row = ops.table_row(db, table)
            table_id = row["id"]
            snap = ops.snapshot(db, row, snapshot_id)
            sid = snap.snapshot_id
            history = ops.schema_history(db, row)
            read = next((s for s in history if s.version == snap.schema_version), None)
            visible = T.visible(table_id, sid)
            considered = conn.execute(select(func.count()).select_from(T.manifests)
                                      .where(visible)).scalar_one()
            cond, params = compile_predicate(predicate, dialect=self.dialect, history=history,
                                             read=read)
            m = T.manifests.c
            stmt = (select(m.extent_id, m.removed_snapshot_id).where(visible, cond)
                    .order_by(m.min_ts, m.extent_id))
            live = conn.execute(stmt, params).all()
            with decoding("manifests", f'table "{table}" snapshot {sid}'):
                entries = self._cached_entries(conn, table_id, live)
            if len(entries) != len(live):   # rows gone between two statements (Postgres
                raise SnapshotNotFoundError(table, sid)  # READ COMMITTED): sid was expired
            leaves = bloom_leaves(predicate)
            if leaves and entries:
                entries = self._bloom_filter(conn, table_id, entries, leaves, predicate,
                                             history, read)
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
                e = replace(manifest_entry(r._mapping), removed_snapshot_id=None)
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
                      history: list[Schema], read: Schema | None = None
                      ) -> list[ManifestEntry]:
        renamed = names_by_version(predicate, history, read)
        stored = sorted(set(leaves) | {n for names in renamed.values()
                                       for n in names.values() if n is not None})
        filters = self._cached_filters(conn, table_id, [e.extent_id for e in entries], stored)
        if not filters:
            return entries
        kinds = {s.version: {c.name: c.type.kind for c in s.columns} for s in history}
        kept = []
        for e in entries:
            names = renamed.get(e.schema_version, {})

            def might_contain(column: str, value: Any, e: ManifestEntry = e,
                              names: dict[str, str | None] = names) -> bool:
                if column in names:
                    if names[column] is None:
                        return True     # the extent holds no values of this column
                    column = names[column]  # type: ignore[assignment]
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
