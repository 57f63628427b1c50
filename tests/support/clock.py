"""A clock tests advance by hand, for code that takes an injected clock (the catalog's
`clock`: row timestamps, ledger sweeps, work-unit leases), so a test moves time past a TTL or
a lease instead of sleeping through it."""

from __future__ import annotations

import threading
import time


class ManualClock:
    """Seconds since the epoch, as `time.time` gives them, that move only on `advance()`.

    Starts at the real time, so timestamps written under it look like real ones."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
