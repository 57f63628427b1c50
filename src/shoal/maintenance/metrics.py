"""Prometheus metrics of maintenance, collected at scrape time.

From the worker's counters (`WorkerStats`, since the process started):
`shoal_maintenance_units_total{kind,outcome}`, `shoal_maintenance_unit_seconds_total{kind}`,
`shoal_maintenance_extents_compacted_total`, `..._extents_written_total`,
`..._bytes_compacted_total`, `..._extents_expired_total`, `..._rows_expired_total`,
`..._snapshots_expired_total`, `..._files_deleted_total`, `..._orphans_deleted_total`,
`..._ledger_keys_swept_total`. From the catalog (every worker's units):
`shoal_maintenance_queue{state}` over the newest 1,000 units. A catalog that does not answer
leaves the queue gauge out of that scrape instead of failing it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shoal.catalog.base import Catalog
from shoal.maintenance.worker import WorkerStats

log = logging.getLogger(__name__)

_COUNTERS = (
    ("extents_compacted", "Small extents replaced by compaction", "extents_compacted"),
    ("extents_written", "Extents written by compaction", "extents_written"),
    ("bytes_compacted", "Input bytes read by compaction", "bytes_compacted"),
    ("extents_expired", "Extents removed by retention", "extents_expired"),
    ("rows_expired", "Rows removed by retention", "rows_expired"),
    ("snapshots_expired", "Snapshots expired", "snapshots_expired"),
    ("files_deleted", "Extent files deleted after snapshot expiry", "files_deleted"),
    ("orphans_deleted", "Orphan objects deleted by GC", "orphans_deleted"),
    ("ledger_keys_swept", "Idempotency keys deleted by the ledger sweep", "ledger_swept"),
)


class MaintenanceCollector(Collector):
    def __init__(self, catalog: Catalog, stats: Callable[[], WorkerStats | None]) -> None:
        self._catalog = catalog
        self._stats = stats

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        if stats is not None:
            units = CounterMetricFamily("shoal_maintenance_units",
                                        "Maintenance units run by this process",
                                        labels=["kind", "outcome"])
            for (kind, outcome), n in sorted(stats.units.items()):
                units.add_metric([kind, outcome], n)
            yield units
            secs = CounterMetricFamily("shoal_maintenance_unit_seconds",
                                       "Seconds spent running maintenance units",
                                       labels=["kind"])
            for kind, s in sorted(stats.seconds.items()):
                secs.add_metric([kind], s)
            yield secs
            for name, doc, attr in _COUNTERS:
                yield CounterMetricFamily(f"shoal_maintenance_{name}", doc,
                                          value=getattr(stats, attr))
        try:
            units_now = self._catalog.list_work(limit=1000)
        except Exception:  # a scrape must not fail on the catalog
            log.exception("maintenance metrics: the catalog did not answer")
            return
        queue = GaugeMetricFamily("shoal_maintenance_queue",
                                  "Maintenance units by state (newest 1,000)",
                                  labels=["state"])
        counts = {s: 0 for s in ("pending", "running", "done", "failed")}
        for u in units_now:
            counts[u.state] = counts.get(u.state, 0) + 1
        for state, n in counts.items():
            queue.add_metric([state], n)
        yield queue
