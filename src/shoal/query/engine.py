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

Session lifecycle (`shoal.query.spark.session`): `spark_session` starts the process's
session once; `discard_spark_session` kills its JVM and forgets PySpark's cached gateway,
context and session, so the next call starts a fresh one (a generation counter tells
engines their cached session is gone).
`QueryEngine.restart` does both; `spark_alive` and `ping` let a supervisor (the server's)
notice a dead or wedged JVM. A statement whose Spark fails because the JVM is gone (or was
replaced meanwhile) raises `EngineUnavailableError`, not a query error.

Planning (analysis, stages 1-2, one `ScanSpec` per reference: `_scans`) is shared by both
engines; `shoal.query.routing` then picks the embedded engine
(`shoal.query.embedded.local_engine`) or Spark for the SELECT (`engine=auto|local|spark`,
default `Config.query_engine`). In `auto`, a statement the embedded engine fails on is
answered by Spark. The stats say which engine ran and why.

Where the parts live: the session's start, discard and generation in
`shoal.query.spark.session`; a statement's deadline, cancel and Spark failure mapping in
`shoal.query.cancel`; the embedded engine in `shoal.query.embedded`; planning of one scan in
`shoal.query.scan_plan`, the SQL analysis in `shoal.query.planner`, the engine choice in
`shoal.query.routing`. This module plans, routes and runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from shoal.errors import EngineUnavailableError, ShoalError, TableNotFoundError
from shoal.query.cancel import CancelHandle, _Run
from shoal.query.guard import classify
from shoal.query.limits import QueryLimits, cap_table, collect_capped
from shoal.query.planner import Analysis, analyze, referenced_tables
from shoal.query.routing import Cluster, EngineMode, Route, choose, engine_mode, handed_off
from shoal.query.scan_plan import (TIMESTAMP_NS, FooterCache, ScanSpec, ScanStats,
                                   build_scan_spec, resolve_snapshot)
from shoal.query.spark import session
from shoal.query.spark.cluster import SparkRole
from shoal.query.spark.failures import spark_message as _spark_message
from shoal.query.spark.session import discard_spark_session, spark_generation, spark_process
from shoal.lru import MISSING, Lru

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from shoal.format.base import BlockPredicate
    from shoal.query.database import Database
    from shoal.query.ddl import DeleteRows, TruncateTable
    from shoal.query.delete import DeleteReport
    from shoal.query.embedded.local_engine import LocalEngine
    from shoal.query.embedded.transpile import LocalStatement
    from shoal.query.foreign_scan import ForeignScan


log = logging.getLogger("shoal.query")

_view_ids = itertools.count(1)
# Rows per batch read from the embedded engine: the byte cap is checked once per batch, so
# at most one batch beyond the caps is held.
LOCAL_BATCH_ROWS = 1 << 14


@dataclass
class QueryStats:
    scans: list[dict[str, Any]] = field(default_factory=list)
    engine: str | None = None               # local | spark: which engine answered
    engine_reason: str | None = None        # and why (shoal.query.routing)
    planned_bytes: int | None = None        # what stages 1-2 left (whole blocks)
    projected_bytes: int | None = None      # their projected columns: the routing's measure

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
            doc["projected_bytes"] = self.projected_bytes
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
    prune: bool = True
    # foreign table references by index (`shoal.query.foreign_scan`): their specs plan
    # no extents; the source is read once, when an engine first needs the rows
    foreign: dict[int, ForeignScan] = field(default_factory=dict)
    foreign_timeout_s: float | None = None

    def foreign_table(self, i: int) -> pa.Table:
        """Reference i's answer from its source (read on first use), counted in its stats."""
        scan = self.foreign[i]
        table = scan.read(self.foreign_timeout_s)
        self.stats.scans[i]["source_rows"] = scan.rows_fetched
        return table

    @property
    def planned_bytes(self) -> int:
        return sum(spec.planned_bytes for spec in self.specs)

    @property
    def projected_bytes(self) -> int:
        return sum(spec.projected_bytes for spec in self.specs)


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
        # "serve" caps the session's share of a cluster (`shoal.query.spark.cluster`).
        self.spark_role: SparkRole = "app"
        # A file the Spark JVM this engine starts logs to instead of stderr (None: stderr);
        # a one-shot CLI command sets it, as it prints the error itself.
        self.spark_jvm_log: str | None = None
        self._spark: SparkSession | None = None
        self._generation = -1
        self._local: LocalEngine | None = None
        self._local_lock = threading.Lock()
        # (sql, scan columns) -> LocalStatement | reason; weight 1 each: bounded by count
        self._statements = Lru(512)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None or self._generation != spark_generation():
            self._spark, self._generation = self._start()
        return self._spark

    def _start(self) -> tuple[SparkSession, int]:
        log_path = os.path.join(self.db.config.data_dir, "processing.log")
        try:
            return session._session(self.db.config.spark_master, log_path,
                                    self.max_result_bytes, self.db.config, self.spark_role,
                                    jvm_log=self.spark_jvm_log)
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
                from shoal.query.embedded.local_engine import DuckDBExecutor, LocalEngine

                config = self.db.config
                log = os.path.join(config.data_dir, "processing.log")
                threads = max(1, os.cpu_count() or 1)
                executor = DuckDBExecutor(threads=threads, query_memory=config.local_query_memory,
                                          idle=config.query_concurrency,
                                          processing_log=log,
                                          spill_dir=os.path.join(config.data_dir, "scratch")
                                          if config.local_query_spill_bytes > 0 else None,
                                          spill_bytes=config.local_query_spill_bytes)
                self._local = LocalEngine(self.db.store, self.db.formats, executor,
                                          read_threads=threads)
            return self._local

    def close(self) -> None:
        """Close the embedded engine's idle databases (removing their spill directories);
        the Spark session is the process's and stays."""
        with self._local_lock:
            local, self._local = self._local, None
        if local is not None:
            local.executor.close()

    # ---- entry points --------------------------------------------------------------------
    def read(self, table: str, predicate: BlockPredicate | None = None, *,
             snapshot_id: int | None = None, columns: Sequence[str] | None = None,
             prune: bool = True) -> tuple[pa.Table, ScanStats]:
        """One table's pruned scan with shoal's own types (`db.read`): planned exactly as a
        `sql()` reference, with this engine's footer cache, so the stats match."""
        from shoal.query.scan_read import read_table

        return read_table(self.db.catalog, self.db.store, self.db.formats, table, predicate,
                          snapshot_id=snapshot_id, prune=prune, columns=columns,
                          footers=self.footers)

    def execute(self, sql: str, *, prune: bool = True, engine: str | None = None,
                limits: QueryLimits | None = None,
                cancel: CancelHandle | None = None, now_ns: int | None = None) -> QueryResult:
        """Answer one statement: shoal's DDL, `EXPLAIN <select>` or a SELECT; anything
        else is refused by `shoal.query.guard` before an engine sees it. `engine`:
        auto | local | spark (None = the configured `query_engine`). `limits` bound the
        work and the answer (see the module docstring). `cancel` lets another thread
        interrupt the statement (`CancelHandle.cancel()`: a client that went away).
        `now_ns` is the statement's `current_timestamp()` (default: when it starts)."""
        from shoal.query.ddl import DeleteRows, TruncateTable, execute_ddl, parse_ddl

        statement = classify(sql)
        if statement.kind in ("ddl", "admin_ddl"):
            ddl = parse_ddl(sql)
            assert ddl is not None
            if isinstance(ddl, (DeleteRows, TruncateTable)):
                return QueryResult(self.run_delete(ddl).to_table(), QueryStats(), kind="ddl")
            return QueryResult(execute_ddl(ddl, self.db), QueryStats(), kind="ddl")
        from shoal.query.embedded.functions.time import pin_statement_time

        limits = limits or QueryLimits()
        mode = engine_mode(engine, self.db.config.query_engine)
        # current_timestamp() and the like: one instant for the statement, whichever engine
        # answers it (and again after a hand-off to Spark).
        now_us = (time.time_ns() if now_ns is None else now_ns) // 1_000
        with _Run(limits.timeout_s, cancellable=cancel is not None) as run:
            if cancel is not None:
                cancel.bind(run)
            if statement.kind == "explain":
                return self._explain(pin_statement_time(statement.body, now_us), prune=prune,
                                     mode=mode, run=run)
            sql = pin_statement_time(sql, now_us)
            planned = self._scans(sql, prune=prune, timeout_s=limits.timeout_s)
            route = self._route(planned, mode)
            if route.engine == "local":
                from shoal.query.embedded.local_engine import LocalExecutionError

                try:
                    return self._run_local(planned, route, run, limits)
                except LocalExecutionError as e:
                    run.check()             # interrupted at the deadline: a timeout
                    if mode == "local":
                        raise
                    log.info("local engine handed a statement to Spark: %s", e)
                    route = handed_off(route, e)
                    planned = self._scans(sql, prune=prune, timeout_s=limits.timeout_s,
                                          foreign=planned.foreign)
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
        """A KQL query (`shoal.frontends.kusto.kql`, the "kql" of `shoal.languages`):
        translated to Spark SQL against the catalog's tables, then run exactly as `execute`
        runs that SQL (guard, pruning, engines, limits, stats). The result carries the SQL
        and the query's `render` hint."""
        translation = self.translate_kql(kql, now_ns=now_ns)
        result = self.execute(translation.sql, prune=prune, engine=engine, limits=limits,
                              cancel=cancel, now_ns=now_ns)
        result.render = translation.render
        result.translated_sql = translation.sql
        result.kinds = [c.kind for c in translation.columns]
        return result

    def translate_kql(self, kql: str, *, now_ns: int | None = None):
        """The `shoal.frontends.kusto.kql.Translation` of a KQL query over this catalog's
        tables."""
        from shoal.languages import language

        tables = {t.name: {c.name: c.type.kind for c in t.schema.columns}
                  for t in self.db.catalog.list_tables()}
        return language("kql").kql_to_sql(kql, tables, now_ns_utc=now_ns)

    def dataframe(self, sql: str, *, prune: bool = True) -> tuple[DataFrame, QueryStats]:
        """A Spark DataFrame for a SELECT (its scans are planned now; bytes_read of the
        stats fills in as the DataFrame runs)."""
        df, stats, _ = self._plan(sql, prune=prune, keep_accumulator=True)
        return df, stats

    def run_delete(self, stmt: DeleteRows | TruncateTable, *,
               on_stage: Callable[..., None] | None = None) -> DeleteReport:
        """A DELETE or TRUNCATE (`shoal.query.delete`): rows matched by the embedded engine
        in process, or by Spark tasks when the extents to read exceed its budget."""
        from shoal.query.delete import SparkTasks, execute_delete
        from shoal.query.federation.create import refuse_write

        refuse_write(self.db, stmt.name, "deleted from")
        return execute_delete(stmt, self.db, footers=self.footers,
                              executor=self.local.executor,
                              spark_runner=lambda: SparkTasks(self.spark), on_stage=on_stage)

    # ---- planning ------------------------------------------------------------------------
    def _scans(self, sql: str, *, prune: bool, timeout_s: float | None = None,
               foreign: dict[int, ForeignScan] | None = None) -> Planned:
        """Analysis and stages 1-2 for every table reference: what either engine reads.
        A foreign table's reference plans the SELECT its source answers (`foreign`: the
        scans an earlier planning of the same statement made, whose answers it reuses)."""
        from shoal.query.foreign_scan import plan_foreign_scan
        from shoal.query.federation.source import is_foreign

        catalog = self.db.catalog
        known = {t.name: t for t in catalog.list_tables()}
        analysis = analyze(sql, {name: {c.name: c.type for c in info.schema.columns}
                                 for name, info in known.items()})
        self._check_tables(analysis)
        stats = QueryStats()
        views: list[str] = []
        specs: list[ScanSpec] = []
        timeout_s = self.db.config.query_timeout_s if timeout_s is None else timeout_s
        scans: dict[int, ForeignScan] = {}
        for i, ref in enumerate(analysis.refs):
            info = known[ref.table]
            if is_foreign(info.properties):
                scan = (foreign or {}).get(i) or plan_foreign_scan(
                    info, ref, self.db.config, timeout_s=timeout_s)
                scans[i] = scan
                spec = ScanSpec(ref.table, info.current_snapshot_id or 0,
                                self.db.config.resolved_storage_url,
                                self.db.config.s3_endpoint, info.schema.to_json(),
                                list(ref.columns))
                stats.add(ref.table, ref.alias, spec.snapshot_id, None, ScanStats())
                stats.scans[-1].update(pushed=scan.sql, source=scan.source.masked)
                specs.append(spec)
                views.append(f"__shoal_scan_{next(_view_ids)}")
                continue
            snapshot_id = resolve_snapshot(catalog, ref.table, ref.version, ref.timestamp)
            spec, scan_stats = build_scan_spec(
                catalog, self.db.store, self.db.formats, self.footers, ref.table,
                predicate=ref.predicate, columns=ref.columns, snapshot_id=snapshot_id,
                storage_url=self.db.config.resolved_storage_url,
                s3_endpoint=self.db.config.s3_endpoint, parallelism=1, prune=prune)
            stats.add(ref.table, ref.alias, spec.snapshot_id, ref.predicate, scan_stats)
            specs.append(spec)
            views.append(f"__shoal_scan_{next(_view_ids)}")
        planned = Planned(sql, analysis, views, specs, stats, prune, scans, timeout_s)
        stats.planned_bytes, stats.projected_bytes = (planned.planned_bytes,
                                                      planned.projected_bytes)
        return planned

    def _route(self, planned: Planned, mode: EngineMode) -> Route:
        from shoal.query.embedded.transpile import NotLocal, spark_sql_type, to_local

        def vet():
            # The embedded engine's views are per query, so their names are stable and the
            # transpiled statement is cached by the statement and its scans' columns.
            views = _local_views(len(planned.specs))
            types = {}
            dynamic = {}
            for view, spec in zip(views, planned.specs, strict=True):
                schema = spec.read_schema()
                types[view] = {c: "BIGINT" if c == TIMESTAMP_NS
                               else spark_sql_type(schema.column(c).type.kind)
                               for c in spec.columns}
                dynamic[view] = sorted(c for c in spec.columns if c != TIMESTAMP_NS
                                       and schema.column(c).type.kind == "dynamic")
            key = (planned.sql, repr(types), repr(dynamic))
            cached = self._statements.get(key)
            if cached is MISSING:
                try:
                    cached = to_local(planned.analysis.tree_for(views), types, planned.sql,
                                      dynamic)
                except NotLocal as e:
                    cached = e.reason
                self._statements.put(key, cached, 1)
            if isinstance(cached, str):
                raise NotLocal(cached)
            return cached

        return choose(mode, projected_bytes=planned.projected_bytes,
                      max_bytes=self.db.config.local_scan_max_bytes, vet=vet,
                      cluster=self._cluster())

    def _cluster(self) -> Cluster | None:
        """The configured Spark master when it is a cluster (for the engine choice); its
        cores from the running session when there is one, else from its settings."""
        from shoal.query.spark.cluster import cluster_cores, is_local

        master = self.db.config.spark_master
        if is_local(master):
            return None
        cores: int | None
        if self._spark is not None and self._generation == spark_generation():
            cores = self._spark.sparkContext.defaultParallelism
        else:
            cores = cluster_cores(self.db.config, role=self.spark_role)
        return Cluster(master, cores, os.cpu_count() or 1)

    def _run_local(self, planned: Planned, route: Route, run: _Run,
                   limits: QueryLimits) -> QueryResult:
        """The embedded engine's answer, read from it batch by batch only as far as the
        caps (the statement stops at the first batch over one)."""
        from shoal.query.embedded.local_engine import answer_schema

        assert route.statement is not None
        local = self.local
        inputs = read_local_inputs(local, planned, route.statement)
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
        from shoal.query.spark.datasource import encode_accumulator

        planned = planned or self._scans(sql, prune=prune)
        spark = self.spark
        run = run or _Run(None)
        run.attach(spark, self._generation)
        stats = planned.stats
        views: list[str] = []
        accumulators: list[tuple[Any, ScanStats]] = []
        try:
            parallelism = max(2, spark.sparkContext.defaultParallelism * 2)
            for i, (view, spec, scan) in enumerate(zip(planned.views, planned.specs,
                                                       stats.scans, strict=True)):
                if i in planned.foreign:
                    # the driver's answer from the source, as a local relation
                    from shoal.query.spark.datasource import spark_schema

                    spark.createDataFrame(planned.foreign_table(i), schema=spark_schema(
                        spec.read_schema(), spec.columns)).createOrReplaceTempView(view)
                    views.append(view)
                    continue
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


def read_local_inputs(local: LocalEngine, planned: Planned,
                      statement: LocalStatement | None = None) -> dict[str, Any]:
    """The planned scans as the embedded engine's input streams, by view name; each scan's
    stats count the bytes it reads (as the engine reads them). The `statement`'s paths of
    dynamic columns join their scans' columns, and columns it no longer reads leave them."""
    counters = []
    for scan in planned.stats.scans:
        def count(n: int, s: ScanStats = scan["stats"]) -> None:
            s.bytes_read += n
        counters.append(count)
    views = _local_views(len(planned.specs))
    specs = list(planned.specs)
    foreign = {views[i]: planned.foreign_table(i) for i in planned.foreign}
    if statement is not None and statement.scan_paths:
        for i, view in enumerate(views):
            paths, unread = statement.scan_paths.get(view, ([], []))
            if paths:
                columns = [c for c in specs[i].columns if c not in unread] + paths
                specs[i] = dataclasses.replace(specs[i], columns=columns)
    # pruned scans also skip the blocks whose filter columns rule the predicate out
    prefilters = [ref.predicate if planned.prune else None for ref in planned.analysis.refs]
    inputs: dict[str, Any] = dict(local.read_inputs(views, specs, counters, prefilters))
    for view, table in foreign.items():
        inputs[view] = table.cast(pa.schema(
            [f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type)
             else f for f in table.schema]))
    return inputs


def _local_views(n: int) -> list[str]:
    return [f"__shoal_local_{i}" for i in range(n)]
