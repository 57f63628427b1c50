"""`shoal pipeline scrape [--table t ...] [--once]`: run the scrape jobs bound to
tables (`WITH (scrape_targets='host:port,...')`, see `shoal.frontends.prometheus.binding`).

`--once` scrapes every target of every bound table (or of the `--table`s given) one time,
commits, prints one line per target (`table instance: up, N samples` or the reason it
failed) and exits 1 with `error: ...` naming the failed targets when any did. Without it,
the scrape jobs run like `shoal serve` runs them (the binding supervisor, scrape kind only)
until SIGINT/SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from shoal.cli.common import connect_or_exit
from shoal.errors import InvalidPropertyError, ScrapeFailedError


def scrape_command(
    ctx: typer.Context,
    table: Annotated[list[str] | None, typer.Option(
        "--table", "-t", help="A table bound to scrape targets (repeatable; default: all)")
    ] = None,
    once: Annotated[bool, typer.Option(
        "--once", help="Scrape every target once, commit and exit")] = False,
) -> None:
    """Scrape the Prometheus targets bound to tables (once, or on their intervals)."""
    from shoal.frontends.prometheus.kind import ScrapeKind, resolve_scrape_binding
    from shoal.frontends.prometheus.scrape import Scraper
    from shoal.frontends.supervisor import BindingSupervisor
    from shoal.frontends.prometheus.binding import is_bound

    db = connect_or_exit(ctx)
    try:
        names = list(table or ()) or [t.name for t in db.catalog.list_tables()
                                      if is_bound(t.properties)]
        bindings = []
        for name in names:
            db.catalog.load_table(name)          # an unknown table: TableNotFoundError
            binding = resolve_scrape_binding(db, name)
            if binding is None:
                raise InvalidPropertyError(
                    f'table "{name}" is not bound to scrape targets: create it WITH '
                    "(scrape_targets='host:port,...')")
            bindings.append(binding)
        if not bindings:
            typer.echo("no table is bound to scrape targets", err=True)
            return
        if once:
            down: list[str] = []
            for binding in bindings:
                with Scraper(db, binding) as scraper:
                    for r in scraper.scrape():
                        if r.up:
                            typer.echo(f"{binding.table} {r.target}: up, {r.samples} samples, "
                                       f"{r.duration_s:.3f}s")
                        else:
                            typer.echo(f"{binding.table} {r.target}: down ({r.error})")
                            down.append(f"{binding.table} {r.target}")
            if down:
                raise ScrapeFailedError(", ".join(down), f"{len(down)} of the targets did "
                                                         "not answer (see above)")
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        supervisor = BindingSupervisor(db.catalog, [ScrapeKind(db)])
        supervisor.start()
        typer.echo(f"scraping {len(bindings)} table(s); SIGINT or SIGTERM stops", err=True)
        stop.wait()
        supervisor.stop()
    finally:
        db.close()
