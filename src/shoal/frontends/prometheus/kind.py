"""Scrape jobs as a kind of bound pipeline (`shoal.frontends.supervisor`): every table whose
properties bind scrape targets (`WITH (scrape_targets='host:port,...')`, see
`shoal.frontends.prometheus.binding`) is scraped every `scrape_interval` by a `Scraper`.

The hosts of the targets must be allowed (`SHOAL_ALLOWED_HOSTS`), checked again each time
the binding starts, and by `shoal.outbound` on every hop of every scrape (redirects and
resolved addresses included). Rounds start on a fixed grid (start + k * interval on the injected
`clock`); a round that overruns skips the starts it missed instead of bunching up. A target
that fails is not a pipeline failure: it gets `up` 0 in the table, the round is counted in
`scrape_failures` and the binding reports itself unhealthy (`shoal_scrape_pipeline_up` 0,
the error naming the target) until a round where every target answers. A commit that fails
is reported the same way and the next round goes on.

Per binding, counters `scrapes` (target scrapes), `scrape_failures`, `samples` (in the
expositions), `rows` (committed: samples, staleness markers and synthetic series) and
`stale_markers`; gauges `targets_up` and `round_seconds` (wall time of the last round).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError, TableNotFoundError
from shoal.frontends.prometheus.scrape import Clock, Scraper, TargetScrape
from shoal.frontends.supervisor import BindingState, MetricNames, Sleep, wait_event
from shoal.frontends.prometheus.binding import ScrapeBinding, is_bound, parse_binding
from shoal.locations import LocationPolicy

if TYPE_CHECKING:
    from shoal.client import Shoal

log = logging.getLogger("shoal.scrape")


def resolve_scrape_binding(db: Shoal, table: str) -> ScrapeBinding | None:
    """The table's scrape binding now; None when the table is unbound or gone. Raises
    `InvalidPropertyError` / `LocationNotAllowedError` for a binding that cannot run."""
    try:
        props = db.catalog.load_table(table).properties
    except TableNotFoundError:
        return None
    if not is_bound(props):
        return None
    LocationPolicy.from_config(db.config).check_hosts(str(props["scrape_targets"]),
                                                      what="scrape_targets")
    return parse_binding(table, props)


class ScrapeKind:
    """Scrape bindings of the tables of `db` (a `BindingKind`)."""

    name = "scrape"
    counters: MetricNames = (
        ("scrapes", "Scrapes of a target (successful or not)"),
        ("scrape_failures", "Scrapes of a target that failed (up 0)"),
        ("samples", "Samples in the scraped expositions"),
        ("rows", "Rows committed by scrapes (samples, staleness markers, synthetic series)"),
        ("stale_markers", "Staleness markers written for series that went away"))
    gauges: MetricNames = (
        ("targets_up", "Targets that answered the last scrape round"),
        ("round_seconds", "Wall time of the last scrape round, commits included"))

    def __init__(self, db: Shoal, *, clock: Clock = time.time,
                 sleep: Sleep = wait_event) -> None:
        self.db = db
        self.clock = clock
        self.sleep = sleep
        # (table, target) -> its latest scrape, for the Prometheus API's targets page
        self.last: dict[tuple[str, str], TargetScrape] = {}

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return is_bound(properties)

    def resolve(self, table: str) -> ScrapeBinding | None:
        return resolve_scrape_binding(self.db, table)

    def run(self, binding: ScrapeBinding, stop: threading.Event, state: BindingState) -> None:
        with Scraper(self.db, binding, clock=self.clock) as scraper:
            next_at = self.clock()
            while not stop.is_set():
                self.round(scraper, state)
                now = self.clock()
                next_at += binding.interval_s
                if next_at <= now:      # overran: skip the missed starts
                    next_at += binding.interval_s * (1 + (now - next_at) // binding.interval_s)
                if self.sleep(stop, next_at - now):
                    return

    def round(self, scraper: Scraper, state: BindingState) -> list[TargetScrape]:
        """One scrape of every target, reported into `state`; a failed commit is reported
        and logged, and the loop goes on."""
        began = time.perf_counter()
        try:
            results = scraper.scrape()
        except ShoalError as e:
            state.report(up=False, error=f"{type(e).__name__}: {e}")
            log.error("scrape of table %s could not commit: %s", scraper.binding.table,
                      state.error)
            return []
        state.gauge("round_seconds", time.perf_counter() - began)
        for r in results:
            self.last[(scraper.binding.table, r.target)] = r
        down = [r for r in results if not r.up]
        state.count(scrapes=len(results), scrape_failures=len(down),
                    samples=sum(r.samples for r in results), rows=sum(r.rows for r in results),
                    stale_markers=sum(r.stale_markers for r in results))
        state.gauge("targets_up", float(len(results) - len(down)))
        if down:
            state.report(up=False, error="; ".join(f"{r.target}: {r.error}" for r in down))
        else:
            state.report(up=True)
        return results
