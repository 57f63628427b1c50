"""The commit coordinator: write extents, publish a snapshot by CAS, retry.

`CommitCoordinator.run()` is the one retry loop of shoal. Each attempt re-reads the table and
asks a `build` callback for the commit (the rebase: an append is unchanged, a schema change
is merged onto the schema that landed meanwhile, a compaction checks its inputs are still
live and gives up otherwise), then calls the catalog's single-transaction commit. Conflicts
back off exponentially with full jitter.

Failure rules for the extents a commit wrote:
- the commit certainly failed (conflicts exhausted, a rebase gave up, the ledger key was
  already applied, an error before COMMIT): the extents are deleted (`discard_extents`);
- the outcome is unknown (the connection broke during COMMIT): the snapshot is looked up by
  the commit's unique `commit_id`; if it landed, that is success; if the lookup itself fails
  the extents are left for orphan GC and `CommitStateUnknownError` propagates.

Writing extents is delegated to an `ExtentStager` (`coordinator.extents`), the catalog-free
part that Spark tasks use on their own.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shoal.catalog.base import (Catalog, LedgerEntry, LedgerKeyExistsError, LedgerRecord,
                                ManifestEntry, Snapshot, SourceOffset, TableInfo)
from shoal.commit.extents import (ExtentStager, StageHook, discard_extents, discard_on_failure,
                                  extent_prefix)
from shoal.errors import (CommitConflictError, CommitRetriesExhaustedError,
                          CommitStateUnknownError)
from shoal.format.base import SegmentFormat
from shoal.storage.base import ObjectStore
from shoal.types.schema import Column, Schema
from shoal.types.sortkey import block_rows_of, sort_key_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitSpec:
    """What one attempt proposes on top of the table state it was built from."""

    operation: str
    add: Sequence[ManifestEntry] = ()
    remove: Sequence[str] = ()
    schema: Schema | None = None
    ledger: Sequence[LedgerEntry] = ()
    offsets: Sequence[SourceOffset] = ()
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitOutcome:
    snapshot: Snapshot | None        # None when nothing needed committing (no-op)
    added: list[ManifestEntry]
    attempts: int
    replayed: LedgerRecord | None = None


class CommitCoordinator:
    """Writes extents (through `extents`) and commits snapshots of tables of `catalog`."""

    def __init__(self, catalog: Catalog, store: ObjectStore, fmt: SegmentFormat, *,
                 max_attempts: int = 64, base_delay_s: float = 0.002,
                 max_delay_s: float = 0.05, on_stage: StageHook | None = None) -> None:
        self.catalog = catalog
        self.extents = ExtentStager(store, fmt, on_stage=on_stage)
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._on_stage = on_stage

    @property
    def store(self) -> ObjectStore:
        return self.extents.store

    @property
    def format(self) -> SegmentFormat:
        return self.extents.format

    def _stage(self, stage: str, **info: Any) -> None:
        if self._on_stage is not None:
            self._on_stage(stage, **info)

    # ---- extents ----------------------------------------------------------------------------
    def write_extent(self, table: TableInfo, batches: Iterable[pa.RecordBatch | pa.Table], *,
                     schema: Schema | None = None,
                     block_rows: int | None = None) -> ManifestEntry:
        """Write one extent of `table` from `batches` (already shaped to `schema`, default
        the table's current one); it is part of the table only once a commit adds it.
        The rows are sorted by the table's sort key (`sort_by`), if it has one, and cut
        into blocks of `block_rows` (default: the table's `block_rows` property)."""
        schema = schema or table.schema
        return self.extents.write(extent_prefix(table.name, table.id), schema, batches,
                                  block_rows=(block_rows if block_rows is not None
                                              else block_rows_of(table.properties)),
                                  sort_by=sort_key_of(table.properties, schema))

    # ---- the retry loop ---------------------------------------------------------------------
    def run(self, table: str, build: Callable[[TableInfo], CommitSpec | None], *,
            written: Sequence[ManifestEntry] = ()) -> CommitOutcome:
        """Commit what `build` proposes, rebasing and retrying on conflicts.

        `written` are extents already in the store for this commit: deleted if the commit
        certainly fails, kept if it lands or its outcome stays unknown.
        """
        commit_id = uuid.uuid4().hex
        attempt = 0
        try:
            with discard_on_failure(self.store, written):
                while True:
                    attempt += 1
                    info = self.catalog.load_table(table)
                    spec = build(info)
                    if spec is None:
                        discard_extents(self.store, written)
                        return CommitOutcome(None, [], attempt)
                    self._stage("committing", attempt=attempt,
                                expected=info.current_snapshot_id)
                    try:
                        snap = self.catalog.commit(
                            table, expected_snapshot_id=info.current_snapshot_id,
                            operation=spec.operation, commit_id=commit_id, add=spec.add,
                            remove=spec.remove, schema=spec.schema, ledger=spec.ledger,
                            offsets=spec.offsets, summary=spec.summary)
                    except CommitConflictError:
                        if attempt >= self.max_attempts:
                            raise CommitRetriesExhaustedError(table, attempt) from None
                        self._backoff(attempt)
                        continue
                    except CommitStateUnknownError:
                        landed = self._recover(table, commit_id)
                        if landed is None:
                            if attempt >= self.max_attempts:
                                raise
                            continue  # certainly not landed: again with the same commit id
                        snap = landed
                    self._stage("committed", snapshot_id=snap.snapshot_id)
                    return CommitOutcome(snap, list(spec.add), attempt)
        except LedgerKeyExistsError as e:  # (discard_on_failure already deleted `written`)
            return CommitOutcome(None, [], attempt, replayed=e.record)

    def _recover(self, table: str, commit_id: str) -> Snapshot | None:
        """After an unknown outcome: the snapshot if it landed, None if it certainly did not."""
        for attempt in range(1, 6):
            try:
                return self.catalog.find_commit(table, commit_id)
            except Exception as e:  # retried, then raised as state unknown
                if attempt == 5:
                    raise CommitStateUnknownError(table, e) from e
                log.warning("looking up commit %s of table %s failed (attempt %d)", commit_id,
                            table, attempt, exc_info=True)
                time.sleep(min(self.max_delay_s, self.base_delay_s * 2 ** attempt))
        return None

    def _backoff(self, attempt: int) -> None:
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** min(attempt, 16))
        time.sleep(random.uniform(0, cap))

    # ---- common commits ---------------------------------------------------------------------
    def append(self, table: str, entries: Sequence[ManifestEntry], *,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> CommitOutcome:
        """Publish already written extents as one new snapshot (append-only rebase)."""
        rows = sum(e.row_count for e in entries)
        spec = CommitSpec(operation="append", add=list(entries), ledger=list(ledger),
                          offsets=list(offsets),
                          summary={"added_extents": len(entries), "added_rows": rows,
                                   **(summary or {})})
        return self.run(table, lambda _info: spec, written=entries)

    def append_batches(self, table: str, batches: Iterable[pa.RecordBatch | pa.Table], *,
                       ledger: Sequence[LedgerEntry] = (),
                       offsets: Sequence[SourceOffset] = (),
                       schema: Schema | None = None) -> CommitOutcome:
        """Write `batches` as one extent and append it."""
        info = self.catalog.load_table(table)
        entry = self.write_extent(info, batches, schema=schema)
        return self.append(table, [entry], ledger=ledger, offsets=offsets)

    def change_schema(self, table: str, change: Callable[[Schema], Schema], *,
                      operation: str = "schema") -> TableInfo:
        """Commit `change(current schema)` as the next schema version (a rename, drop or
        type change); on a lost race it is applied again to the schema that landed, so its
        checks run against that one. `change` returning the schema it was given commits
        nothing."""
        def build(info: TableInfo) -> CommitSpec | None:
            target = change(info.schema)
            if target is info.schema:
                return None
            return CommitSpec(operation=operation, schema=target,
                              summary={"schema_version": target.version})

        self.run(table, build)
        return self.catalog.load_table(table)

    def evolve_schema(self, table: str, changes: Sequence[Column], *,
                      base: Schema | None = None) -> TableInfo:
        """Add or widen columns; concurrent evolutions merge or fail with a clear error.

        `base` is the schema the caller derived `changes` from (default: the current one).
        A column that a concurrent writer added with another type raises
        `SchemaConflictError`; a change that is not a widening raises
        `IncompatibleSchemaChangeError`. Nothing is written in either case.
        """
        base = base or self.catalog.load_table(table).schema
        mine = base.evolve(changes, table=table)

        def build(info: TableInfo) -> CommitSpec | None:
            if info.schema.version == base.version:
                target = mine
            else:
                target = info.schema.merge_concurrent(base, mine, table=table)
            if target is info.schema or target.version == info.schema.version:
                return None
            return CommitSpec(operation="schema", schema=target,
                              summary={"schema_version": target.version})

        self.run(table, build)
        return self.catalog.load_table(table)
