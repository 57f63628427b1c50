"""The maintenance scheduler: decides which work units to enqueue (docs/maintenance.md).

`Scheduler.tick()` is cheap enough to call every few seconds from any number of processes
(`shoal maintain`, every server): everything it knows comes from the catalog, and
`enqueue_work(..., dedupe=True)` never adds a unit of a kind and table that is already
pending or running.

- `compact` (per table): when its live extents hold a plannable compaction of at least
  `compact_min_extents` small extents (table property, default 16). Checked every
  `compaction_check_s`.
- `retention` (per table, also without a `retention` property: snapshot expiry applies to
  every table): when no unit of it was created in the last `retention_every_s`.
- `gc` (global): every `gc_every_s`; `ledger_sweep` (global): every `ledger_sweep_every_s`
  (hourly, docs/maintenance.md).

`force=True` (what `shoal maintain --once` uses) ignores the intervals, not the dedupe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from shoal.catalog.base import Catalog, WorkUnit
from shoal.commit import SWEEP_INTERVAL_S
from shoal.errors import ShoalError
from shoal.maintenance.compaction import plan_compaction
from shoal.maintenance.policy import TablePolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScheduleSettings:
    compaction_check_s: float = 60.0
    retention_every_s: float = 3600.0
    gc_every_s: float = 6 * 3600.0
    ledger_sweep_every_s: float = SWEEP_INTERVAL_S


class Scheduler:
    def __init__(self, catalog: Catalog, settings: ScheduleSettings | None = None) -> None:
        self.catalog = catalog
        self.settings = settings or ScheduleSettings()
        self._last_compaction_check = float("-inf")

    def tick(self, *, now: float | None = None, force: bool = False,
             kinds: Sequence[str] | None = None) -> list[WorkUnit]:
        """Enqueue what is due (of `kinds`, default all); returns the units created or
        found pending/running."""
        now = time.time() if now is None else now
        wanted = set(kinds or ("compact", "retention", "gc", "ledger_sweep"))
        s = self.settings
        out: list[WorkUnit] = []
        tables = self.catalog.list_tables()
        if "compact" in wanted and (force or now - self._last_compaction_check
                                    >= s.compaction_check_s):
            self._last_compaction_check = now
            for t in tables:
                try:
                    if self._needs_compaction(t.name, t.properties):
                        out.append(self.catalog.enqueue_work(
                            "compact", table=t.name, payload={"table": t.name}, dedupe=True))
                except ShoalError as e:     # a bad property fails that table, not the tick
                    log.warning("not scheduling compaction of %s: %s", t.name, e)
        last = self._last_created(["retention", "gc", "ledger_sweep"])
        for t in tables if "retention" in wanted else ():
            if force or now - last.get(("retention", t.id), float("-inf")) >= s.retention_every_s:
                out.append(self.catalog.enqueue_work(
                    "retention", table=t.name, payload={"table": t.name}, dedupe=True))
        for kind, every in (("gc", s.gc_every_s), ("ledger_sweep", s.ledger_sweep_every_s)):
            if kind in wanted and (force or now - last.get((kind, None), float("-inf"))
                                   >= every):
                out.append(self.catalog.enqueue_work(kind, dedupe=True))
        return out

    def _needs_compaction(self, table: str, properties: dict) -> bool:
        policy = TablePolicy.from_properties(properties)
        groups = plan_compaction(self.catalog.manifests(table), policy)
        return sum(len(g.entries) for g in groups) >= policy.compact_min_extents

    def _last_created(self, kinds: list[str]) -> dict[tuple[str, int | None], float]:
        """(kind, table id) -> when its newest unit was created (any state)."""
        last: dict[tuple[str, int | None], float] = {}
        for u in self.catalog.list_work(kinds=kinds, limit=10_000):
            key = (u.kind, u.table_id)
            if key not in last and u.created_at is not None:
                last[key] = u.created_at      # newest first: the first seen is the latest
        return last
