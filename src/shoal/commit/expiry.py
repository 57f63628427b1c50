"""Deleting committed history: expired snapshots' files, and objects nothing references.

The other recipes of this layer delete extents that never committed; these two delete what
the catalog no longer needs, for maintenance's retention and orphan GC:

- `expire_history(catalog, store, table, keep_from=K)` deletes every snapshot older than K
  from the catalog, with every manifest row removed at or before K (no retained snapshot can
  see it), in one catalog transaction; then it deletes the objects of those rows. A crash in
  between leaves them unreferenced, for orphan GC. A file referenced by any remaining
  manifest row, hence by any retained snapshot, is never deleted here.
- `purge_dropped(catalog, store, table_id)` deletes every catalog row of a dropped table in
  one transaction, then the objects its manifest rows named (a dropped table's files are
  referenced by nothing else: extent ids are unique). A crash in between leaves them to
  orphan GC.
- `delete_unreferenced(catalog, store, candidates)` deletes the candidate objects (orphans
  found by listing the store, then reading the catalog) that the catalog still does not
  reference when asked again right before the deletes: a commit that landed after the
  listing wins.

A delete that fails is logged and skipped (the next run retries); neither function raises
for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from shoal.catalog.base import Catalog
from shoal.errors import ShoalError
from shoal.storage.base import ObjectInfo, ObjectStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpiredHistory:
    snapshot_ids: list[int] = field(default_factory=list)    # deleted from the catalog
    files_deleted: int = 0
    bytes_deleted: int = 0


def expire_history(catalog: Catalog, store: ObjectStore, table: str, *,
                   keep_from: int) -> ExpiredHistory:
    """Drop the snapshots of `table` older than `keep_from` and the files only they needed."""
    expired = catalog.expire_snapshots(table, keep_from=keep_from)
    files = size_total = 0
    for path in expired.object_paths:
        try:
            size = store.size(path)
            store.delete(path)
        except ShoalError as e:  # already gone, or left to orphan GC
            log.warning("could not delete expired extent %s: %s", path, e)
            continue
        files += 1
        size_total += size
    return ExpiredHistory(list(expired.snapshot_ids), files, size_total)


def purge_dropped(catalog: Catalog, store: ObjectStore, table_id: int) -> ExpiredHistory:
    """Delete dropped table `table_id` from the catalog, then its files."""
    files = size_total = 0
    for path in catalog.purge_table(table_id):
        try:
            size = store.size(path)
            store.delete(path)
        except ShoalError as e:  # already gone, or left to orphan GC
            log.warning("could not delete extent %s of a purged table: %s", path, e)
            continue
        files += 1
        size_total += size
    return ExpiredHistory([], files, size_total)


def delete_unreferenced(catalog: Catalog, store: ObjectStore,
                        candidates: Sequence[ObjectInfo]) -> list[ObjectInfo]:
    """Delete the `candidates` no manifest row references now; the ones deleted."""
    if not candidates:
        return []
    referenced = catalog.referenced_paths()    # re-read: the last word before deleting
    deleted = []
    for o in candidates:
        if o.path in referenced:
            continue
        try:
            store.delete(o.path)
        except ShoalError as e:
            log.warning("orphan GC could not delete %s (next run retries): %s", o.path, e)
            continue
        deleted.append(o)
    return deleted
