"""The catalog protocols and records: the only source of truth for what is visible.

`Catalog` is the union of five role protocols, one per kind of state it keeps:
`TableCatalog` (tables and schema versions), `SnapshotCatalog` (snapshots and manifests),
`LedgerCatalog` (idempotency ledger and source offsets), `WorkCatalog` (work units) and
`PruningCatalog` (stage-1 pruning queries). `shoal.catalog.sql` implements each in a module
of its own; `shoal.catalog.lite` runs the hot ones on `sqlite3`.

A table's state is a linear chain of snapshots `1, 2, 3, ...` (snapshot 1 is the creation).
Publishing snapshot `n + 1` is one catalog transaction that carries the manifest rows it adds
and removes, an optional new schema version, idempotency-ledger rows and source offsets, and
ends in the compare-and-swap `UPDATE tables SET current_snapshot_id = n + 1 WHERE id = :t AND
current_snapshot_id = n`. Either all of it lands or none of it does.

The catalog never retries: a lost race raises `CommitConflictError`, a replayed ledger key
raises `LedgerKeyExistsError` with the original ack, a broken connection during COMMIT raises
`CommitStateUnknownError`. Retrying, rebasing and backoff belong to the commit coordinator.

The extents visible at snapshot N are those with `added_snapshot_id <= N` and
`removed_snapshot_id` null or `> N`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from shoal.errors import CommitError
from shoal.format.base import BlockPredicate, ExtentWriteResult
from shoal.types.schema import Schema, SchemaMode


# What a catalog reads the time from: seconds since the epoch, as `time.time` gives them.
# Snapshot and ledger timestamps, ledger sweeps and work-unit leases all use it, so a test
# hands the catalog a clock it advances instead of sleeping past a TTL or a lease.
Clock = Callable[[], float]


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    current_snapshot_id: int
    schema: Schema           # the current schema version
    mode: SchemaMode
    properties: dict[str, Any]
    created_at: float        # seconds since the epoch


# A dropped table keeps its row, snapshots and manifests (so time travel and UNDROP work and
# its files stay referenced) under a stored name no live table can have: `<name>#<table id>`.
# Lookups by name never see it; maintenance purges it once its snapshot retention has passed.
DROPPED_SEPARATOR = "#"


def dropped_name(name: str, table_id: int) -> str:
    """The stored name of dropped table `name` (see `DROPPED_SEPARATOR`)."""
    return f"{name}{DROPPED_SEPARATOR}{table_id}"


@dataclass(frozen=True)
class DroppedTable:
    """A dropped table, not yet purged: what UNDROP and maintenance need of it."""

    id: int
    name: str                # the name it had
    stored_name: str         # `dropped_name(name, id)`
    dropped_at: float        # seconds since the epoch (its `drop` snapshot)
    properties: dict[str, Any]


@dataclass(frozen=True)
class Snapshot:
    table_id: int
    snapshot_id: int
    parent_id: int | None
    schema_version: int
    operation: str           # create | append | schema | compact | retention | ...
    created_at: float
    commit_id: str           # unique token of the commit that made it (recognises a landed retry)
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ManifestEntry:
    """One extent of a table as the catalog records it."""

    extent_id: str
    object_path: str
    byte_size: int
    row_count: int
    block_count: int
    min_ts: int | None
    max_ts: int | None
    schema_version: int
    format: str = "tlm"
    column_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    present_paths: dict[str, list[str]] = field(default_factory=dict)
    membership_filters: dict[str, bytes] = field(default_factory=dict)
    added_snapshot_id: int | None = None    # filled when read back from the catalog
    removed_snapshot_id: int | None = None

    @classmethod
    def from_write(cls, result: ExtentWriteResult, *, schema_version: int,
                   format: str = "tlm") -> ManifestEntry:
        return cls(extent_id=result.extent_id, object_path=result.object_path,
                   byte_size=result.byte_size, row_count=result.row_count,
                   block_count=result.block_count, min_ts=result.min_ts, max_ts=result.max_ts,
                   schema_version=schema_version, format=format,
                   column_stats=result.column_stats, present_paths=result.present_paths,
                   membership_filters=result.membership_filters)


@dataclass(frozen=True)
class LedgerEntry:
    """An idempotency key applied by a commit, with the ack to return on replay."""

    key: str
    ack: dict[str, Any]


@dataclass(frozen=True)
class LedgerRecord:
    key: str
    table_id: int
    snapshot_id: int
    ack: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class SourceOffset:
    """Progress of a bulk source (e.g. `kafka:<group>:<topic>`, partition `"3"`)."""

    source: str
    partition: str
    offset: int


@dataclass(frozen=True)
class WorkUnit:
    id: int
    kind: str
    table_id: int | None
    payload: dict[str, Any]
    state: str               # pending | running | done | failed
    attempts: int
    lease_owner: str | None
    lease_expires_at: float | None
    result: dict[str, Any] | None = None
    created_at: float | None = None
    updated_at: float | None = None


@dataclass(frozen=True)
class ExpiredSnapshots:
    """What `expire_snapshots` removed: snapshot ids, and the manifest rows no retained
    snapshot can see any more (their objects are now unreferenced and may be deleted)."""

    snapshot_ids: list[int]
    extent_ids: list[str]
    object_paths: list[str]


@dataclass(frozen=True)
class PlanResult:
    """Stage-1 pruning output: the extents that may hold matching rows."""

    snapshot_id: int
    entries: list[ManifestEntry]
    considered: int          # extents live at the snapshot
    pruned: int              # considered - len(entries)


# Ledger keys that never expire: file-drop keys name content (`filedrop:{sha256}`) that may
# stay under a watched prefix for good, so sweeping them would ingest those files again.
PERMANENT_LEDGER_PREFIXES: tuple[str, ...] = ("filedrop:",)


class LedgerKeyExistsError(CommitError):
    """The idempotency key was applied before: nothing was written; here is the first ack."""

    code = "ledger_key_exists"

    def __init__(self, record: LedgerRecord) -> None:
        self.record = record
        super().__init__(f'idempotency key "{record.key}" was already applied in snapshot '
                         f"{record.snapshot_id}")


class TableCatalog(Protocol):
    """Tables and their schema versions. A table's schema changes only by a commit that
    carries the next version (`SnapshotCatalog.commit`); its properties and mode by
    `set_properties`; its name by `rename_table`, `drop_table` and `undrop_table`."""

    def create_table(self, name: str, schema: Schema, *, mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo: ...
    def load_table(self, name: str) -> TableInfo: ...
    def list_tables(self) -> list[TableInfo]: ...
    def schema_history(self, name: str) -> list[Schema]: ...
    def schema_version(self, name: str, version: int) -> Schema: ...
    def set_properties(self, name: str, properties: dict[str, Any], *,
                       mode: SchemaMode | None = None) -> TableInfo: ...
    def rename_table(self, name: str, new_name: str) -> TableInfo:
        """`TableAlreadyExistsError` when `new_name` is taken."""
        ...
    def drop_table(self, name: str) -> DroppedTable:
        """Publish a `drop` snapshot and move the table out of the way of its name."""
        ...
    def dropped_tables(self, name: str | None = None) -> list[DroppedTable]:
        """Dropped tables not yet purged (of `name`, or all), newest drop first."""
        ...
    def undrop_table(self, table_id: int) -> TableInfo:
        """Bring dropped table `table_id` back under its name (an `undrop` snapshot);
        `TableNameReusedError` when a live table holds the name."""
        ...
    def purge_table(self, table_id: int) -> list[str]:
        """Delete every catalog row of dropped table `table_id`; the object paths its
        manifest rows named (the caller deletes the objects)."""
        ...


class SnapshotCatalog(Protocol):
    """Snapshots and the manifest rows they see: publishing one (`commit`, which also
    writes ledger keys and source offsets), reading them, expiring old ones."""

    def commit(self, table: str, *, expected_snapshot_id: int, operation: str,
               commit_id: str, add: Sequence[ManifestEntry] = (),
               remove: Sequence[str] = (), schema: Schema | None = None,
               ledger: Sequence[LedgerEntry] = (), offsets: Sequence[SourceOffset] = (),
               summary: dict[str, Any] | None = None) -> Snapshot: ...
    def snapshot(self, table: str, snapshot_id: int | None = None) -> Snapshot: ...
    def snapshots(self, table: str) -> list[Snapshot]: ...
    def find_commit(self, table: str, commit_id: str) -> Snapshot | None: ...
    def manifests(self, table: str, snapshot_id: int | None = None) -> list[ManifestEntry]: ...
    def live_extent_ids(self, table: str, extent_ids: Sequence[str]) -> set[str]: ...
    def table_counts(self, table: str, snapshot_id: int | None = None) -> tuple[int, int]:
        """(row_count, extent_count) at the snapshot."""
        ...
    def referenced_paths(self) -> set[str]:
        """Object paths of every manifest row of every table, live or not (for orphan GC)."""
        ...
    def expire_snapshots(self, table: str, *, keep_from: int) -> ExpiredSnapshots:
        """Delete the snapshots older than `keep_from` (never the current one) and the
        manifest rows removed at or before `keep_from`, which no retained snapshot sees."""
        ...


class LedgerCatalog(Protocol):
    """The idempotency ledger and the positions of bulk sources, both written only by
    commits (in the transaction of the snapshot they belong to)."""

    def ledger_get(self, key: str) -> LedgerRecord | None: ...
    def sweep_ledger(self, older_than_s: float) -> int:
        """Delete ledger rows older than `older_than_s`, except keys starting with one of
        `PERMANENT_LEDGER_PREFIXES`; how many were deleted."""
        ...
    def source_offsets(self, source: str) -> dict[str, int]: ...


class WorkCatalog(Protocol):
    """The work-unit queue: maintenance tasks that workers claim under a lease."""

    def enqueue_work(self, kind: str, *, table: str | None = None,
                     payload: dict[str, Any] | None = None, dedupe: bool = False) -> WorkUnit:
        """Add a pending unit; with `dedupe`, return the pending or running unit of the same
        kind and table instead if there is one (checked in the same transaction)."""
        ...
    def claim_work(self, worker: str, *, kinds: Sequence[str] | None = None,
                   lease_s: float = 300.0) -> WorkUnit | None: ...
    def finish_work(self, unit_id: int, worker: str, *, ok: bool,
                    result: dict[str, Any] | None = None) -> bool: ...
    def renew_work(self, unit_id: int, worker: str, *, lease_s: float = 300.0) -> bool:
        """Extend a running unit's lease; False if `worker` no longer holds it."""
        ...
    def list_work(self, *, kinds: Sequence[str] | None = None,
                  states: Sequence[str] | None = None, table: str | None = None,
                  limit: int = 100) -> list[WorkUnit]:
        """Units, newest first (by id)."""
        ...


class PruningCatalog(Protocol):
    """Stage 1 of the pruning cascade: the extents of a snapshot that may hold rows
    matching a predicate, decided from what the catalog holds (`shoal.catalog.pruning`)."""

    def plan_extents(self, table: str, predicate: BlockPredicate | None = None, *,
                     snapshot_id: int | None = None) -> PlanResult: ...


@runtime_checkable
class Catalog(TableCatalog, SnapshotCatalog, LedgerCatalog, WorkCatalog, PruningCatalog,
              Protocol):
    """The whole catalog: every role, one database. A caller that needs one role may ask
    for that protocol alone."""

    url: str

    def close(self) -> None: ...
