"""Orphan detection: objects under the table prefix that no manifest row references.

An orphan is what a writer leaves when it dies between writing an extent and the snapshot
CAS, or when a commit's outcome stayed unknown. The grace period protects extents of commits
still in flight: only objects older than `grace_s` are reported.
"""

from __future__ import annotations

import time

from shoal.catalog.base import Catalog
from shoal.storage.base import ObjectInfo, ObjectStore

TABLES_PREFIX = "tables/"


def find_orphans(catalog: Catalog, store: ObjectStore, *, grace_s: float = 3600.0,
                 now_ns: int | None = None) -> list[ObjectInfo]:
    # List first, then read the catalog: an extent committed between the two steps is then
    # seen as referenced, never reported as an orphan.
    listed = list(store.list(TABLES_PREFIX))
    referenced = catalog.referenced_paths()
    cutoff = (now_ns if now_ns is not None else time.time_ns()) - int(grace_s * 1e9)
    return sorted((o for o in listed if o.path not in referenced and o.mtime_ns <= cutoff),
                  key=lambda o: o.path)
