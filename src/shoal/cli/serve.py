"""`shoal serve`: run the HTTP server under uvicorn until SIGINT/SIGTERM (SPEC §7.1, §11).

Refuses (exit 1, one line) to bind to a non-loopback host when no tokens are configured.
Graceful stop: uvicorn stops accepting, waits for in-flight requests, then the app's
lifespan closes the client, flushing the staging buffer, before the process exits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from shoal.config import Config
from shoal.errors import ConfigError


def serve(ctx: typer.Context,
          host: Annotated[str | None, typer.Option(
              "--host", help="Address to bind (SHOAL_HOST, default 127.0.0.1)")] = None,
          port: Annotated[int | None, typer.Option(
              "--port", help="Port to bind (SHOAL_PORT, default 8720)")] = None,
          log_level: Annotated[str, typer.Option(
              "--log-level", help="uvicorn log level")] = "info",
          warm_spark: Annotated[bool, typer.Option(
              "--warm-spark/--lazy-spark",
              help="Start Spark at startup (default) or on the first query")] = True,
          ) -> None:
    """Run the HTTP server (ingest, query, tables, health, metrics)."""
    import uvicorn

    from shoal.client import Shoal
    from shoal.server import check_bind, create_app, load_tokens

    if log_level.lower() not in uvicorn.config.LOG_LEVELS:
        raise ConfigError(f"unknown log level {log_level!r} (expected one of "
                          f"{', '.join(uvicorn.config.LOG_LEVELS)})")
    base: Config = ctx.obj
    cfg = replace(base, host=host or base.host, port=base.port if port is None else port)
    tokens = load_tokens(cfg)
    check_bind(cfg.host, tokens)
    db = Shoal(cfg)
    try:
        app = create_app(db, config=cfg, tokens=tokens, close_db=True, warm_spark=warm_spark)
        server = uvicorn.Server(uvicorn.Config(app, host=cfg.host, port=cfg.port,
                                               log_level=log_level.lower(), lifespan="on",
                                               proxy_headers=False))
        server.run()
        if not server.started:
            raise typer.Exit(1)
    finally:
        db.close()    # idempotent; covers a failed startup, where the lifespan never ran
