"""Kafka and file-drop sources bound to tables, run by the server (SPEC §7.3, §7.4, §10), with
Prometheus metrics.

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

File-drop: with `enabled` a `FileDropSupervisor` (`app.state.filedrop_pipelines`, same rules)
runs every table whose properties bind a path (`WITH (filedrop_path='...')`, see
`shoal.frontends.filedrop.binding`) as a poll loop on the server's Spark session, one scan
every `filedrop_interval` seconds (default 10). Tables are rescanned every `rescan_s`; a
pipeline that cannot start (bad path, ...) is retried after `restart_delay_s`; a scan that
fails is counted and the next scan retries what did not land (exactly-once holds through the
ledger). After each scan the table's binding is read again: a changed binding restarts the
pipeline, a removed binding or a dropped table retires it (its metrics go). At shutdown the
scan in progress commits and the loops end. Metrics, by table, since the server started:
`shoal_filedrop_files_total` (new files committed), `shoal_filedrop_rows_total`,
`shoal_filedrop_rejects_total` (lines sent to the reject table), `shoal_filedrop_bytes_total`
(bytes of the objects read, as stored), `shoal_filedrop_duplicates_total`,
`shoal_filedrop_scans_total`, `shoal_filedrop_scan_errors_total`, and
`shoal_filedrop_pipeline_up` (1 while its loop runs and its last scan succeeded).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shoal.client import Shoal
from shoal.config import Config
from shoal.errors import ShoalError, TableNotFoundError
from shoal.locations import LocationPolicy

log = logging.getLogger("shoal.kafka")
fd_log = logging.getLogger("shoal.filedrop")


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
                binding = resolve_binding(
                    self.db.catalog, table, default_bootstrap=self.default_bootstrap,
                    locations=LocationPolicy.from_config(self.db.config))
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


@dataclass
class FileDropState:
    table: str
    files: int = 0
    rows: int = 0
    rejects: int = 0
    bytes: int = 0
    duplicates: int = 0
    scans: int = 0
    scan_errors: int = 0
    up: bool = False
    error: str | None = None


class FileDropSupervisor:
    """Runs the file-drop poll loop of every bound table (see the module docstring)."""

    def __init__(self, db: Shoal, *, rescan_s: float = 10.0, restart_delay_s: float = 5.0
                 ) -> None:
        self.db = db
        self.rescan_s = rescan_s
        self.restart_delay_s = restart_delay_s
        self.states: dict[str, FileDropState] = {}
        self._threads: list[threading.Thread] = []
        self._scanner: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        self._scanner = threading.Thread(target=self._scan_loop, name="shoal-filedrop-scan",
                                         daemon=True)
        self._scanner.start()

    def request_stop(self) -> None:
        """Ask every loop to end after its current scan (returns at once)."""
        self._stop.set()

    def stop(self, timeout_s: float = 60.0) -> None:
        """End every loop; a scan in progress finishes (and commits) first."""
        self._stop.set()
        if self._scanner is not None:
            self._scanner.join(timeout_s)   # after it, no table loop starts any more
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout_s)

    def running(self) -> list[str]:
        """Tables whose loop thread is alive."""
        with self._lock:
            return sorted(t.name.removeprefix("shoal-filedrop-") for t in self._threads
                          if t.is_alive())

    def bound_tables(self) -> list[str]:
        from shoal.frontends.filedrop.binding import is_bound

        return sorted(t.name for t in self.db.catalog.list_tables() if is_bound(t.properties))

    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            try:
                for table in self.bound_tables():
                    with self._lock:
                        if table in self.states or self._stop.is_set():
                            continue
                        self.states[table] = FileDropState(table)
                        t = threading.Thread(target=self._run_table, args=(table,),
                                             name=f"shoal-filedrop-{table}", daemon=True)
                        self._threads = [x for x in self._threads if x.is_alive()] + [t]
                        t.start()
            except Exception:  # the catalog is briefly unavailable: try again later
                fd_log.exception("scanning tables for file-drop bindings failed")
            self._stop.wait(self.rescan_s)

    def _resolve(self, table: str):  # type: ignore[no-untyped-def]
        """The table's current binding; None when unbound or the table is gone."""
        from shoal.frontends.filedrop.binding import is_bound, resolve_binding

        try:
            if not is_bound(self.db.catalog.load_table(table).properties):
                return None
        except TableNotFoundError:
            return None
        return resolve_binding(self.db.catalog, table, s3_endpoint=self.db.config.s3_endpoint,
                               locations=LocationPolicy.from_config(self.db.config))

    def _run_table(self, table: str) -> None:
        from shoal.frontends.filedrop import FileDropPipeline, ScanSummary

        state = self.states[table]
        retire = False
        try:
            while not self._stop.is_set() and not retire:
                restart = threading.Event()
                try:
                    binding = self._resolve(table)
                    if binding is None:
                        retire = True
                        break
                    pipeline = FileDropPipeline.from_client(
                        self.db, self.db.query_engine.spark, binding.source, table,
                        mode=binding.mode)
                except Exception as e:
                    state.up, state.error = False, f"{type(e).__name__}: {e}"
                    fd_log.error("file-drop pipeline of table %s cannot start: %s", table,
                                 state.error)
                    self._stop.wait(self.restart_delay_s)
                    continue

                def recheck(binding=binding, restart=restart) -> None:  # type: ignore[no-untyped-def]
                    nonlocal retire
                    try:
                        current = self._resolve(table)
                    except ShoalError:
                        current = binding   # a bad new binding: keep going, report at restart
                    if current is None:
                        retire = True
                    if current != binding:
                        restart.set()

                def on_summary(s: ScanSummary) -> None:
                    state.files += s.ingested
                    state.rows += s.rows
                    state.rejects += s.rejected
                    state.bytes += s.bytes
                    state.duplicates += s.duplicates
                    state.scans += 1
                    state.up, state.error = True, None
                    recheck()

                def on_error(e: ShoalError) -> None:
                    state.scan_errors += 1
                    state.up, state.error = False, f"{type(e).__name__}: {e}"
                    fd_log.error("file-drop scan of table %s failed: %s", table, state.error)
                    recheck()

                state.up, state.error = True, None
                try:
                    pipeline.run(interval_s=binding.interval_s, on_summary=on_summary,
                                 on_error=on_error,
                                 should_stop=lambda r=restart: self._stop.is_set() or r.is_set())
                except Exception as e:  # not a ShoalError (those are reported per scan)
                    state.up, state.error = False, f"{type(e).__name__}: {e}"
                    fd_log.error("file-drop pipeline of table %s failed: %s", table,
                                 state.error)
                    self._stop.wait(self.restart_delay_s)
        finally:
            state.up = False
            if retire:
                with self._lock:
                    self.states.pop(table, None)


class PipelineCollector(Collector):
    """Per-table metrics of one kind of pipeline, read from its supervisor's states at scrape
    time: `shoal_<kind>_<name>_total` counters and `shoal_<kind>_<name>` gauges (a gauge whose
    value is None for a table is left out for it)."""

    def __init__(self, kind: str, supervisor: Callable[[], Any],
                 counters: Sequence[tuple[str, str]],
                 gauges: Sequence[tuple[str, str, Callable[[Any], float | None]]]) -> None:
        self._kind, self._supervisor = kind, supervisor
        self._counters, self._gauges = counters, gauges

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        sup = self._supervisor()
        states = [] if sup is None else list(sup.states.values())
        for attr, doc in self._counters:
            fam = CounterMetricFamily(f"shoal_{self._kind}_{attr}", doc, labels=["table"])
            for s in states:
                fam.add_metric([s.table], getattr(s, attr))
            yield fam
        for name, doc, value in self._gauges:
            gauge = GaugeMetricFamily(f"shoal_{self._kind}_{name}", doc, labels=["table"])
            for s in states:
                v = value(s)
                if v is not None:
                    gauge.add_metric([s.table], v)
            yield gauge


def kafka_collector(supervisor: Callable[[], KafkaSupervisor | None]) -> PipelineCollector:
    return PipelineCollector("kafka", supervisor, [
        ("records", "Kafka records applied (rows + rejects)"),
        ("rows", "Rows committed from Kafka"),
        ("rejects", "Kafka records sent to the reject table"),
        ("value_bytes", "Bytes of the Kafka record values applied")], [
        ("lag", "Kafka records not yet in the catalog", lambda s: s.lag),
        ("pipeline_up", "1 while the table's pipeline runs", lambda s: 1 if s.up else 0)])


def filedrop_collector(supervisor: Callable[[], FileDropSupervisor | None]
                       ) -> PipelineCollector:
    return PipelineCollector("filedrop", supervisor, [
        ("files", "New files committed by the file-drop pipeline"),
        ("rows", "Rows committed from dropped files"),
        ("rejects", "Lines of dropped files sent to the reject table"),
        ("bytes", "Bytes of dropped files read (as stored)"),
        ("duplicates", "Dropped files identical to one already ingested"),
        ("scans", "File-drop scans completed"),
        ("scan_errors", "File-drop scans that failed")], [
        ("pipeline_up", "1 while the table's file-drop loop runs and its last scan succeeded",
         lambda s: 1 if s.up else 0)])


def install_pipelines(app: FastAPI, db: Shoal, *, config: Config, enabled: bool
                      ) -> tuple[Callable[[], None], Callable[[], None]]:
    """Wire the metrics; return (start, stop) for the lifespan."""
    app.state.kafka_pipelines = (KafkaSupervisor(db, default_bootstrap=config.kafka_bootstrap)
                                 if enabled else None)
    app.state.filedrop_pipelines = FileDropSupervisor(db) if enabled else None
    registry = app.state.shoal.metrics.registry
    registry.register(kafka_collector(lambda: app.state.kafka_pipelines))
    registry.register(filedrop_collector(lambda: app.state.filedrop_pipelines))

    def start() -> None:
        if app.state.kafka_pipelines is not None:
            app.state.kafka_pipelines.start()
        if app.state.filedrop_pipelines is not None:
            app.state.filedrop_pipelines.start()

    def stop() -> None:
        if app.state.filedrop_pipelines is not None:
            app.state.filedrop_pipelines.request_stop()   # its scans finish meanwhile
        if app.state.kafka_pipelines is not None:
            app.state.kafka_pipelines.stop()
        if app.state.filedrop_pipelines is not None:
            app.state.filedrop_pipelines.stop()

    return start, stop
