"""`shoal pipeline filedrop [--path <dir|s3://bucket/prefix>] --table t [--once]`.

Without `--path` the table's binding is used (`WITH (filedrop_path='...')`, and
`filedrop_interval`, `filedrop_mode`); flags override the properties
(`shoal.frontends.filedrop.binding`). Neither giving a path is a one-line error.

Scans the prefix for NDJSON objects (`.gz` too), ingests each new one exactly once through
Spark tasks (ledger key `filedrop:{sha256}`), routes bad lines to `<table>__rejects`, and
either exits (`--once`) or polls every `--interval` seconds until SIGINT/SIGTERM (the scan in
progress finishes and commits first). On a terminal a progress bar shows files and records/s;
each scan that found something prints one summary line on stdout. Errors: one line
`error: ...` on stderr, exit 1; while polling, a failed scan prints its line and the next
scan retries what did not land.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from shoal.cli.common import SchemaModeOption, config_of, connect, progress_bar
from shoal.errors import ConfigError, TableNotFoundError

if TYPE_CHECKING:
    from rich.progress import TaskID


def filedrop_command(
    ctx: typer.Context,
    table: Annotated[str, typer.Option("--table", "-t", help="Target table")],
    path: Annotated[str | None, typer.Option(
        "--path", help="Watched directory, or s3://bucket/prefix (SHOAL_S3_ENDPOINT applies); "
                       "default: the table's filedrop_path")] = None,
    once: Annotated[bool, typer.Option(
        "--once", help="Process what is there now and exit")] = False,
    interval: Annotated[float | None, typer.Option(
        "--interval", help="Seconds between scans when polling (default: the table's "
                           "filedrop_interval, else 10)")] = None,
    mode: Annotated[SchemaModeOption | None, typer.Option(
        help="What to do with unknown fields (default: the table's filedrop_mode, else its "
             "mode; new tables: evolve)")] = None,
    create: Annotated[bool, typer.Option(
        "--create", help="Create the table (evolve mode, no columns) if it does not exist")
    ] = False,
    min_age: Annotated[float, typer.Option(
        "--min-age", help="Skip objects modified less than this many seconds ago "
                          "(for producers that write in place instead of renaming)")] = 0.0,
    chunk_mb: Annotated[int, typer.Option(
        "--chunk-mb", help="Coercion chunk size per file, MB")] = 32,
) -> None:
    """Ingest NDJSON files dropped into a directory or S3 prefix, exactly once."""
    from shoal.frontends.filedrop import FileDropPipeline, ScanProgress, ScanSummary
    from shoal.frontends.filedrop.binding import resolve_binding
    from shoal.locations import LocationPolicy

    if (interval is not None and interval <= 0) or chunk_mb <= 0:
        raise ConfigError("--interval and --chunk-mb must be positive")
    cfg = config_of(ctx)
    db = connect(ctx, create=create)    # --create may make the data directory's first table
    try:  # the table and its binding: fail in one line before Spark starts
        try:
            db.catalog.load_table(table)
            exists = True
        except TableNotFoundError:
            if not create:
                raise
            exists = False
        binding = resolve_binding(db.catalog, table, path=path, interval_s=interval,
                                  mode=None if mode is None else mode.value,
                                  s3_endpoint=cfg.s3_endpoint, table_exists=exists,
                                  locations=LocationPolicy.from_config(cfg))
    except BaseException:
        db.close()
        raise
    stop = threading.Event()
    if not once:
        def request_stop(*_: object) -> None:
            if stop.is_set():          # a second signal aborts the scan in progress
                raise KeyboardInterrupt
            stop.set()
            typer.echo("stopping after the current scan (signal again to abort)", err=True)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, request_stop)

    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    progress = progress_bar(TextColumn("[progress.description]{task.description}"),
                            BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                            transient=True)
    bar: dict[str, TaskID] = {}

    def on_progress(p: ScanProgress) -> None:
        rate = f"{p.rows / max(p.elapsed_s, 1e-9):,.0f} records/s"
        if "task" not in bar:
            bar["task"] = progress.add_task(f"filedrop -> {table}", total=p.files_total,
                                            rate=rate)
        progress.update(bar["task"], completed=p.files_done, total=p.files_total, rate=rate)

    def on_summary(s: ScanSummary) -> None:
        if "task" in bar:
            progress.remove_task(bar.pop("task"))
        if once or s.ingested or s.duplicates or s.changed:
            typer.echo(s.line(table))

    try:
        from shoal.query.spark.session import spark_session

        spark = spark_session(cfg.spark_master, config=cfg)
        pipeline = FileDropPipeline.from_client(
            db, spark, binding.source, table, mode=binding.mode, create=create,
            min_age_s=min_age, chunk_bytes=chunk_mb << 20, on_progress=on_progress)
        with progress:
            total = pipeline.run(once=once, interval_s=binding.interval_s, on_summary=on_summary,
                                 on_error=lambda e: typer.echo(f"error: {e}", err=True),
                                 should_stop=stop.is_set)
        if not once:
            typer.echo(f"stopped: {total.ingested} file(s), {total.rows} rows, "
                       f"{total.rejected} line(s) rejected in total")
    finally:
        db.close()
