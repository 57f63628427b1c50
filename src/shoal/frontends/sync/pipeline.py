"""One sync binding run: the initial snapshot if the catalog has none, then the changes.

Exactly once. The catalog keeps the last source position applied to the table
(`SourceOffset("<source_id>:table-<table id>", "0", position)`), written in the same
compare-and-swap as the extents holding the rows up to it; the offsets are re-read inside
every commit attempt, so a second pipeline that moved them meanwhile fails the batch
(`ConcurrentSyncError`) instead of duplicating it. The source is told (`confirm`) only
after the commit landed, and again at each start (a crash between the two). A run resumes
at the catalog's position: transactions at or before it are skipped.

The snapshot is one commit, however many extents it takes: a crash during it leaves no
position, and the next run takes a new snapshot (for PostgreSQL, a new slot). A change batch
whose source columns include a column the table lacks widens the table first (the write
path's schema evolution); the rows are then cast to the table's types, and a row with a
value its column cannot hold (the source changed the column's type) goes to the reject table,
committed first under a key made of its position, so a replay skips it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from shoal.catalog.base import ManifestEntry, SourceOffset, TableInfo
from shoal.commit import CommitSpec, RejectRecord, commit_rejects
from shoal.errors import InvalidSchemaError, PipelineError
from shoal.frontends.sync.binding import SyncBinding, open_source
from shoal.frontends.sync.source import SnapshotPart, SyncSource
from shoal.types.schema import Column, Schema

if TYPE_CHECKING:
    from shoal.client import Shoal

log = logging.getLogger("shoal.sync")
PARTITION = "0"
Stage = Callable[..., None]


class ConcurrentSyncError(PipelineError):
    """Another pipeline committed positions of the same source into the table meanwhile."""

    code = "concurrent_sync"


@dataclass
class SyncProgress:
    snapshot_rows: int = 0
    changes: int = 0
    rows: int = 0
    commits: int = 0
    rejects: int = 0
    position: int | None = None


class SyncPipeline:
    def __init__(self, db: Shoal, binding: SyncBinding, *, stop: threading.Event | None = None,
                 on_stage: Stage | None = None, source: SyncSource | None = None,
                 on_commit: Callable[[SyncProgress], None] | None = None,
                 spark: Any | None = None) -> None:
        self.db = db
        self.spark = spark      # given: a snapshot in parts is read and written by Spark tasks
        self.binding = binding
        self.stop = stop or threading.Event()
        self.on_stage = on_stage
        self.on_commit = on_commit
        self.source = source if source is not None else open_source(binding)
        self.progress = SyncProgress()
        # the table's id too: a table dropped and created again under the same name starts
        # over with a snapshot instead of finding the old table's position
        table_id = db.catalog.load_table(binding.table).id
        self.source_key = f"{self.source.source_id}:table-{table_id}"

    def _stage(self, name: str, **info: Any) -> None:
        if self.on_stage is not None:
            self.on_stage(name, **info)

    def committed(self) -> int | None:
        return self.db.catalog.source_offsets(self.source_key).get(PARTITION)

    def run(self, *, once: bool = False) -> SyncProgress:
        """Snapshot if needed, then changes until `stop` (with `once`: up to the source's
        position at start, then return)."""
        base = self.committed()
        if base is not None:
            self.source.confirm(base)
        upto = self.source.head() if once else None
        if base is None:
            base = self._snapshot()
            if once:
                upto = max(upto if upto is not None else base, self.source.head())
        while not self.stop.is_set():
            batch = self.source.changes(base, upto, self.binding.batch)
            if batch.position is None or batch.position <= base:
                if once:
                    break
                self.stop.wait(self.binding.poll_interval_s)
                continue
            self._stage("batch_read", position=batch.position, changes=batch.changes)
            tables = [batch.rows] if batch.rows is not None and batch.rows.num_rows else []
            self._commit(tables, batch.columns, base, batch.position, "changes")
            self.progress.changes += batch.changes
            self.source.confirm(batch.position)
            self._stage("confirmed", position=batch.position)
            base = batch.position
        return self.progress

    def _snapshot(self) -> int:
        log.info("sync of table %s: taking the initial snapshot of %s", self.binding.table,
                 self.binding.source_table)
        columns = self.source.columns()
        with self.source.snapshot() as snap:
            info = self._widen(columns)
            if self.spark is not None and len(snap.parts) > 1:
                written = self._snapshot_on_spark(self.spark, info, snap.parts)
            else:
                written = self._snapshot_here(info, snap.tables)
            self._publish(written, None, snap.position, "snapshot")
            position = snap.position
        self.source.confirm(position)
        self._stage("confirmed", position=position)
        return position

    def _snapshot_here(self, info: TableInfo, tables: Iterator[pa.Table]
                       ) -> list[ManifestEntry]:
        written: list[ManifestEntry] = []
        try:
            for tab in tables:
                written.append(self._write(info, tab))
                self.progress.snapshot_rows += tab.num_rows
                self._stage("snapshot_extent", rows=tab.num_rows)
        except BaseException:
            log.warning("sync of table %s: the snapshot failed after %d extent(s); they "
                        "are left for orphan GC", self.binding.table, len(written))
            raise
        return written

    def _snapshot_on_spark(self, spark: Any, info: TableInfo, parts: Sequence[SnapshotPart]
                           ) -> list[ManifestEntry]:
        """One Spark task per part: it reads its rows and writes them as extents of the
        table; the driver commits them all at once. Extents of a task that fails are left for
        orphan GC."""
        from functools import partial

        from shoal.commit.extents import extent_prefix
        from shoal.types.sortkey import block_rows_of, sort_key_of

        cfg = self.db.config
        spec = PartSpec(cfg.resolved_storage_url, cfg.s3_endpoint,
                        self.db.coordinator.format.name, extent_prefix(info.name, info.id),
                        info.schema, block_rows_of(info.properties),
                        tuple(sort_key_of(info.properties, info.schema)), info.name)
        sc = spark.sparkContext
        results = sc.parallelize(list(parts), len(parts)).map(
            partial(write_part, spec)).collect()
        written = [e for entries in results for e in entries]
        self.progress.snapshot_rows += sum(e.row_count for e in written)
        self._stage("snapshot_extent", rows=self.progress.snapshot_rows, tasks=len(parts))
        return written

    def _widen(self, columns: Sequence[Column]) -> TableInfo:
        info = self.db.catalog.load_table(self.binding.table)
        new = [c for c in columns if c.name not in info.schema]
        if new:
            log.info("sync of table %s: new source column(s) %s", self.binding.table,
                     ", ".join(c.name for c in new))
            self.db.coordinator.evolve_schema(self.binding.table, new, base=info.schema)
            info = self.db.catalog.load_table(self.binding.table)
        return info

    def _write(self, info: TableInfo, tab: pa.Table) -> ManifestEntry:
        shaped = shape(tab, info.schema, self.binding.table)
        return self.db.coordinator.write_extent(info, shaped.to_batches(), schema=info.schema)

    def _commit(self, tables: list[pa.Table], columns: Sequence[Column], base: int,
                position: int, what: str) -> None:
        info = self._widen(columns)
        kept, rejects = [], []
        for tab in tables:
            good, bad = split_rejects(tab, info.schema, self.source_key)
            kept.append(good)
            rejects += bad
        if rejects:   # first, by key: a replay after a crash skips them
            log.warning("sync of table %s: %d row change(s) cannot be stored (first: %s); "
                        "they go to the reject table", self.binding.table, len(rejects),
                        rejects[0].error)
            self.progress.rejects += commit_rejects(self.db.coordinator, self.db.catalog,
                                                    self.binding.table, rejects)
        written = [self._write(info, t) for t in kept if t.num_rows]
        self._publish(written, base, position, what)

    def _publish(self, written: list[ManifestEntry], base: int | None, position: int,
                 what: str) -> None:
        source = self.source_key

        def build(_info: TableInfo) -> CommitSpec:
            now = self.db.catalog.source_offsets(source).get(PARTITION)
            if now != base:
                raise ConcurrentSyncError(
                    f'table "{self.binding.table}": the position of source {source} moved '
                    "while this batch was being committed; is another sync running into the "
                    "same table?")
            rows = sum(e.row_count for e in written)
            return CommitSpec(operation="append", add=written,
                              offsets=[SourceOffset(source, PARTITION, position)],
                              summary={"added_extents": len(written), "added_rows": rows,
                                       "source": "sync", "sync": what})

        self._stage("extents_written", extents=len(written), position=position)
        self.db.coordinator.run(self.binding.table, build, written=written)
        rows = sum(e.row_count for e in written)
        self.progress.rows += rows
        self.progress.commits += 1
        self.progress.position = position
        self._stage("committed", position=position, rows=rows, what=what)
        if self.on_commit is not None:
            self.on_commit(self.progress)

    def close(self) -> None:
        try:
            self.source.close()
        except Exception:  # noqa: BLE001 - closing a connection that already broke
            log.warning("closing the source of table %s failed", self.binding.table,
                        exc_info=True)


def shape(tab: pa.Table, schema: Schema, table: str) -> pa.Table:
    """`tab`'s columns in the table's layout and types (nulls for columns it lacks)."""
    n = tab.num_rows
    arrays = []
    for col in schema.columns:
        target = col.type.arrow()
        if col.name in tab.column_names:
            try:
                arrays.append(tab.column(col.name).cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise InvalidSchemaError(
                    f'table "{table}": source column "{col.name}" '
                    f"({tab.schema.field(col.name).type}) cannot be stored as {col.type}: {e}",
                    column=col.name) from None
        else:
            arrays.append(pa.nulls(n, target))
    return pa.Table.from_arrays(arrays, schema=schema.arrow())


def split_rejects(tab: pa.Table, schema: Schema, source_id: str
                  ) -> tuple[pa.Table, list[RejectRecord]]:
    """(the rows every column of which the table can store, a reject per other row).

    A source column whose type changed to one the table's column cannot hold (text into an
    `int` column) makes rejects of the rows whose values do not convert, each naming the
    column, the value and the type; the other rows go on."""
    bad = np.zeros(tab.num_rows, dtype=bool)
    reasons: dict[int, tuple[str, str]] = {}
    for col in schema.columns:
        if col.name not in tab.column_names:
            continue
        arr = tab.column(col.name)
        try:
            arr.cast(col.type.arrow())
            continue
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        for i, value in enumerate(arr.to_pylist()):
            try:
                pa.array([value], arr.type).cast(col.type.arrow())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                bad[i] = True
                reasons.setdefault(i, (col.name, f'column "{col.name}": {value!r} cannot be '
                                                 f"stored as {col.type}"))
    if not bad.any():
        return tab, []
    rows = tab.filter(pa.array(bad)).to_pylist()
    rejects = []
    for i, row in zip(np.nonzero(bad)[0].tolist(), rows, strict=True):
        field, error = reasons[i]
        raw = json.dumps(row, default=str, sort_keys=True).encode()
        rejects.append(RejectRecord(key=f"sync-reject:{source_id}:{row['_source_position']}",
                                    raw=raw, error=error, source="sync", field=field))
    return tab.filter(pa.array(~bad)), rejects


@dataclass(frozen=True)
class PartSpec:
    """What a Spark task needs to write a snapshot part as extents of the table."""

    storage_url: str
    s3_endpoint: str | None
    format: str
    prefix: str
    schema: Schema
    block_rows: int
    sort_by: tuple[str, ...]
    table: str


def write_part(spec: PartSpec, part: SnapshotPart) -> list[ManifestEntry]:
    """Read one part and write it as extents (runs in a Spark task; plain Python)."""
    from shoal.commit.extents import ExtentStager
    from shoal.format import default_formats
    from shoal.storage import open_store

    store = open_store(spec.storage_url, s3_endpoint=spec.s3_endpoint)
    stager = ExtentStager(store, default_formats()[spec.format])
    return [stager.write(spec.prefix, spec.schema, shape(tab, spec.schema, spec.table)
                         .to_batches(), block_rows=spec.block_rows, sort_by=spec.sort_by)
            for tab in part.read()]
