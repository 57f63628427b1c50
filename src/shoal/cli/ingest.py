"""`shoal ingest <file|-> --table t`: NDJSON from a file or stdin through the shared write path.

The input is cut at line boundaries into chunks of about `--chunk-mb`; each chunk is one
write-path request (atomic on its own). Two chunks are in flight at once (`IN_FLIGHT`), so
coercing the next overlaps writing and committing the previous, and the chunk after them is
read meanwhile. With `--idempotency-key K` chunk i carries the key `K#i`: re-running the
same command after a failure applies exactly the chunks that did not land. Errors report
line numbers of the whole input. On a terminal a progress bar shows bytes; the last line is a
one-line summary.
"""

from __future__ import annotations

import gzip
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Annotated

import typer

from shoal.errors import LineError, PayloadError
from shoal.ingest.chunks import iter_chunks

IN_FLIGHT = 2  # write-path requests at once (each holds a chunk and its Arrow batch)


def _open(path: str) -> tuple[IO[bytes], int | None]:
    if path == "-":
        return sys.stdin.buffer, None
    import os

    size = os.path.getsize(path)
    f = open(path, "rb")
    if f.read(2) == b"\x1f\x8b":
        f.seek(0)
        return gzip.open(f), None  # type: ignore[return-value]
    f.seek(0)
    return f, size


def ingest_command(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="NDJSON file (optionally gzip), or - for stdin")],
    table: Annotated[str, typer.Option("--table", "-t", help="Target table")],
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Apply this input exactly once (chunk i uses KEY#i)")] = None,
    mode: Annotated[str | None, typer.Option(help="evolve, drop or reject (default: the "
                                                  "table's mode)")] = None,
    partial: Annotated[bool, typer.Option(help="Keep good lines, report bad ones")] = False,
    chunk_mb: Annotated[int, typer.Option(help="Chunk size in MB")] = 32,
) -> None:
    """Ingest NDJSON into a table through the shared write path."""
    from rich.progress import (BarColumn, DownloadColumn, Progress, TimeRemainingColumn,
                               TransferSpeedColumn)

    from shoal.cli.main import connect_or_exit
    from shoal.errors import ShoalError

    db = connect_or_exit(ctx)
    stream, size = _open(path)
    show = sys.stderr.isatty()
    progress = Progress("[progress.description]{task.description}", BarColumn(),
                        DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                        disable=not show, transient=False)
    rows = chunks = replayed = rejected_lines = 0
    new_columns: list[str] = []
    rejected: list[LineError] = []
    last_snapshot = None
    t0 = time.perf_counter()
    read_bytes = 0
    try:
        with progress, ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
            task = progress.add_task(f"ingest -> {table}", total=size)
            inflight: list[tuple[Future, int, int]] = []

            def settle(fut: Future, offset: int, nbytes: int) -> None:
                nonlocal rows, chunks, replayed, last_snapshot, rejected_lines
                try:
                    ack = fut.result()
                except PayloadError as e:
                    raise PayloadError([le.shifted(offset) for le in e.errors],
                                       total_errors=e.total_errors) from None
                rows += ack.rows
                chunks += 1
                replayed += ack.replayed
                new_columns.extend(c for c in ack.new_columns if c not in new_columns)
                rejected.extend(le.shifted(offset) for le in ack.rejected[:20 - len(rejected)])
                rejected_lines += ack.rejected_count or 0
                last_snapshot = max(last_snapshot or 0, ack.snapshot_id)
                progress.advance(task, nbytes)

            for i, (chunk, offset) in enumerate(iter_chunks(stream, chunk_mb << 20)):
                # The chunk is read before waiting for a slot: reading overlaps the work.
                while len(inflight) >= IN_FLIGHT:
                    settle(*inflight.pop(0))
                key = None if idempotency_key is None else f"{idempotency_key}#{i}"
                read_bytes += len(chunk)
                inflight.append((pool.submit(db.ingest_ndjson, table, chunk, mode=mode,
                                             partial=partial, idempotency_key=key),
                                 offset, len(chunk)))
            while inflight:
                settle(*inflight.pop(0))
    except PayloadError as e:
        for le in e.errors[:20]:
            typer.echo(le.message, err=True)
        typer.echo(f"error: {e}", err=True)
        db.close()
        raise typer.Exit(1) from None
    except ShoalError as e:
        typer.echo(f"error: {e}", err=True)
        db.close()
        raise typer.Exit(1) from None
    db.close()
    dt = time.perf_counter() - t0
    for le in rejected[:20]:
        typer.echo(f"rejected {le.message}", err=True)
    extra = "".join([f", {replayed} chunk(s) replayed" if replayed else "",
                     f", new columns: {', '.join(new_columns)}" if new_columns else "",
                     f", {rejected_lines:,} line(s) rejected" if rejected_lines else ""])
    typer.echo(f"ingested {rows} rows into {table} in {chunks} chunk(s): snapshot "
               f"{last_snapshot}, {read_bytes / dt / 1e6:.1f} MB/s{extra}")
