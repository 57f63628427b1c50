"""The HTTP server app: `create_app(db, config=...)` wires routes, auth, errors and metrics.

Routes (docs/http-api.md): the web console at `/` (`webconsole.py`), the protocol front
ends' routers (`shoal.frontends`): `/v1/tables...` and `/v1/ingest/{table}` and
`/v1/query` (`rest/`), OTLP/HTTP `/v1/logs`, `/v1/traces`, `/v1/metrics` (`otlp/http.py`),
Prometheus remote write `/api/v1/write` (`prometheus/write.py`), the Prometheus HTTP API
`/api/v1/query...` (`prometheus/api.py`), the Kusto REST API (`kusto/api.py`), the Sentry
SDK's `/api/{project}/envelope/` and `/store/` (`sentry/http.py`), and the
operational endpoints here: the open `GET /healthz` (the process answers) and `GET /readyz` (the
catalog answers a cheap query, the server is not shutting down and, once the server has had
a Spark session, that session is alive; else 503 + Retry-After), and `GET /metrics`
(Prometheus text of this app's own registry, plus `shoal_queries_running` and
`shoal_spark_restarts`; it names tables and their volumes, so with tokens configured it
needs the `metrics` or `query` scope).

The query lane's bounds come from `config`: `query_concurrency` slots
(`shoal.http.state.QuerySlots`, at most `query_concurrency_per_client` of them per client,
by default all but one),
`query_timeout_s` / `query_max_rows` / `query_max_bytes` (`QueryLimits`, passed to the
engine by `/v1/query`), and `spark.driver.maxResultSize` = `RESULT_SIZE_FACTOR` x
`query_max_bytes` for a session this server starts. A `SparkSupervisor`
(`shoal.http.spark_health`) watches the session every `spark_probe_interval_s` and
restarts it when its JVM dies or stops answering.

Lifespan: the Spark supervisor runs from startup to shutdown. At startup the default
worker-thread limiter is raised to `worker_threads`
(anyio's default of 40 would queue the 41st concurrent ingest behind the others, and starve
every other `def` endpoint meanwhile). At shutdown the app stops accepting ingest (503) and,
with `close_db=True`, closes `db`, which flushes the staging buffer. Uvicorn runs the
lifespan shutdown only after in-flight requests have finished, and before re-raising a
caught SIGTERM, so this is where a graceful stop must flush.

OTLP/gRPC (`otlp_grpc_port`, off unless given: `shoal serve` passes the configured port)
runs beside uvicorn with the same tokens and the same write path: started in the lifespan
(a port in use fails the startup), stopped at shutdown before `db` is closed, letting
running calls finish. Arrow Flight SQL (`flight_port`, likewise off unless given;
`shoal.frontends.flightsql.server`) is started and stopped the same way, over the same state
(tokens, query slots and limits), as `app.state.flight`.

The app does not own `db` unless told to (`close_db`): tests build several apps over
clients they close themselves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, generate_latest

from shoal.client import Shoal
from shoal.commit import LedgerSweeper
from shoal.config import Config
from shoal.errors import ConfigError, EngineUnavailableError
from shoal.frontends.kusto.api import router as kusto_router
from shoal.frontends.otlp import ExportResult, OtlpSink, OtlpTables
from shoal.frontends.otlp.http import router as otlp_router
from shoal.frontends.sentry.http import router as sentry_router
from shoal.frontends.sentry.sink import SentrySink
from shoal.frontends.prometheus.api import router as prometheus_api_router
from shoal.frontends.prometheus.sink import PromTables, PromWriteSink
from shoal.frontends.prometheus.write import router as prometheus_write_router
from shoal.frontends.rest.ingest import router as ingest_router
from shoal.frontends.rest.query import router as query_router
from shoal.frontends.rest.tables import router as tables_router
from shoal.http.auth import TokenTable, load_tokens, require_scope
from shoal.http.errors import NotReadyError, install_error_handlers
from shoal.http.metrics import MetricsMiddleware, ServerMetrics
from shoal.http.spark_health import SparkSupervisor
from shoal.http.state import QuerySlots, ServerState, server_state
from shoal.query.limits import QueryLimits
from shoal.server.edge import EdgeMiddleware
from shoal.server.listeners import Listeners
from shoal.server.maintenance import install_maintenance
from shoal.server.openapi import install_openapi
from shoal.server.pipelines import install_pipelines
from shoal.server.webconsole import install_console

if TYPE_CHECKING:
    from shoal.ingest.pool import CoercionPool

log = logging.getLogger(__name__)

READY_PROBE_KEY = "shoal-readyz-probe"   # looked up, never written: an indexed point read
READY_TIMEOUT_S = 5.0
# spark.driver.maxResultSize over query_max_bytes: answers between the two are cut to the
# byte cap (`truncated`); beyond it Spark refuses to collect (400 `result_too_large`).
RESULT_SIZE_FACTOR = 2


def create_app(db: Shoal, *, config: Config, max_body_bytes: int = 64 << 20,
               tokens: TokenTable | None = None, worker_threads: int = 256,
               close_db: bool = False, sweep_ledger: bool = True,
               warm_spark: bool = False, otlp_grpc_port: int | None = None,
               flight_port: int | None = None,
               best_effort: frozenset[str] = frozenset(),
               maintenance: bool | None = None, pipelines: bool | None = None,
               spark_probe_interval_s: float = 5.0,
               spark_probe_timeout_s: float = 20.0,
               coercion_pool: CoercionPool | None = None) -> FastAPI:
    """Build the server app over `db`.

    `tokens` defaults to those of `config` (`load_tokens`); an empty table turns auth off
    (binding to loopback only is the caller's check: `shoal.http.auth.check_bind`).
    `max_body_bytes` caps ingest bodies, before and after gzip decoding. `warm_spark` starts
    the Spark session in the background at startup (what `shoal serve` does). `otlp_grpc_port`
    (None or 0: off) serves OTLP/gRPC on `config.host`; the server is `app.state.otlp_grpc`
    (its `bound_port` once started). `flight_port` (None or 0: off) serves Arrow Flight SQL
    on `config.host` (TLS per `config.flight_tls_cert`/`flight_tls_key`), as
    `app.state.flight`. `best_effort` names the listeners (`otlp_grpc`, `flight_sql`) whose
    port is a default one: taken, it is a warning in the log and in `/readyz` and the app
    serves the rest (`shoal.server.listeners`); any other taken port fails the startup.
    `maintenance` runs the maintenance scheduler and a
    worker in the background (`shoal.server.maintenance`); `pipelines` runs the Kafka and
    file-drop pipelines of bound tables (`shoal.server.pipelines`). None follows
    `warm_spark`, i.e. on for `shoal serve` (which passes the config's `maintenance` and
    `pipelines`), off for apps that tests build. `spark_probe_interval_s` /
    `spark_probe_timeout_s`: how often the Spark supervisor checks the session, and how long
    its probe may take. `coercion_pool` (started by the caller): NDJSON bodies are coerced
    in its worker processes while the app runs (`WritePath.coercer`); with `close_db` the
    app closes it at shutdown too.
    """
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    metrics = ServerMetrics(lambda: db.write_path.buffer)
    limits = _query_limits(config)
    engine = db.query_engine
    engine.max_result_bytes = RESULT_SIZE_FACTOR * config.query_max_bytes
    engine.spark_role = "serve"     # a long-lived app: capped on a shared cluster
    supervisor = SparkSupervisor(lambda: engine, interval_s=spark_probe_interval_s,
                                 probe_timeout_s=spark_probe_timeout_s)
    state = ServerState(db=db, config=config,
                        tokens=load_tokens(config) if tokens is None else tokens,
                        metrics=metrics, max_body_bytes=max_body_bytes,
                        query_slots=QuerySlots(
                            config.query_concurrency,
                            per_client=config.query_concurrency_per_client or None),
                        query_limits=limits, spark=supervisor)
    Gauge("shoal_queries_running", "Statements running on the query engine",
          registry=metrics.registry).set_function(lambda: state.query_slots.running)
    Gauge("shoal_spark_restarts", "Spark sessions restarted by the supervisor",
          registry=metrics.registry).set_function(lambda: supervisor.restarts)
    if coercion_pool is not None:
        pool = coercion_pool
        Gauge("shoal_coerce_workers", "Coercion worker processes",
              registry=metrics.registry).set_function(lambda: pool.size)
        Gauge("shoal_coerce_workers_busy", "Coercion worker processes serving a request",
              registry=metrics.registry).set_function(lambda: pool.busy)
        Gauge("shoal_coerce_worker_restarts", "Coercion workers replaced after dying",
              registry=metrics.registry).set_function(lambda: pool.stats.restarts)
    otlp_sink = OtlpSink(db.write_path, OtlpTables.from_config(config))
    otlp_grpc = None
    if otlp_grpc_port:
        from shoal.frontends.otlp.grpc import OtlpGrpcServer   # grpcio: only when it is served

        def observe(result: ExportResult, wire_bytes: int) -> None:
            metrics.observe_ingest(result.table, rows=result.rows, nbytes=wire_bytes,
                                   wire_bytes=wire_bytes, rejected=result.rejected,
                                   replayed=result.replayed, path="otlp")

        otlp_grpc = OtlpGrpcServer(otlp_sink, host=config.host, port=otlp_grpc_port,
                                   tokens=state.tokens, max_message_bytes=max_body_bytes,
                                   accepting=lambda: state.accepting, observe=observe)

    listeners = Listeners(config.host)
    flight_sql = None
    if flight_port:
        from shoal.frontends.flightsql.server import FlightSqlServer   # only when it is served

        flight_sql = FlightSqlServer(state, host=config.host, port=flight_port,
                                     tls_cert=config.flight_tls_cert,
                                     tls_key=config.flight_tls_key)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Before uvicorn listens: what the first ingest request would otherwise wait for
        # (imports, kernels, the codec: ~0.1 s that 8 clients' first requests all waited
        # out when it ran beside them).
        await anyio.to_thread.run_sync(_warm_ingest)
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, worker_threads)
        if coercion_pool is not None:
            db.write_path.coercer = coercion_pool.coerce
        state.accepting = True
        supervisor.start()
        # Idempotency keys expire: an hourly sweep deletes ledger rows older than 25 h.
        sweeper = LedgerSweeper(db.catalog).start() if sweep_ledger else None
        if otlp_grpc is not None:
            try:
                listeners.start("otlp_grpc", "OTLP/gRPC", "--otlp-grpc-port",
                                otlp_grpc.port, required="otlp_grpc" not in best_effort,
                                start=otlp_grpc.start)
            except BaseException:
                if sweeper is not None:
                    sweeper.stop()
                raise
        if flight_sql is not None:
            try:
                listeners.start("flight_sql", "Flight SQL", "--flight-port", flight_sql.port,
                                required="flight_sql" not in best_effort,
                                start=flight_sql.start)
            except BaseException:
                if otlp_grpc is not None:
                    otlp_grpc.stop()
                if sweeper is not None:
                    sweeper.stop()
                raise
        start_maintenance()
        start_pipelines()   # sources bound to tables (`shoal.server.pipelines`)
        if warm_spark:      # start Spark now, off the event loop: no query pays start-up
            threading.Thread(target=db.query_engine.warm_up, name="shoal-spark-warmup",
                             daemon=True).start()
        try:
            yield
        finally:
            state.accepting = False
            await anyio.to_thread.run_sync(stop_pipelines)
            await anyio.to_thread.run_sync(stop_maintenance)
            if otlp_grpc is not None:
                await anyio.to_thread.run_sync(otlp_grpc.stop)
            if flight_sql is not None:
                await anyio.to_thread.run_sync(flight_sql.stop)
            if sweeper is not None:
                sweeper.stop()
            await anyio.to_thread.run_sync(supervisor.stop)
            if coercion_pool is not None:
                db.write_path.coercer = None
            if close_db:
                await anyio.to_thread.run_sync(db.close)
                if coercion_pool is not None:
                    # Here, not after uvicorn returns: it re-raises a caught SIGTERM on
                    # its way out, and the workers must be gone before the process is.
                    await anyio.to_thread.run_sync(coercion_pool.close)

    app = FastAPI(title="shoal", version="0.1.0", lifespan=lifespan,
                  docs_url=None, redoc_url=None)     # /docs: webconsole, vendored
    app.state.shoal = state
    app.state.otlp_sink = otlp_sink
    app.state.otlp_grpc = otlp_grpc
    app.state.prom_write_sink = PromWriteSink(db.write_path, PromTables.from_config(config))
    app.state.sentry_sink = SentrySink(db.write_path, config.sentry_table)
    app.state.flight = flight_sql
    app.state.listeners = listeners
    install_error_handlers(app)
    app.add_middleware(EdgeMiddleware, **EdgeMiddleware.options(
        auth_enabled=state.tokens.enabled, http_hosts=config.http_hosts,
        cors_origins=config.cors_origins))
    app.add_middleware(MetricsMiddleware, metrics=metrics)   # outermost: counts refusals too
    app.include_router(tables_router)
    app.include_router(ingest_router)
    app.include_router(query_router)
    app.include_router(kusto_router)
    app.include_router(otlp_router)
    app.include_router(prometheus_write_router)
    app.include_router(prometheus_api_router)
    app.include_router(sentry_router)
    start_maintenance, stop_maintenance = install_maintenance(
        app, db, enabled=warm_spark if maintenance is None else maintenance)
    start_pipelines, stop_pipelines = install_pipelines(
        app, db, config=config, enabled=warm_spark if pipelines is None else pipelines)
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["ops"])
    app.add_api_route("/readyz", readyz, methods=["GET"], tags=["ops"])
    app.add_api_route("/metrics", prometheus_metrics, methods=["GET"], tags=["ops"],
                      dependencies=[Depends(require_scope("metrics", "query"))])
    install_console(app)    # GET /: the web console (static files; data through the API)
    install_openapi(app)    # /openapi.json: the real bodies, answers and errors
    return app


def _warm_ingest() -> None:
    """One small coercion (also when coercion workers do it: they warm themselves up) and
    its extent's statistics and IPC, in memory."""
    from shoal.format.tlm import warm_up as warm_extents
    from shoal.ingest.coerce import warm_up as warm_coercion

    try:
        warm_extents(warm_coercion())
    except Exception:  # only a head start: the first request would meet the same error
        log.exception("warming up the ingest path failed")


def _query_limits(config: Config) -> QueryLimits:
    if config.query_concurrency < 1:
        raise ConfigError(f"query_concurrency must be at least 1, got {config.query_concurrency}")
    if config.query_concurrency_per_client < 0:
        raise ConfigError("query_concurrency_per_client must be 0 (all slots but one) or "
                          f"more, got {config.query_concurrency_per_client}")
    for name in ("query_max_rows", "query_max_bytes"):
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be at least 1, got {getattr(config, name)}")
    if config.local_query_memory < 1 << 20:
        raise ConfigError("local_query_memory must be at least 1 MiB (1048576), got "
                          f"{config.local_query_memory}")
    return QueryLimits(timeout_s=config.query_timeout_s, max_rows=config.query_max_rows,
                       max_bytes=config.query_max_bytes)


async def healthz() -> dict[str, Any]:
    """Liveness: the process runs its event loop."""
    return {"status": "ok"}


async def readyz(request: Request) -> dict[str, Any]:
    """Readiness: accepting work, the Spark session (once started) alive and not being
    restarted, and the catalog answers within `READY_TIMEOUT_S`."""
    state = server_state(request)
    state.check_accepting()
    reason = state.spark.unavailable()
    if reason is not None:
        raise EngineUnavailableError(reason, retry_after_s=state.spark.retry_after_s)
    with anyio.move_on_after(READY_TIMEOUT_S) as scope:
        try:
            await anyio.to_thread.run_sync(state.db.catalog.ledger_get, READY_PROBE_KEY,
                                           abandon_on_cancel=True,
                                           limiter=state.probe_limiter)
        except Exception as e:  # noqa: BLE001 - any failure of the catalog means not ready
            raise NotReadyError(f"catalog unavailable: {type(e).__name__}: {e}") from None
    if scope.cancelled_caught:
        raise NotReadyError(f"catalog did not answer within {READY_TIMEOUT_S:g}s")
    listeners: Listeners = request.app.state.listeners
    # A listener on a default port that was taken does not make the server unready (it
    # serves the rest): `warnings` says which and why.
    return {"status": "ready", **listeners.report()}


async def prometheus_metrics(request: Request) -> Response:
    registry = server_state(request).metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
