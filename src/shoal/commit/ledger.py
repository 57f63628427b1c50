"""The idempotency ledger's TTL: keys live 24 h; an hourly sweeper deletes those over 25 h.

Ledger rows themselves are written by the catalog in the snapshot's own transaction; this
module only expires them. A swept key is fresh again: the same request applies anew.
"""

from __future__ import annotations

import logging
import threading

from shoal.catalog.base import Catalog

LEDGER_TTL_S = 24 * 3600
SWEEP_AGE_S = 25 * 3600          # one hour of grace past the TTL
SWEEP_INTERVAL_S = 3600

log = logging.getLogger(__name__)


class LedgerSweeper:
    """A daemon thread running `catalog.sweep_ledger(max_age_s)` every `interval_s`."""

    def __init__(self, catalog: Catalog, *, interval_s: float = SWEEP_INTERVAL_S,
                 max_age_s: float = SWEEP_AGE_S) -> None:
        self.catalog = catalog
        self.interval_s = interval_s
        self.max_age_s = max_age_s
        self.swept = 0
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shoal-ledger-sweeper",
                                        daemon=True)

    def start(self) -> LedgerSweeper:
        self._thread.start()
        return self

    def sweep_once(self) -> int:
        n = self.catalog.sweep_ledger(self.max_age_s)
        self.swept += n
        self.runs += 1
        return n

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                n = self.sweep_once()
                if n:
                    log.info("ledger sweep removed %d expired keys", n)
            except Exception:
                log.exception("ledger sweep failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
