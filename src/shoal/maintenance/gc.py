"""Orphan GC: delete objects under `tables/` that no manifest row references.

Built on `find_orphans` (list the store first, then read the catalog, so an extent
committed in between counts as referenced). Only objects older than `grace_s` are deleted:
an extent written by a commit still in flight is younger than the grace period, and every
writer of shoal commits well within it (compaction gives up a commit that would not). A
manifest row of any table, live or removed but not yet expired, protects its object, so a
file a retained snapshot references is never deleted. The deletes are the commit layer's
`delete_unreferenced`, which asks the catalog again right before deleting: a commit that
landed after the listing still wins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from shoal.catalog.base import Catalog
from shoal.commit import delete_unreferenced
from shoal.maintenance.orphans import find_orphans
from shoal.storage.base import ObjectStore

DEFAULT_GRACE_S = 3600.0


@dataclass
class GcReport:
    orphans: int = 0
    deleted: int = 0
    bytes_deleted: int = 0
    paths: list[str] = field(default_factory=list)   # up to 100, for the status

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def collect_garbage(catalog: Catalog, store: ObjectStore, *, grace_s: float = DEFAULT_GRACE_S,
                    now_ns: int | None = None, dry_run: bool = False) -> GcReport:
    now_ns = time.time_ns() if now_ns is None else now_ns
    orphans = find_orphans(catalog, store, grace_s=grace_s, now_ns=now_ns)
    report = GcReport(orphans=len(orphans))
    if dry_run or not orphans:
        report.paths = [o.path for o in orphans[:100]]
        return report
    deleted = delete_unreferenced(catalog, store, orphans)
    report.deleted = len(deleted)
    report.bytes_deleted = sum(o.size for o in deleted)
    report.paths = [o.path for o in deleted[:100]]
    return report
