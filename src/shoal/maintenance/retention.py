"""Retention and snapshot expiry.

Two steps per table, in this order:

1. Data retention (only with a `retention` property): the extents live at the current
   snapshot whose data is wholly older than the policy (`max_ts < now - retention`) are
   removed by one snapshot `operation="retention"` through the commit coordinator (the
   rebase recomputes the set from the snapshot it commits on). An extent that straddles the
   cutoff stays until all of its rows are older: retention never rewrites extents.
2. Snapshot expiry (every table, `snapshot_retention`, default 1 day): let K be the newest
   snapshot created at or before `now - snapshot_retention`. Every snapshot older than K is
   deleted from the catalog (time travel to it fails with `SnapshotNotFoundError`), and so
   is every manifest row removed at or before K: no retained snapshot (K and newer) can see
   it. Keeping K keeps the table readable *as of* any instant inside the window. The
   current snapshot is never expired.

Dropped tables (`DROP TABLE`) keep their rows and files for their `snapshot_retention`
after the drop, so `UNDROP TABLE` can bring them back; `purge_dropped_tables` (run by the
`gc` unit) then deletes them from the catalog and deletes their files.

Files: the objects of the manifest rows dropped in step 2 are deleted after the catalog
transaction commits, by the commit layer's `expire_history`; a crash in between leaves them
unreferenced, and orphan GC deletes them later. A file referenced by any remaining manifest
row, hence by any retained snapshot, is never deleted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from shoal.catalog.base import Catalog, DroppedTable, TableInfo
from shoal.commit import CommitCoordinator, CommitSpec, expire_history, purge_dropped
from shoal.errors import ShoalError
from shoal.maintenance.policy import TablePolicy
from shoal.storage.base import ObjectStore

log = logging.getLogger(__name__)


@dataclass
class RetentionReport:
    table: str
    extents_removed: int = 0
    rows_removed: int = 0
    snapshot_id: int | None = None
    snapshots_expired: int = 0
    oldest_retained_snapshot: int | None = None
    files_deleted: int = 0
    bytes_deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def apply_retention(catalog: Catalog, coordinator: CommitCoordinator, store: ObjectStore,
                    table: str, *, now: float | None = None) -> RetentionReport:
    """Run both steps for `table`; `now` (seconds since the epoch) defaults to the clock."""
    now = time.time() if now is None else now
    info = catalog.load_table(table)
    policy = TablePolicy.from_properties(info.properties)
    report = RetentionReport(table)
    if policy.retention_s is not None:
        cutoff_ns = int((now - policy.retention_s) * 1e9)
        removed: list[tuple[str, int]] = []

        def build(current: TableInfo) -> CommitSpec | None:
            live = catalog.manifests(table, current.current_snapshot_id)
            removed[:] = [(e.extent_id, e.row_count) for e in live
                          if e.max_ts is not None and e.max_ts < cutoff_ns]
            if not removed:
                return None
            return CommitSpec(operation="retention", remove=[x for x, _ in removed],
                              summary={"removed_extents": len(removed),
                                       "removed_rows": sum(n for _, n in removed),
                                       "cutoff_ns": cutoff_ns})

        outcome = coordinator.run(table, build)
        if outcome.snapshot is not None:
            report.snapshot_id = outcome.snapshot.snapshot_id
            report.extents_removed = len(removed)
            report.rows_removed = sum(n for _, n in removed)
    expire_snapshots(catalog, store, table, older_than_s=policy.snapshot_retention_s,
                     now=now, report=report)
    return report


def expire_snapshots(catalog: Catalog, store: ObjectStore, table: str, *,
                     older_than_s: float, now: float | None = None,
                     report: RetentionReport | None = None) -> RetentionReport:
    """Step 2 alone (see the module docstring)."""
    now = time.time() if now is None else now
    report = report or RetentionReport(table)
    cutoff = now - older_than_s
    before = [s.snapshot_id for s in catalog.snapshots(table) if s.created_at <= cutoff]
    if not before:
        return report
    keep_from = max(before)
    expired = expire_history(catalog, store, table, keep_from=keep_from)
    report.snapshots_expired = len(expired.snapshot_ids)
    report.oldest_retained_snapshot = keep_from
    report.files_deleted += expired.files_deleted
    report.bytes_deleted += expired.bytes_deleted
    return report


def undrop_deadline(dropped: DroppedTable) -> float:
    """When (seconds since the epoch) `dropped` stops being undroppable: its drop plus its
    `snapshot_retention` (the default when the stored value does not parse)."""
    try:
        keep = TablePolicy.from_properties(dropped.properties).snapshot_retention_s
    except ShoalError:
        keep = TablePolicy.from_properties({}).snapshot_retention_s
    return dropped.dropped_at + keep


@dataclass
class PurgeReport:
    tables_purged: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"tables_purged": self.tables_purged, "purged_files": self.files_deleted,
                "purged_bytes": self.bytes_deleted}


def purge_dropped_tables(catalog: Catalog, store: ObjectStore, *,
                         now: float | None = None) -> PurgeReport:
    """Delete the dropped tables whose snapshot retention has passed, with their files."""
    now = time.time() if now is None else now
    report = PurgeReport()
    for dropped in catalog.dropped_tables():
        if undrop_deadline(dropped) > now:
            continue
        done = purge_dropped(catalog, store, dropped.id)
        log.info("purged dropped table %s (id %d): %d files, %d bytes", dropped.name,
                 dropped.id, done.files_deleted, done.bytes_deleted)
        report.tables_purged += 1
        report.files_deleted += done.files_deleted
        report.bytes_deleted += done.bytes_deleted
    return report
