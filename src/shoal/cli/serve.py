"""`shoal serve`: run the HTTP server under uvicorn until SIGINT/SIGTERM (docs/cli.md).

OTLP/gRPC is served beside it on `--otlp-grpc-port` (SHOAL_OTLP_GRPC_PORT, 0 = off), on
the same host and under the same tokens; Arrow Flight SQL likewise on `--flight-port`
(SHOAL_FLIGHT_PORT; `shoal.frontends.flightsql.server`). A port set by flag, variable or
config file is required: in use, it fails the startup with one line (checked before uvicorn
starts; the app's lifespan fails too if the port is taken in between). Unset, the default
port (`otlp_grpc_default_port` 4317, `flight_default_port` 8815) is served if it is free;
taken (an OpenTelemetry Collector or Jaeger holds 4317 on many machines), it is a warning
in the log and in `/readyz`, and the server serves the rest (`shoal.server.listeners`).

NDJSON bodies are coerced in `--coerce-workers` worker processes (SHOAL_COERCE_WORKERS,
default 0 = in the server process; `shoal.ingest.pool`), started before anything else
and stopped with the app.

Connections get `header_timeout_s` (SHOAL_HEADER_TIMEOUT_S) to send a request's headers
(`shoal.server.protocol`), bodies `body_timeout_s`.

Refuses (exit 1, one line) to bind to a non-loopback host when no tokens are configured.
Graceful stop: uvicorn stops accepting, waits for in-flight requests (at most
`shutdown_timeout_s`, SHOAL_SHUTDOWN_TIMEOUT_S; then they are cancelled, so a client
trickling a body cannot hold the process), then the app's lifespan closes the client,
flushing the staging buffer, before the process exits.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import Annotated

import typer

from shoal.cli.common import EXIT_ERROR, config_of
from shoal.errors import ConfigError


class LogLevel(StrEnum):
    """`--log-level`: uvicorn's levels (`uvicorn.config.LOG_LEVELS`), any case."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"
    TRACE = "trace"


def serve_command(ctx: typer.Context,
          host: Annotated[str | None, typer.Option(
              "--host", help="Address to bind (SHOAL_HOST, default 127.0.0.1)")] = None,
          port: Annotated[int | None, typer.Option(
              "--port", help="Port to bind (SHOAL_PORT, default 8720)")] = None,
          log_level: Annotated[LogLevel, typer.Option(
              "--log-level", case_sensitive=False, help="uvicorn log level")] = LogLevel.INFO,
          warm_spark: Annotated[bool, typer.Option(
              "--warm-spark/--lazy-spark",
              help="Start Spark at startup (default) or on the first query")] = True,
          otlp_grpc_port: Annotated[int | None, typer.Option(
              "--otlp-grpc-port",
              help="OTLP/gRPC port (SHOAL_OTLP_GRPC_PORT; 0 = off; unset: 4317 if it is "
                   "free)")] = None,
          flight_port: Annotated[int | None, typer.Option(
              "--flight-port",
              help="Arrow Flight SQL port (SHOAL_FLIGHT_PORT; 0 = off; unset: 8815 if it is "
                   "free)")] = None,
          coerce_workers: Annotated[int | None, typer.Option(
              "--coerce-workers",
              help="Processes coercing NDJSON bodies (SHOAL_COERCE_WORKERS, default 0 = "
                   "in the server process)")] = None,
          ) -> None:
    """Run the HTTP server (ingest, query, tables, health, metrics)."""
    from shoal.native import LONG_RUNNING, own_cli_process, tune_allocators

    if own_cli_process():
        tune_allocators(*LONG_RUNNING)  # before pyarrow is imported; workers inherit the pool
    import uvicorn

    from shoal.client import Shoal
    from shoal.ingest.pool import CoercionPool
    from shoal.server import check_bind, create_app, load_tokens
    from shoal.server.protocol import header_timeout_protocol

    base = config_of(ctx)
    cfg = replace(base, host=host or base.host, port=base.port if port is None else port,
                  otlp_grpc_port=(base.otlp_grpc_port if otlp_grpc_port is None
                                  else otlp_grpc_port),
                  flight_port=base.flight_port if flight_port is None else flight_port,
                  coerce_workers=(base.coerce_workers if coerce_workers is None
                                  else coerce_workers))
    otlp_port, otlp_required = cfg.listener_port("otlp_grpc")
    flight_port_, flight_required = cfg.listener_port("flight")
    for port, name in ((otlp_port, "--otlp-grpc-port"), (flight_port_, "--flight-port")):
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name} must be 0-65535, got {port}")
    tokens = load_tokens(cfg)
    check_bind(cfg.host, tokens)
    if otlp_port and otlp_required:
        _check_port_free(cfg.host, otlp_port)
    if flight_port_ and flight_required:
        _check_port_free(cfg.host, flight_port_, what="Flight SQL", flag="--flight-port")
    best_effort = frozenset(name for name, required in (("otlp_grpc", otlp_required),
                                                          ("flight_sql", flight_required))
                            if not required)
    workers = cfg.coerce_workers
    if workers < 0:
        raise ConfigError(f"--coerce-workers must be 0 or more, got {workers}")
    pool = CoercionPool(workers).start() if workers else None
    try:
        db = Shoal(cfg)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    try:
        app = create_app(db, config=cfg, tokens=tokens, close_db=True, warm_spark=warm_spark,
                         otlp_grpc_port=otlp_port, flight_port=flight_port_,
                         best_effort=best_effort, maintenance=cfg.maintenance,
                         pipelines=cfg.pipelines, coercion_pool=pool)
        server = uvicorn.Server(uvicorn.Config(
            app, host=cfg.host, port=cfg.port, log_level=log_level.value, lifespan="on",
            proxy_headers=False, http=header_timeout_protocol(cfg.header_timeout_s),
            timeout_graceful_shutdown=cfg.shutdown_timeout_s))  # type: ignore[arg-type]
        server.run()
        if not server.started:
            raise typer.Exit(EXIT_ERROR)
    finally:
        db.close()    # idempotent; covers a failed startup, where the lifespan never ran
        if pool is not None:
            pool.close()


def _check_port_free(host: str, port: int, *, what: str = "OTLP/gRPC",
                     flag: str = "--otlp-grpc-port") -> None:
    """Fail early, in one line, when a gRPC port (OTLP, Flight SQL) set by the user is
    taken (`shoal.server.listeners.port_taken` binds as gRPC does)."""
    from shoal.server.listeners import port_taken

    taken = port_taken(host, port)
    if taken is not None:
        raise ConfigError(f"cannot bind {what} to {host}:{port}: {taken}; choose another "
                          f"port with {flag} N, or 0 to turn it off")
