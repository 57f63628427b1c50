"""A thread-safe least-recently-used map bounded by the weight of what it holds.

One implementation for every per-process cache of immutable things (the catalog's extent
entries and filters, extent footers and block filters, transpiled statements): each `put`
names the value's weight (its estimated bytes, or 1 to bound by count), and the least
recently used values go once the total passes `max_weight`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Final

MISSING: Final = object()          # `get`'s answer for a key not held


class Lru:
    """An LRU map bounded by the total weight of its values (`max_bytes`; 0 keeps
    nothing)."""

    def __init__(self, max_bytes: int) -> None:
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
