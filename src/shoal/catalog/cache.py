"""What stage 1 needs of each extent, decoded once per process.

A manifest row is written once, by the commit that adds its extent, together with the
extent's membership filters; afterwards only `removed_snapshot_id` changes (when a later
snapshot removes the extent) until snapshot expiry deletes the row. Extent ids are uuid4.
So, keyed by (table id, extent id), everything of a row but `removed_snapshot_id` is
immutable, and so is whether the extent has a filter for a column, and its bytes.

`ExtentCache` keeps, least recently used out first and bounded by an estimate of the bytes
it holds:

- ("entry", table id, extent id) -> the `ManifestEntry` without column stats, with
  `removed_snapshot_id` None (the caller puts back the value its query read);
- ("filter", table id, extent id, column) -> the decoded `BloomFilter`, or None when the
  extent has no filter for that column.

It never decides which extents a snapshot sees: that set still comes from the catalog on
every query, and only extents in it are looked up, so time travel and concurrent commits
cannot meet a stale entry. Thread-safe.
"""

from __future__ import annotations

from typing import Final

from shoal.catalog.base import ManifestEntry
from shoal.format.membership import BloomFilter
from shoal.lru import MISSING, Lru

__all__ = ["DEFAULT_CACHE_BYTES", "MISSING", "ExtentCache", "entry_bytes", "filter_bytes"]

DEFAULT_CACHE_BYTES: Final = 64 * 2**20
_ABSENT_FILTER_BYTES = 96          # a key and a None
_ENTRY_BYTES = 640                 # a ManifestEntry with its strings, about


def entry_bytes(entry: ManifestEntry) -> int:
    """Rough in-memory size of a cached manifest entry."""
    paths = sum(len(k) + sum(len(p) + 56 for p in v) for k, v in entry.present_paths.items())
    return _ENTRY_BYTES + 2 * len(entry.object_path) + paths


def filter_bytes(bloom: BloomFilter | None) -> int:
    """In-memory size of a cached filter (its bits) or of a cached 'no filter'."""
    return _ABSENT_FILTER_BYTES if bloom is None else _ABSENT_FILTER_BYTES + (bloom.m + 7) // 8


class ExtentCache(Lru):
    """The extent entries and filters of one catalog, bounded by their estimated bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(max_bytes)
