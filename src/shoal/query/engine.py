"""Running statements: DDL in shoal, everything else in Spark through the planner.

`QueryEngine(db).execute(sql)` answers one statement as an Arrow table with its pruning
stats; `.dataframe(sql)` gives the Spark DataFrame instead (Python API). The Spark session
is started once per process (`spark_session`) and stays warm: a query never pays Spark's
start-up after the first.

For a SELECT, every reference to a shoal table becomes its own temporary view over a fresh
`spark.read.format("shoal").option("scan", ...)` whose spec holds only the extents and
blocks that survived stages 1 and 2; the statement is rewritten to read those views and
handed to Spark, which applies every filter (stage 3). `EXPLAIN <select>` plans the scans
and reports them without running Spark. `prune=False` reads every extent (for checking
that pruning never changes an answer).

Bounded cost (`limits=QueryLimits(...)`, what the server passes; the Python API passes none
and keeps Spark's behaviour): the statement's Spark jobs carry a job tag on the calling
thread (PySpark pins Python threads to JVM threads, and the threads Spark starts for a
collection inherit the tag); a watchdog cancels the tag at `timeout_s` (interrupting tasks)
and keeps cancelling until the statement returns, which then raises `QueryTimeoutError`. A
cancelled job fails its caller at once, whatever its tasks still do; `CancelHandle.
wait_stopped` then waits until Spark's status tracker shows none of them running (what the
server waits for before reusing the statement's slot). `max_rows` limits the
DataFrame to `max_rows + 1` rows before collecting, so Spark never collects more; the answer
is then cut to both caps (`QueryResult.truncated` names the cap). The embedded engine's
answer is read batch by batch only as far as the caps: the statement stops at the first
batch over one. `max_result_bytes` (set by
the server before the session starts) becomes `spark.driver.maxResultSize`: a collection
beyond it fails as `ResultTooLargeError` instead of filling the driver.

Session lifecycle: `spark_session` starts the process's session once; `discard_spark_session`
kills its JVM and forgets PySpark's cached gateway, context and session, so the next call
starts a fresh one (a generation counter tells engines their cached session is gone).
`QueryEngine.restart` does both; `spark_alive` and `ping` let a supervisor (the server's)
notice a dead or wedged JVM. A statement whose Spark fails because the JVM is gone (or was
replaced meanwhile) raises `EngineUnavailableError`, not a query error.

Planning (analysis, stages 1-2, one `ScanSpec` per reference: `_scans`) is shared by both
engines; `shoal.query.routing` then picks the embedded engine (`shoal.query.local`) or
Spark for the SELECT (`engine=auto|local|spark`, default `Config.query_engine`). In `auto`,
a statement the embedded engine fails on is answered by Spark. The stats say which engine
ran and why.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from shoal.errors import (EngineUnavailableError, QueryCancelledError, QueryError,
                          QueryTimeoutError, ResultTooLargeError, ShoalError,
                          TableNotFoundError)
from shoal.config import Config
from shoal.query.cluster import SparkRole
from shoal.query.datasource import ShoalDataSource, encode_accumulator, resolve_snapshot
from shoal.query.guard import SPARK_HARDENING, classify
from shoal.query.limits import QueryLimits, cap_table, collect_capped
from shoal.query.planner import Analysis, analyze, referenced_tables
from shoal.query.routing import EngineMode, Route, choose, engine_mode, handed_off
from shoal.query.scanspec import (TIMESTAMP_NS, FooterCache, ScanSpec, ScanStats,
                                  build_scan_spec)
from shoal.query.spark_errors import spark_message as _spark_message
from shoal.lru import MISSING, Lru

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from shoal.format.base import BlockPredicate
    from shoal.query.database import Database
    from shoal.query.local import LocalEngine


log = logging.getLogger("shoal.query")

_session_lock = threading.Lock()
_generation = 0             # bumped by every discard_spark_session (under _session_lock)
_view_ids = itertools.count(1)
# A cancelled statement is cancelled again at this interval until it returns: a job that
# started just after a cancellation must not escape it.
CANCEL_REPEAT_S = 0.25
# Rows per batch read from the embedded engine: the byte cap is checked once per batch, so
# at most one batch beyond the caps is held.
LOCAL_BATCH_ROWS = 1 << 14


def spark_session(master: str = "local[*]", *, processing_log: str | None = None,
                  max_result_bytes: int | None = None, config: Config | None = None,
                  role: SparkRole = "app") -> SparkSession:
    """The process's Spark session (started on first use), with shoal's DataSource and
    functions registered. `max_result_bytes` becomes `spark.driver.maxResultSize` when this
    call starts the session (a running session keeps its own). With `config` (what every
    edge passes), the session is deployed as `shoal.query.cluster` says: its `[spark]`
    settings, refusal of what a cluster cannot use, and the executor check on a non-local
    master; `master` is then `config.spark_master`."""
    return _session(master, processing_log, max_result_bytes, config, role)[0]


def _session(master: str, processing_log: str | None, max_result_bytes: int | None,
             config: Config | None = None, role: SparkRole = "app"
             ) -> tuple[SparkSession, int]:
    from pyspark.sql import SparkSession

    from shoal.query import cluster

    with _session_lock:
        active = SparkSession.getActiveSession()
        if active is not None and getattr(active, "_shoal_ready", False):
            return active, _generation
        if config is None:
            config = Config(spark_master=master)
            probe = False
        else:
            cluster.check_deployment(config)        # before the JVM: refused in milliseconds
            probe = not cluster.is_local(config.spark_master)
        log4j = os.path.join(os.path.dirname(__file__), "log4j2.properties")
        settings = cluster.session_settings(config, role=role, log4j=log4j)
        local = cluster.is_local(config.spark_master)
        # Python workers run `spark.pyspark.python` (PySpark reads it from PYSPARK_PYTHON);
        # on a local master, by default, this interpreter (it has shoal and its dependencies).
        if "spark.pyspark.python" in settings:
            os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
        elif local:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if local:
            # One machine: nothing should listen beyond loopback. On a cluster the driver's
            # address is Spark's own choice or spark.driver.host / bindAddress.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(config.spark_master).appName(
            settings.pop("spark.app.name", "shoal serve" if role == "serve" else "shoal"))
        for key, value in settings.items():
            builder = builder.config(key, value)
        if max_result_bytes is not None:
            builder = builder.config("spark.driver.maxResultSize", f"{max_result_bytes}b")
        for key, value in SPARK_HARDENING.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        # PySpark logs every failed statement with its JVM stack; shoal reports the error.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if probe:
            try:
                cluster.probe_executors(spark, config)
            except BaseException:
                spark.stop()
                raise
        register_data_source(spark, ShoalDataSource)
        _register_functions(spark, processing_log)
        spark._shoal_ready = True  # type: ignore[attr-defined]
        return spark, _generation


def register_data_source(spark: SparkSession, source: type) -> None:
    """Register a Python data source whose planning runs on this machine: Spark runs a data
    source's planner (schema, partitions, streaming offsets) in a Python process of the
    driver, with the interpreter the source was registered with, while executors read with
    `spark.sql.execution.pyspark.python` (the shipped environment's, set by
    `shoal.query.cluster`). So the registration names this interpreter, whatever
    `spark.pyspark.python` says executors run."""
    sc = spark.sparkContext
    executors = sc.pythonExec
    sc.pythonExec = sys.executable
    try:
        spark.dataSource.register(source)
    finally:
        sc.pythonExec = executors


def spark_process() -> subprocess.Popen[bytes] | None:
    """The JVM this process launched for Spark (None before Spark starts, or when PySpark
    connected to a gateway it did not launch)."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def spark_generation() -> int:
    return _generation


def discard_spark_session(*, wait_s: float = 30.0) -> None:
    """Kill this process's Spark JVM (if it still runs) and forget PySpark's cached gateway,
    context and sessions, so that the next `spark_session` launches a fresh JVM. Engines
    holding the old session notice through the generation counter."""
    global _generation
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    with _session_lock:
        _generation += 1
        gateway = SparkContext._gateway
        context = SparkContext._active_spark_context
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()     # a wedged JVM would not stop gracefully; its workers follow it
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                log.error("the Spark JVM (pid %s) did not exit after SIGKILL", proc.pid)
        if context is not None:
            server = getattr(context, "_accumulatorServer", None)
            if server is not None:
                try:
                    server.shutdown()
                except Exception as e:  # noqa: BLE001 - best effort on a dead context
                    log.warning("could not stop the accumulator server: %s", e)
            context._jsc = None
        if gateway is not None:
            try:
                gateway.close()
            except Exception as e:  # noqa: BLE001 - the JVM end is gone already
                log.warning("could not close the Spark gateway: %s", e)
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SQLContext._instantiatedContext = None


def _register_functions(spark: SparkSession, processing_log: str | None) -> None:
    from shoal.query.functions import register_functions

    register_functions(spark, processing_log)


@dataclass
class QueryStats:
    scans: list[dict[str, Any]] = field(default_factory=list)
    engine: str | None = None               # local | spark: which engine answered
    engine_reason: str | None = None        # and why (shoal.query.routing)
    planned_bytes: int | None = None        # what stages 1-2 left, the routing's measure

    def add(self, ref_table: str, alias: str, snapshot_id: int, pushed: Any,
            stats: ScanStats) -> ScanStats:
        self.scans.append({"table": ref_table, "alias": alias, "snapshot_id": snapshot_id,
                           "pushed": None if pushed is None else repr(pushed),
                           "stats": stats})
        return stats

    def to_json(self) -> dict[str, Any]:
        total = ScanStats()
        for s in self.scans:
            for k, v in s["stats"].to_json().items():
                setattr(total, k, getattr(total, k) + v)
        doc: dict[str, Any] = total.to_json()
        if self.engine is not None:
            doc["engine"] = self.engine
            doc["engine_reason"] = self.engine_reason
            doc["planned_bytes"] = self.planned_bytes
        doc["scans"] = [{**{k: v for k, v in s.items() if k != "stats"},
                         **s["stats"].to_json()} for s in self.scans]
        return doc


@dataclass
class Planned:
    """A SELECT planned for either engine: one view name and spec per table reference."""

    sql: str
    analysis: Analysis
    views: list[str]
    specs: list[ScanSpec]
    stats: QueryStats

    @property
    def planned_bytes(self) -> int:
        return sum(spec.planned_bytes for spec in self.specs)


@dataclass
class QueryResult:
    table: pa.Table
    stats: QueryStats
    kind: str = "select"            # select | ddl | explain
    truncated: str | None = None    # the cap that cut the answer (`shoal.query.limits`)
    render: dict[str, Any] | None = None    # a KQL query's `render` hint
    translated_sql: str | None = None       # the SQL a KQL query ran as
    kinds: list[str | None] | None = None   # a KQL answer's column types (shoal kinds)


class QueryEngine:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.footers = FooterCache()
        # `spark.driver.maxResultSize` of a session this engine starts (None: Spark's own).
        self.max_result_bytes: int | None = None
        # "serve" caps the session's share of a cluster (`shoal.query.cluster`).
        self.spark_role: SparkRole = "app"
        self._spark: SparkSession | None = None
        self._generation = -1
        self._local: LocalEngine | None = None
        self._local_lock = threading.Lock()
        # (sql, scan columns) -> LocalStatement | reason; weight 1 each: bounded by count
        self._statements = Lru(512)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None or self._generation != _generation:
            self._spark, self._generation = self._start()
        return self._spark

    def _start(self) -> tuple[SparkSession, int]:
        log_path = os.path.join(self.db.config.data_dir, "processing.log")
        try:
            return _session(self.db.config.spark_master, log_path, self.max_result_bytes,
                            self.db.config, self.spark_role)
        except ShoalError:
            raise
        except Exception as e:
            raise EngineUnavailableError(f"Spark did not start: {_spark_message(e)}") from e

    @property
    def session_started(self) -> bool:
        """True once this engine has had a Spark session (a supervisor watches it then)."""
        return self._spark is not None

    def spark_alive(self) -> bool:
        """Whether the Spark JVM still runs (a cheap check of the process; no round trip)."""
        proc = spark_process()
        return proc is None or proc.poll() is None

    def ping(self) -> None:
        """A cheap round trip through the JVM and Spark's SQL front end (runs no job);
        raises when the session does not answer."""
        self.spark.sql("SELECT 1").collect()

    def warm_up(self) -> None:
        """Start Spark and run a trivial query so the first real one is fast."""
        self.ping()

    def restart(self) -> None:
        """Discard the process's Spark session (killing its JVM if it still runs) and start
        a fresh one, with shoal's DataSource and functions registered again."""
        discard_spark_session()     # bumps the generation: `spark` starts a fresh session
        self.warm_up()

    @property
    def local(self) -> LocalEngine:
        """The embedded engine (created on first use; never starts Spark)."""
        with self._local_lock:
            if self._local is None:
                from shoal.query.local import DuckDBExecutor, LocalEngine

                log = os.path.join(self.db.config.data_dir, "processing.log")
                threads = max(1, os.cpu_count() or 1)
                memory = self.db.config.local_query_memory
                executor = DuckDBExecutor(threads=threads, query_memory=memory,
                                          idle=self.db.config.query_concurrency,
                                          processing_log=log)
                self._local = LocalEngine(self.db.store, self.db.formats, executor,
                                          read_threads=threads, input_limit=memory)
            return self._local

    # ---- entry points --------------------------------------------------------------------
    def read(self, table: str, predicate: BlockPredicate | None = None, *,
             snapshot_id: int | None = None, columns: Sequence[str] | None = None,
             prune: bool = True) -> tuple[pa.Table, ScanStats]:
        """One table's pruned scan with shoal's own types (`db.read`): planned exactly as a
        `sql()` reference, with this engine's footer cache, so the stats match."""
        from shoal.query.scan import read_table

        return read_table(self.db.catalog, self.db.store, self.db.formats, table, predicate,
                          snapshot_id=snapshot_id, prune=prune, columns=columns,
                          footers=self.footers)

    def execute(self, sql: str, *, prune: bool = True, engine: str | None = None,
                limits: QueryLimits | None = None,
                cancel: CancelHandle | None = None) -> QueryResult:
        """Answer one statement: shoal's DDL, `EXPLAIN <select>` or a SELECT; anything
        else is refused by `shoal.query.guard` before an engine sees it. `engine`:
        auto | local | spark (None = the configured `query_engine`). `limits` bound the
        work and the answer (see the module docstring). `cancel` lets another thread
        interrupt the statement (`CancelHandle.cancel()`: a client that went away)."""
        from shoal.query.ddl import execute_ddl, parse_ddl

        statement = classify(sql)
        if statement.kind in ("ddl", "admin_ddl"):
            ddl = parse_ddl(sql)
            assert ddl is not None
            return QueryResult(execute_ddl(ddl, self.db), QueryStats(), kind="ddl")
        limits = limits or QueryLimits()
        mode = engine_mode(engine, self.db.config.query_engine)
        with _Run(limits.timeout_s, cancellable=cancel is not None) as run:
            if cancel is not None:
                cancel.bind(run)
            if statement.kind == "explain":
                return self._explain(statement.body, prune=prune, mode=mode, run=run)
            planned = self._scans(sql, prune=prune)
            route = self._route(planned, mode)
            if route.engine == "local":
                from shoal.query.local import LocalExecutionError

                try:
                    return self._run_local(planned, route, run, limits)
                except LocalExecutionError as e:
                    run.check()             # interrupted at the deadline: a timeout
                    if mode == "local":
                        raise
                    log.info("local engine handed a statement to Spark: %s", e)
                    route = handed_off(route, e)
                    planned = self._scans(sql, prune=prune)
            df, stats, done = self._plan(sql, prune=prune, planned=planned, run=run)
            stats.engine, stats.engine_reason = route.engine, route.reason
            try:
                table, truncated = self._collect(df, limits, run)
            finally:
                done()
        return QueryResult(table, stats, truncated=truncated)

    def execute_kql(self, kql: str, *, prune: bool = True, engine: str | None = None,
                    limits: QueryLimits | None = None, now_ns: int | None = None,
                    cancel: CancelHandle | None = None) -> QueryResult:
        """A KQL query (`shoal.query.kql`): translated to Spark SQL against the catalog's
        tables, then run exactly as `execute` runs that SQL (guard, pruning, engines,
        limits, stats). The result carries the SQL and the query's `render` hint."""
        translation = self.translate_kql(kql, now_ns=now_ns)
        result = self.execute(translation.sql, prune=prune, engine=engine, limits=limits,
                              cancel=cancel)
        result.render = translation.render
        result.translated_sql = translation.sql
        result.kinds = [c.kind for c in translation.columns]
        return result

    def translate_kql(self, kql: str, *, now_ns: int | None = None):
        """The `shoal.query.kql.Translation` of a KQL query over this catalog's tables."""
        from shoal.query.kql import kql_to_sql

        tables = {t.name: {c.name: c.type.kind for c in t.schema.columns}
                  for t in self.db.catalog.list_tables()}
        return kql_to_sql(kql, tables, now_ns_utc=now_ns)

    def dataframe(self, sql: str, *, prune: bool = True) -> tuple[DataFrame, QueryStats]:
        """A Spark DataFrame for a SELECT (its scans are planned now; bytes_read of the
        stats fills in as the DataFrame runs)."""
        df, stats, _ = self._plan(sql, prune=prune, keep_accumulator=True)
        return df, stats

    # ---- planning ------------------------------------------------------------------------
    def _scans(self, sql: str, *, prune: bool) -> Planned:
        """Analysis and stages 1-2 for every table reference: what either engine reads."""
        catalog = self.db.catalog
        known = {t.name: t for t in catalog.list_tables()}
        analysis = analyze(sql, {name: {c.name: c.type for c in info.schema.columns}
                                 for name, info in known.items()})
        self._check_tables(analysis)
        stats = QueryStats()
        views: list[str] = []
        specs: list[ScanSpec] = []
        for ref in analysis.refs:
            snapshot_id = resolve_snapshot(catalog, ref.table, ref.version, ref.timestamp)
            spec, scan_stats = build_scan_spec(
                catalog, self.db.store, self.db.formats, self.footers, ref.table,
                predicate=ref.predicate, columns=ref.columns, snapshot_id=snapshot_id,
                storage_url=self.db.config.resolved_storage_url,
                s3_endpoint=self.db.config.s3_endpoint, parallelism=1, prune=prune)
            stats.add(ref.table, ref.alias, spec.snapshot_id, ref.predicate, scan_stats)
            specs.append(spec)
            views.append(f"__shoal_scan_{next(_view_ids)}")
        stats.planned_bytes = sum(spec.planned_bytes for spec in specs)
        return Planned(sql, analysis, views, specs, stats)

    def _route(self, planned: Planned, mode: EngineMode) -> Route:
        from shoal.query.transpile import NotLocal, spark_sql_type, to_local

        def vet():
            # The embedded engine's views are per query, so their names are stable and the
            # transpiled statement is cached by the statement and its scans' columns.
            views = _local_views(len(planned.specs))
            types = {}
            for view, spec in zip(views, planned.specs, strict=True):
                schema = spec.read_schema()
                types[view] = {c: "BIGINT" if c == TIMESTAMP_NS
                               else spark_sql_type(schema.column(c).type.kind)
                               for c in spec.columns}
            key = (planned.sql, repr(types))
            cached = self._statements.get(key)
            if cached is MISSING:
                try:
                    cached = to_local(planned.analysis.tree_for(views), types, planned.sql)
                except NotLocal as e:
                    cached = e.reason
                self._statements.put(key, cached, 1)
            if isinstance(cached, str):
                raise NotLocal(cached)
            return cached

        return choose(mode, planned_bytes=planned.planned_bytes,
                      budget=self.db.config.local_query_max_bytes, vet=vet)

    def _run_local(self, planned: Planned, route: Route, run: _Run,
                   limits: QueryLimits) -> QueryResult:
        """The embedded engine's answer, read from it batch by batch only as far as the
        caps (the statement stops at the first batch over one)."""
        from shoal.query.local import answer_schema

        assert route.statement is not None
        local = self.local
        inputs = read_local_inputs(local, planned)
        run.check()
        batches = local.stream(route.statement, inputs, on_cancel=run.on_cancel,
                               batch_rows=LOCAL_BATCH_ROWS)
        table, truncated = collect_capped(batches, answer_schema(route.statement),
                                          max_rows=limits.max_rows,
                                          max_bytes=limits.max_bytes)
        planned.stats.engine, planned.stats.engine_reason = route.engine, route.reason
        return QueryResult(table, planned.stats, truncated=truncated)

    def _plan(self, sql: str, *, prune: bool, keep_accumulator: bool = False,
              planned: Planned | None = None, run: _Run | None = None):
        planned = planned or self._scans(sql, prune=prune)
        spark = self.spark
        run = run or _Run(None)
        run.attach(spark, self._generation)
        stats = planned.stats
        views: list[str] = []
        accumulators: list[tuple[Any, ScanStats]] = []
        try:
            parallelism = max(2, spark.sparkContext.defaultParallelism * 2)
            for view, spec, scan in zip(planned.views, planned.specs, stats.scans,
                                        strict=True):
                acc = spark.sparkContext.accumulator(0)
                accumulators.append((acc, scan["stats"]))
                (spark.read.format("shoal")
                 .option("scan", spec.repartitioned(parallelism).to_json())
                 .option("bytes_accumulator", encode_accumulator(acc)).load()
                 .createOrReplaceTempView(view))
                views.append(view)
            df = spark.sql(planned.analysis.sql_for(views))
        except ShoalError:
            self._drop(views)
            raise
        except Exception as e:      # Spark's analysis errors: the user's statement is wrong
            self._drop(views)
            raise run.failure(e) from e
        planned_bytes = [s.bytes_read for _, s in accumulators]

        def done() -> None:
            for (acc, s), base in zip(accumulators, planned_bytes, strict=True):
                s.bytes_read = base + int(acc.value)
            self._drop(views)

        if keep_accumulator:
            self._drop(views)
        return df, stats, done

    def _check_tables(self, analysis: Analysis) -> None:
        ctes = {c.alias_or_name.lower() for c in analysis.tree.find_all(exp.CTE)}
        found = {r.table for r in analysis.refs}
        for name in referenced_tables(analysis.tree) - found - ctes:
            raise TableNotFoundError(name)      # queries see shoal tables and CTEs only

    def _explain(self, sql: str, *, prune: bool, mode: EngineMode = "spark",
                 run: _Run | None = None) -> QueryResult:
        planned = self._scans(sql, prune=prune)
        route = self._route(planned, mode)
        if route.engine == "spark":         # Spark's analysis checks the statement
            _, _, done = self._plan(sql, prune=prune, planned=planned, run=run)
            done()
        stats = planned.stats
        stats.engine, stats.engine_reason = route.engine, route.reason
        rows = [{"table": s["table"], "alias": s["alias"], "snapshot_id": s["snapshot_id"],
                 "pushed": s["pushed"], **s["stats"].to_json(), "engine": route.engine,
                 "engine_reason": route.reason} for s in stats.scans]
        return QueryResult(pa.Table.from_pylist(rows) if rows else pa.table({}), stats,
                           kind="explain")

    def _drop(self, views: list[str]) -> None:
        if self._spark is None or not views:
            return
        try:
            for v in views:
                self._spark.catalog.dropTempView(v)
        except Exception as e:  # noqa: BLE001 - a dead session takes its views with it
            log.warning("could not drop temporary views %s: %s", views, _spark_message(e))

    def _collect(self, df: DataFrame, limits: QueryLimits, run: _Run
                 ) -> tuple[pa.Table, str | None]:
        try:
            if limits.max_rows is not None:
                df = df.limit(limits.max_rows + 1)    # Spark never collects more than that
            run.check()
            table = df.toArrow()
        except ShoalError:
            raise
        except Exception as e:
            raise run.failure(e) from e
        return cap_table(table, max_rows=limits.max_rows, max_bytes=limits.max_bytes)


class CancelHandle:
    """Cancels, from another thread, the statement `QueryEngine.execute(cancel=...)` runs
    (a `/v1/query` client that went away): its Spark jobs or embedded run are interrupted and
    it fails with `QueryCancelledError`. A cancel before the statement starts cancels it as it
    starts; one after it ended does nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._cancelled = False

    def bind(self, run: _Run) -> None:
        with self._lock:
            self._run = run
            late = self._cancelled
        if late:
            run.cancel()

    def cancel(self) -> bool:
        """Interrupt the statement; False when it had already finished."""
        with self._lock:
            self._cancelled = True
            run = self._run
        return True if run is None else run.cancel()

    def wait_stopped(self, guard_s: float) -> bool:
        """After the statement returned: wait until none of its Spark tasks still runs
        (`_Run.wait_stopped`). True at once when it never reached Spark."""
        with self._lock:
            run = self._run
        return True if run is None else run.wait_stopped(guard_s)

    def stopped(self) -> bool:
        """Whether none of the statement's Spark tasks runs now (no waiting)."""
        with self._lock:
            run = self._run
        return True if run is None else run.stopped()


class _Run:
    """One statement's Spark work on the calling thread: the watchdog that cancels it at the
    deadline (counted from the start, planning included), its job tag (added once the
    statement reaches Spark), and what tells a dead engine from a bad statement.

    `cancellable=True` (a streamed statement, `shoal.query.stream`) tags its Spark jobs even
    without a deadline, so that `cancel()` (from any thread: a client's cancel request) can
    interrupt it the way the deadline does; the statement then fails with
    `QueryCancelledError`."""

    def __init__(self, timeout_s: float | None, *, cancellable: bool = False) -> None:
        self.timeout_s = timeout_s
        self.cancellable = cancellable
        self.cancelled = threading.Event()
        self._detached = False
        self.tag = f"shoal-query-{uuid.uuid4().hex}"
        self.spark: SparkSession | None = None
        self.generation: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.timed_out = threading.Event()
        self._finished = threading.Event()
        self._cancels: list[Callable[[], None]] = []
        self._cancel_lock = threading.Lock()

    def __enter__(self) -> _Run:
        if self.timeout_s is not None:
            threading.Thread(target=self._watch, name=f"shoal-deadline-{self.tag[-8:]}",
                             daemon=True).start()
        return self

    def attach(self, spark: SparkSession, generation: int) -> None:
        """The statement reaches Spark: tag the jobs this thread starts from now on."""
        self.spark, self.generation, self.proc = spark, generation, spark_process()
        if not self._tagged:
            return
        try:
            sc = spark.sparkContext
            sc.addJobTag(self.tag)
            sc.setInterruptOnCancel(True)
        except Exception as e:
            raise self.failure(e) from e

    @property
    def _tagged(self) -> bool:
        return self.timeout_s is not None or self.cancellable

    def __exit__(self, *_exc: object) -> None:
        self._finished.set()
        self.detach()

    def detach(self) -> None:
        """Take the job tag off the calling thread (the one `attach` tagged): done before
        the statement leaves that thread, e.g. a streamed answer collected from Spark and
        then sent from whichever thread the client's reads run on."""
        if not self._tagged or self.spark is None or self._detached:
            return
        self._detached = True
        try:
            sc = self.spark.sparkContext
            sc.removeJobTag(self.tag)       # the thread is reused for other statements
            sc.setInterruptOnCancel(False)
        except Exception as e:  # noqa: BLE001 - the engine may be gone; nothing to untag
            log.debug("could not clear job tag %s: %s", self.tag, _spark_message(e))

    def on_cancel(self, cancel: Callable[[], None]) -> None:
        """Call `cancel` at the deadline (at once if it has passed): how the embedded
        engine's run is interrupted."""
        with self._cancel_lock:
            self._cancels.append(cancel)
            late = self.timed_out.is_set() or self.cancelled.is_set()
        if late:
            cancel()

    def cancel(self) -> bool:
        """Interrupt the statement now, from any thread: the embedded engine's run and the
        statement's Spark jobs (again and again until it returns, as at the deadline).
        False when it had already finished or been cancelled."""
        with self._cancel_lock:
            if self._finished.is_set() or self.cancelled.is_set():
                return False
            self.cancelled.set()
            cancels = list(self._cancels)
        self._interrupt(cancels)
        log.info("query %s was cancelled by its client", self.tag)
        threading.Thread(target=self._keep_cancelling, name=f"shoal-cancel-{self.tag[-8:]}",
                         daemon=True).start()
        return True

    def _interrupt(self, cancels: list[Callable[[], None]]) -> None:
        for cancel in cancels:
            try:
                cancel()
            except Exception as e:  # noqa: BLE001 - the run may have just ended
                log.warning("could not interrupt query %s: %s", self.tag, e)

    def _watch(self) -> None:
        assert self.timeout_s is not None
        if self._finished.wait(self.timeout_s):
            return
        with self._cancel_lock:
            self.timed_out.set()
            cancels = list(self._cancels)
        self._interrupt(cancels)
        log.info("query %s passed its %gs limit; cancelling its Spark jobs", self.tag,
                 self.timeout_s)
        self._keep_cancelling()

    def _keep_cancelling(self) -> None:
        """Interrupt the statement until it returns: its tagged Spark jobs, and the embedded
        engine again (an interrupt that lands just before the engine starts its run is
        lost)."""
        again = False           # the caller has just interrupted the embedded engine once
        while True:
            if again:
                with self._cancel_lock:
                    cancels = list(self._cancels)
                self._interrupt(cancels)
            again = True
            spark = self.spark
            if spark is not None:
                try:
                    spark.sparkContext.cancelJobsWithTag(self.tag)
                except Exception as e:  # noqa: BLE001 - a dead engine fails the query anyway
                    log.warning("could not cancel query %s: %s", self.tag, _spark_message(e))
                    return
            if self._finished.wait(CANCEL_REPEAT_S):
                return

    def spark_tasks_running(self) -> int:
        """Tasks of this statement's Spark jobs still running, by Spark's status tracker (a
        job still running counts one at least). A cancelled job fails at once, but a task
        that never checks for interruption (a JVM loop such as Java's regex matching) runs on
        until it ends by itself: this counts it. 0 when the statement never reached Spark or
        its jobs were not tagged."""
        if not self._tagged or self.spark is None:
            return 0
        tracker = self.spark.sparkContext._jsc.sc().statusTracker()
        running = 0
        for job in tracker.getJobIdsForTag(self.tag):
            info = tracker.getJobInfo(job)
            if info.isEmpty():          # forgotten by the status store: long finished
                continue
            tasks = 0
            for stage in info.get().stageIds():
                stage_info = tracker.getStageInfo(stage)
                if not stage_info.isEmpty():
                    tasks += stage_info.get().numActiveTasks()
            if str(info.get().status()) == "RUNNING":
                tasks = max(tasks, 1)
            running += tasks
        return running

    def stopped(self) -> bool:
        """Whether no task of this statement's Spark jobs runs now (True if the engine does
        not answer: a dead JVM runs nothing)."""
        try:
            return self.spark_tasks_running() == 0
        except Exception as e:  # noqa: BLE001 - a dead JVM runs nothing
            log.info("query %s: Spark's status tracker did not answer (%s); its tasks are "
                     "taken as stopped", self.tag, _spark_message(e))
            return True

    def wait_stopped(self, guard_s: float, *, poll_s: float = 0.1) -> bool:
        """Wait until no task of this statement's Spark jobs runs (the statement itself has
        returned). False, with a log line, if Spark still shows one after `guard_s`; True at
        once if the engine is gone (its tasks went with it)."""
        end = time.monotonic() + guard_s
        while not self.stopped():
            if time.monotonic() >= end:
                log.error("query %s: Spark task(s) still running %gs after the statement "
                          "ended; its slot is freed anyway", self.tag, guard_s)
                return False
            time.sleep(poll_s)
        return True

    def check(self) -> None:
        """Raise if the deadline passed or the statement was cancelled (before starting a
        job that nothing would cancel)."""
        if self.cancelled.is_set():
            raise QueryCancelledError()
        if self.timed_out.is_set():
            assert self.timeout_s is not None
            raise QueryTimeoutError(self.timeout_s)

    def failure(self, e: BaseException) -> ShoalError:
        """The shoal error for an exception out of Spark during this statement."""
        if self.cancelled.is_set():
            return QueryCancelledError()
        if self.timed_out.is_set():
            assert self.timeout_s is not None
            return QueryTimeoutError(self.timeout_s)
        gone = _engine_gone(e)
        if self.proc is not None and self.proc.poll() is not None:
            gone = f"the Spark JVM exited (status {self.proc.returncode})"
        elif self.generation is not None and self.generation != _generation:
            gone = "the Spark session was restarted during the query"
        if gone:
            return EngineUnavailableError(gone)
        text = str(e)
        match = _MAX_RESULT.search(text)
        if match:
            return ResultTooLargeError(match.group(1))
        return QueryError(_spark_message(e))


_MAX_RESULT = re.compile(r"bigger than spark\.driver\.maxResultSize \(([^)]*)\)")
_BARE_PY4J_ERROR = re.compile(r"An error occurred while calling [\w$.:]+")
_DEAD_CONTEXT = ("SparkContext was shut down", "stopped SparkContext",
                 "SparkContext has been shutdown")


def _engine_gone(e: BaseException) -> str | None:
    """Why `e` says the engine itself is gone (not the statement wrong), or None."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

    if isinstance(e, (Py4JNetworkError, ConnectionError, EOFError)):
        return f"lost the connection to Spark ({type(e).__name__})"
    text = str(e)
    if (isinstance(e, Py4JError) and not isinstance(e, Py4JJavaError)
            and _BARE_PY4J_ERROR.fullmatch(text.strip())):
        # py4j's GatewayClient turns a network failure it will not retry into a bare error
        # answer: "An error occurred while calling o287.load", with neither a Java exception
        # nor a trace. The JVM may still be tearing down (not yet reaped), so `proc.poll()`
        # cannot be relied on to say so.
        return "lost the connection to Spark (no answer from the JVM)"
    if any(marker in text for marker in _DEAD_CONTEXT):
        return "the Spark context was shut down"
    return None


def read_local_inputs(local: LocalEngine, planned: Planned) -> dict[str, pa.Table]:
    """The planned scans read for the embedded engine, by view name; each scan's stats
    count the bytes it read."""
    counters = []
    for scan in planned.stats.scans:
        def count(n: int, s: ScanStats = scan["stats"]) -> None:
            s.bytes_read += n
        counters.append(count)
    return local.read_inputs(_local_views(len(planned.specs)), planned.specs, counters)


def _local_views(n: int) -> list[str]:
    return [f"__shoal_local_{i}" for i in range(n)]
