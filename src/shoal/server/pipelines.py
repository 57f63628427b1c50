"""The server's part in bound pipelines: start and stop one
`BindingSupervisor` (`shoal.frontends.supervisor`, where the rules live) over the Kafka and
file-drop kinds, and export its per-binding states as Prometheus metrics.

`install_pipelines(app, db, config=..., enabled=...)` (called by `create_app`) registers
the metrics on the app's registry and returns start/stop callables for the lifespan. With
`enabled` (what `shoal serve` does) `app.state.pipelines` is a supervisor that runs every
bound table: Kafka (`WITH (kafka_topic='...')`, bootstrap from the table's
`kafka_bootstrap` or `SHOAL_KAFKA_BOOTSTRAP`) as a streaming query, file-drop
(`WITH (filedrop_path='...')`) as a poll loop, both on the server's Spark session,
scrape jobs (`WITH (scrape_targets='...')`) as a scrape loop in its own thread, Sentry
pulls (`WITH (sentry_url='...')`) as a pull loop in its own thread, and syncs
(`WITH (sync_source='...')`) as a change loop in its own thread. A table
created, dropped, renamed or altered through the server's client wakes the supervisor at
once. At shutdown every run stops (a file-drop scan in progress commits first).

`app.state.pipelines` is read at start, stop and scrape time, so a caller (a test) may put a
supervisor with other settings there before the app starts.

Metrics, by table, for each kind `<k>` (`kafka`, `filedrop`, `scrape`, `sentry`, `sync`): the
kind's counters as `shoal_<k>_<name>_total` (since the binding's runner started) and gauges as
`shoal_<k>_<name>` (left out while they have no value), then `shoal_<k>_pipeline_up` (1
while the run goes and reports itself healthy), `shoal_<k>_pipeline_restarts_total` and
`shoal_<k>_pipeline_failures_total`. A retired binding's metrics go with it.
Kafka: `records`, `rows`, `rejects`, `value_bytes`, gauge `lag`; file-drop: `files`, `rows`,
`rejects`, `bytes`, `duplicates`, `scans`, `scan_errors`; scrape: `scrapes`, `scrape_failures`,
`samples`, `rows`, `stale_markers`, gauges `targets_up`, `round_seconds`; sentry: `pages`,
`rows`, `rate_limited`, `round_failures`, gauge `round_seconds`; sync: `changes`, `rows`,
`commits` (see their `kind.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from fastapi import FastAPI
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shoal.client import Shoal
from shoal.config import Config
from shoal.frontends.filedrop.kind import FileDropKind
from shoal.frontends.kafka.kind import KafkaKind
from shoal.frontends.prometheus.kind import ScrapeKind
from shoal.frontends.sentry.kind import SentryKind
from shoal.frontends.supervisor import BindingKind, BindingState, BindingSupervisor
from shoal.frontends.sync.kind import SyncKind


def pipeline_kinds(db: Shoal, config: Config) -> list[BindingKind]:
    """The kinds of bound pipeline the server runs."""
    return [KafkaKind(db, default_bootstrap=config.kafka_bootstrap), FileDropKind(db),
            ScrapeKind(db), SentryKind(db), SyncKind(db)]


class PipelineCollector(Collector):
    """The supervisor's per-binding states as metrics, read at scrape time (see the module
    docstring). Without a supervisor, each of `kinds` exports its families with no sample."""

    def __init__(self, supervisor: Callable[[], BindingSupervisor | None],
                 kinds: Sequence[BindingKind]) -> None:
        self._supervisor = supervisor
        self._kinds = kinds

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        sup = self._supervisor()
        kinds = self._kinds if sup is None else sup.kinds
        states = [] if sup is None else sup.snapshot()
        for kind in kinds:
            mine = sorted((s for s in states if s.kind == kind.name), key=lambda s: s.table)
            yield from _families(kind, mine)


def _families(kind: BindingKind, states: list[BindingState]) -> Iterator[Metric]:
    prefix = f"shoal_{kind.name}"
    for name, doc in kind.counters:
        fam = CounterMetricFamily(f"{prefix}_{name}", doc, labels=["table"])
        for s in states:
            fam.add_metric([s.table], s.counters[name])
        yield fam
    for name, doc in kind.gauges:
        gauge = GaugeMetricFamily(f"{prefix}_{name}", doc, labels=["table"])
        for s in states:
            value = s.gauges[name]
            if value is not None:
                gauge.add_metric([s.table], value)
        yield gauge
    up = GaugeMetricFamily(f"{prefix}_pipeline_up",
                           f"1 while the table's {kind.name} pipeline runs and reports itself "
                           "healthy", labels=["table"])
    restarts = CounterMetricFamily(f"{prefix}_pipeline_restarts",
                                   f"{kind.name} pipeline runs started after the first "
                                   "(after a failure or a changed binding)", labels=["table"])
    failures = CounterMetricFamily(f"{prefix}_pipeline_failures",
                                   f"{kind.name} pipeline runs that failed or could not start",
                                   labels=["table"])
    for s in states:
        up.add_metric([s.table], 1 if s.up else 0)
        restarts.add_metric([s.table], s.restarts)
        failures.add_metric([s.table], s.failures)
    yield from (up, restarts, failures)


def install_pipelines(app: FastAPI, db: Shoal, *, config: Config, enabled: bool
                      ) -> tuple[Callable[[], None], Callable[[], None]]:
    """Wire the metrics; return (start, stop) for the lifespan."""
    kinds = pipeline_kinds(db, config)
    app.state.pipelines = BindingSupervisor(db.catalog, kinds) if enabled else None
    app.state.shoal.metrics.registry.register(
        PipelineCollector(lambda: app.state.pipelines, kinds))

    def poke() -> None:
        if app.state.pipelines is not None:
            app.state.pipelines.poke()

    db.on_tables_changed(poke)    # a new, dropped, renamed or altered table: rescan at once

    def start() -> None:
        if app.state.pipelines is not None:
            app.state.pipelines.start()

    def stop() -> None:
        if app.state.pipelines is not None:
            app.state.pipelines.stop()

    return start, stop
