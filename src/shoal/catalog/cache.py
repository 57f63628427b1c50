"""What stage 1 needs of each extent, decoded once per process (SPEC §6.2, issue 13).

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

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Final

from shoal.catalog.base import ManifestEntry
from shoal.format.membership import BloomFilter

DEFAULT_CACHE_BYTES: Final = 64 * 2**20
MISSING: Final = object()          # `get`'s answer for a key not held
_ABSENT_FILTER_BYTES = 96          # a key and a None
_ENTRY_BYTES = 640                 # a ManifestEntry with its strings, about


def entry_bytes(entry: ManifestEntry) -> int:
    """Rough in-memory size of a cached manifest entry."""
    paths = sum(len(k) + sum(len(p) + 56 for p in v) for k, v in entry.present_paths.items())
    return _ENTRY_BYTES + 2 * len(entry.object_path) + paths


def filter_bytes(bloom: BloomFilter | None) -> int:
    """In-memory size of a cached filter (its bits) or of a cached 'no filter'."""
    return _ABSENT_FILTER_BYTES if bloom is None else _ABSENT_FILTER_BYTES + (bloom.m + 7) // 8


class ExtentCache:
    """An LRU map bounded by the bytes of its values (`max_bytes`; 0 keeps nothing)."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> Any:
        """The value under `key` (made most recent), or `MISSING`."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return MISSING
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Hold `value` under `key`; evicts the least recently used beyond `max_bytes`. A
        value larger than the whole budget is not kept."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if nbytes > self.max_bytes:
                return
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, n) = self._items.popitem(last=False)
                self._bytes -= n

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
