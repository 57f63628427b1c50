"""`shoal pipeline sync --table t [--once]`: run the sync bound to a table
(`WITH (sync_source='postgresql://...', sync_table='public.orders')`, see
`shoal.frontends.sync.binding`).

`--once` takes the initial snapshot if the table has none yet, applies every change up to
the source's position at start, prints one summary line and exits 0; with `--spark` the
snapshot's key ranges are read and written by Spark tasks (the client's Spark session).
Without `--once`, the sync runs like `shoal serve` runs it (the binding supervisor, sync
kind only) until SIGINT or SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from shoal.cli.common import connect_or_exit
from shoal.errors import InvalidPropertyError


def sync_command(
    ctx: typer.Context,
    table: Annotated[str, typer.Option("--table", "-t", help="A table bound to a sync source")],
    once: Annotated[bool, typer.Option(
        "--once", help="Snapshot if needed, apply the changes up to now, then exit")] = False,
    spark: Annotated[bool, typer.Option(
        "--spark", help="Read and write the initial snapshot's key ranges as Spark tasks "
                        "(with --once)")] = False,
) -> None:
    """Mirror a source table (PostgreSQL) into a change-log table."""
    from shoal.frontends.supervisor import BindingSupervisor
    from shoal.frontends.sync.kind import SyncKind, resolve_sync_binding
    from shoal.frontends.sync.pipeline import SyncPipeline

    db = connect_or_exit(ctx)
    try:
        db.catalog.load_table(table)          # an unknown table: TableNotFoundError
        binding = resolve_sync_binding(db, table)
        if binding is None:
            raise InvalidPropertyError(
                f'table "{table}" is not bound to a sync source: create it WITH '
                "(sync_source='postgresql://...', sync_table='schema.table')")
        if once:
            session = db.query_engine.spark if spark else None
            pipeline = SyncPipeline(db, binding, spark=session)
            try:
                p = pipeline.run(once=True)
            finally:
                pipeline.close()
            typer.echo(f"{table}: {p.snapshot_rows} snapshot rows, {p.changes} changes, "
                       f"{p.rows} rows in {p.commits} commits")
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        kind = SyncKind(db)
        supervisor = BindingSupervisor(db.catalog, [kind])
        supervisor.start()
        typer.echo(f"syncing table {table}; SIGINT or SIGTERM stops", err=True)
        stop.wait()
        supervisor.stop()
    finally:
        db.close()
