"""Sentry pulls as a kind of bound pipeline (`shoal.frontends.supervisor`): every table
whose properties bind a Sentry server (`WITH (sentry_url='...')`, `binding.py`) is pulled
every `sentry_interval` by a `SentryPuller` (`pull.py`).

The URL's host must be allowed (`SHOAL_ALLOWED_HOSTS`), checked again each time the binding
starts and by `shoal.outbound` on every request; the token is read from the environment
variable `sentry_token_env` names when the binding starts. Rounds start on a fixed grid
(start + k * interval on the injected clock). A round that fails (Sentry unreachable, an
error status, a commit that fails) is not a pipeline failure: it is logged, counted in
`round_failures`, the binding reports itself unhealthy (`shoal_sentry_pipeline_up` 0) with
the reason, and the next round starts again from the committed position.

Per binding, counters `pages`, `rows` (committed), `rate_limited` (429 answers waited out)
and `round_failures`; gauge `round_seconds` (wall time of the last round).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError, TableNotFoundError
from shoal.frontends.sentry.binding import (SentryBinding, is_bound, parse_binding,
                                            resolve_token, url_host)
from shoal.frontends.sentry.pull import RoundResult, SentryPuller
from shoal.frontends.supervisor import BindingState, MetricNames, Sleep, wait_event
from shoal.locations import LocationPolicy

if TYPE_CHECKING:
    from shoal.client import Shoal

log = logging.getLogger("shoal.sentry")


def resolve_sentry_binding(db: Shoal, table: str) -> SentryBinding | None:
    """The table's Sentry binding now (without its token); None when unbound or gone."""
    try:
        props = db.catalog.load_table(table).properties
    except TableNotFoundError:
        return None
    if not is_bound(props):
        return None
    binding = parse_binding(table, props)
    LocationPolicy.from_config(db.config).check_hosts(url_host(binding.url),
                                                      what="sentry_url")
    return binding


class SentryKind:
    """Sentry pulls of the tables of `db` (a `BindingKind`)."""

    name = "sentry"
    counters: MetricNames = (
        ("pages", "Pages of Sentry's API read"),
        ("rows", "Rows committed by Sentry pulls"),
        ("rate_limited", "429 answers from Sentry waited out"),
        ("round_failures", "Pull rounds that failed (retried at the next round)"))
    gauges: MetricNames = (("round_seconds", "Wall time of the last pull round"),)

    def __init__(self, db: Shoal, *, clock: Callable[[], float] = time.time,
                 sleep: Sleep = wait_event) -> None:
        self.db = db
        self.clock = clock
        self.sleep = sleep

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return is_bound(properties)

    def resolve(self, table: str) -> SentryBinding | None:
        return resolve_sentry_binding(self.db, table)

    def run(self, binding: SentryBinding, stop: threading.Event, state: BindingState) -> None:
        with SentryPuller(self.db, resolve_token(binding), sleep=self.sleep,
                          clock=self.clock) as puller:
            next_at = self.clock()
            while not stop.is_set():
                self.round(puller, stop, state)
                now = self.clock()
                next_at += binding.interval_s
                if next_at <= now:      # overran: skip the missed starts
                    next_at += binding.interval_s * (1 + (now - next_at) // binding.interval_s)
                if self.sleep(stop, next_at - now):
                    return

    def round(self, puller: SentryPuller, stop: threading.Event,
              state: BindingState) -> RoundResult | None:
        """One pull round, reported into `state`; a failure is reported and logged."""
        began = time.perf_counter()
        try:
            result = puller.pull(stop)
        except ShoalError as e:
            state.count(round_failures=1)
            state.report(up=False, error=f"{type(e).__name__}: {e}")
            log.error("Sentry pull of table %s failed: %s", puller.binding.table, state.error)
            return None
        state.gauge("round_seconds", time.perf_counter() - began)
        state.count(pages=result.pages, rows=result.rows, rate_limited=result.rate_limited)
        state.report(up=True)
        return result
