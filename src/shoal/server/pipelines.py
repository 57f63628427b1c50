"""Kafka sources bound to tables, run by the server (SPEC §7.3, §10), with Prometheus metrics.

`install_pipelines(app, db, config=..., enabled=...)` (called by `create_app`) registers the
pipeline metrics on the app's registry and returns start/stop callables for the lifespan.
With `enabled` (what `shoal serve` does) a `KafkaSupervisor` runs every table whose
properties bind a Kafka topic (`WITH (kafka_topic='...')`, bootstrap from the table's
`kafka_bootstrap` or `SHOAL_KAFKA_BOOTSTRAP`) as a streaming query on the server's Spark
session: tables are rescanned every `rescan_s` (a table bound later starts then); a pipeline
that fails is restarted after `restart_delay_s` (exactly-once holds: each run resumes at the
catalog's offsets). At shutdown every query is stopped.

`app.state.kafka_pipelines` is read at start, stop and scrape time, so a caller (a test) may
put a supervisor with other settings there before the app starts.

Metrics, by table: `shoal_kafka_records_total`, `shoal_kafka_rows_total`,
`shoal_kafka_rejects_total`, `shoal_kafka_value_bytes_total` (since the server started),
`shoal_kafka_lag` (records not yet in the catalog, as of the last progress tick) and
`shoal_kafka_pipeline_up` (1 running, 0 failed or waiting for a restart).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fastapi import FastAPI
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shoal.client import Shoal
from shoal.config import Config

log = logging.getLogger("shoal.kafka")


@dataclass
class PipelineState:
    table: str
    records: int = 0
    rows: int = 0
    rejects: int = 0
    value_bytes: int = 0
    lag: int | None = None
    up: bool = False
    error: str | None = None


class KafkaSupervisor:
    def __init__(self, db: Shoal, *, default_bootstrap: str | None, rescan_s: float = 10.0,
                 restart_delay_s: float = 5.0, trigger_s: float = 1.0) -> None:
        self.db = db
        self.default_bootstrap = default_bootstrap
        self.rescan_s = rescan_s
        self.restart_delay_s = restart_delay_s
        self.trigger_s = trigger_s
        self.states: dict[str, PipelineState] = {}
        self._pipelines: dict[str, object] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        t = threading.Thread(target=self._scan_loop, name="shoal-kafka-scan", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for p in self._pipelines.values():
                p.stop()  # type: ignore[attr-defined]
        for t in list(self._threads):
            t.join(60)

    def bound_tables(self) -> list[str]:
        return sorted(t.name for t in self.db.catalog.list_tables()
                      if t.properties.get("kafka_topic"))

    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            try:
                for table in self.bound_tables():
                    with self._lock:
                        if table in self.states:
                            continue
                        self.states[table] = PipelineState(table)
                    t = threading.Thread(target=self._run_table, args=(table,),
                                         name=f"shoal-kafka-{table}", daemon=True)
                    t.start()
                    self._threads.append(t)
            except Exception:  # the catalog is briefly unavailable: try again later
                log.exception("scanning tables for Kafka bindings failed")
            self._stop.wait(self.rescan_s)

    def _run_table(self, table: str) -> None:
        from shoal.frontends.kafka import BatchResult, KafkaPipeline, resolve_binding

        state = self.states[table]

        def on_batch(r: BatchResult) -> None:
            state.records += r.records
            state.rows += r.rows
            state.rejects += r.rejects
            state.value_bytes += r.value_bytes

        while not self._stop.is_set():
            pipeline = None
            try:
                binding = resolve_binding(self.db.catalog, table,
                                          default_bootstrap=self.default_bootstrap)
                pipeline = KafkaPipeline(self.db, binding, trigger_s=self.trigger_s,
                                         on_batch=on_batch,
                                         on_progress=lambda p: setattr(state, "lag", p.lag))
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._pipelines[table] = pipeline
                state.up, state.error = True, None
                pipeline.run()
            except Exception as e:
                state.error = f"{type(e).__name__}: {e}"
                log.error("Kafka pipeline of table %s failed: %s", table, state.error)
            finally:
                state.up = False
                with self._lock:
                    self._pipelines.pop(table, None)
                if pipeline is not None:
                    pipeline.close()
            self._stop.wait(self.restart_delay_s)


class KafkaPipelineCollector(Collector):
    def __init__(self, supervisor: Callable[[], KafkaSupervisor | None]) -> None:
        self._supervisor = supervisor

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        sup = self._supervisor()
        states = [] if sup is None else list(sup.states.values())
        counters = [("records", "Kafka records applied (rows + rejects)"),
                    ("rows", "Rows committed from Kafka"),
                    ("rejects", "Kafka records sent to the reject table"),
                    ("value_bytes", "Bytes of the Kafka record values applied")]
        for attr, doc in counters:
            fam = CounterMetricFamily(f"shoal_kafka_{attr}", doc, labels=["table"])
            for s in states:
                fam.add_metric([s.table], getattr(s, attr))
            yield fam
        lag = GaugeMetricFamily("shoal_kafka_lag", "Kafka records not yet in the catalog",
                                labels=["table"])
        up = GaugeMetricFamily("shoal_kafka_pipeline_up", "1 while the table's pipeline runs",
                               labels=["table"])
        for s in states:
            if s.lag is not None:
                lag.add_metric([s.table], s.lag)
            up.add_metric([s.table], 1 if s.up else 0)
        yield lag
        yield up


def install_pipelines(app: FastAPI, db: Shoal, *, config: Config, enabled: bool
                      ) -> tuple[Callable[[], None], Callable[[], None]]:
    """Wire the metrics; return (start, stop) for the lifespan."""
    app.state.kafka_pipelines = (KafkaSupervisor(db, default_bootstrap=config.kafka_bootstrap)
                                 if enabled else None)
    app.state.shoal.metrics.registry.register(
        KafkaPipelineCollector(lambda: app.state.kafka_pipelines))

    def start() -> None:
        if app.state.kafka_pipelines is not None:
            app.state.kafka_pipelines.start()

    def stop() -> None:
        if app.state.kafka_pipelines is not None:
            app.state.kafka_pipelines.stop()

    return start, stop
