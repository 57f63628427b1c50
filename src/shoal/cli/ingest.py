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
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Annotated, cast

import typer

from shoal.cli.common import SchemaModeOption, connect_or_exit, fail, progress_bar
from shoal.errors import LineError, PayloadError, ShoalError
from shoal.ingest.chunks import iter_chunks

if TYPE_CHECKING:
    from shoal.client import Shoal
    from shoal.ingest.write_path import IngestAck
    from shoal.types.schema import SchemaMode

IN_FLIGHT = 2  # write-path requests at once (each holds a chunk and its Arrow batch)
GZIP_MAGIC = b"\x1f\x8b"
MAX_SHOWN = 20  # bad or rejected lines printed (the error line counts them all)


@contextmanager
def _open(path: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """The input as bytes (gunzipped when it starts with the gzip magic) and its size when
    known (a plain file); `-` is stdin."""
    if path == "-":
        yield sys.stdin.buffer, None
        return
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")  # noqa: SIM115 - closed by the `with f` below, after the sniff
    except OSError as e:
        fail(f"{path}: {e.strerror or e}")
    with f:
        if f.read(2) == GZIP_MAGIC:
            f.seek(0)
            with gzip.open(f) as unzipped:
                yield cast(IO[bytes], unzipped), None
            return
        f.seek(0)
        yield f, size


@dataclass
class _Tally:
    """What the chunks that landed add up to (the summary line)."""

    rows: int = 0
    chunks: int = 0
    replayed: int = 0
    rejected_lines: int = 0
    read_bytes: int = 0
    last_snapshot: int | None = None
    new_columns: list[str] = field(default_factory=list)
    rejected: list[LineError] = field(default_factory=list)    # the first MAX_SHOWN

    def add(self, ack: IngestAck, offset: int) -> None:
        self.rows += ack.rows
        self.chunks += 1
        self.replayed += ack.replayed
        self.new_columns.extend(c for c in ack.new_columns if c not in self.new_columns)
        self.rejected.extend(le.shifted(offset)
                             for le in ack.rejected[:MAX_SHOWN - len(self.rejected)])
        self.rejected_lines += ack.rejected_count or 0
        self.last_snapshot = max(self.last_snapshot or 0, ack.snapshot_id)


def ingest_command(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="NDJSON file (optionally gzip), or - for stdin")],
    table: Annotated[str, typer.Option("--table", "-t", help="Target table")],
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Apply this input exactly once (chunk i uses KEY#i)")] = None,
    mode: Annotated[SchemaModeOption | None, typer.Option(
        help="What to do with unknown fields (default: the table's mode)")] = None,
    partial: Annotated[bool, typer.Option(help="Keep good lines, report bad ones")] = False,
    chunk_mb: Annotated[int, typer.Option(help="Chunk size in MB")] = 32,
) -> None:
    """Ingest NDJSON into a table through the shared write path."""
    db = connect_or_exit(ctx)
    t0 = time.perf_counter()
    try:
        with _open(path) as (stream, size):
            tally = _ingest(db, stream, size, table=table, idempotency_key=idempotency_key,
                            mode=None if mode is None else mode.literal(), partial=partial,
                            chunk_bytes=chunk_mb << 20)
    except PayloadError as e:
        for le in e.errors[:MAX_SHOWN]:
            typer.echo(le.message, err=True)
        fail(str(e))
    except ShoalError as e:
        fail(str(e))
    finally:
        db.close()
    dt = time.perf_counter() - t0
    for le in tally.rejected:
        typer.echo(f"rejected {le.message}", err=True)
    extra = "".join([
        f", {tally.replayed} chunk(s) replayed" if tally.replayed else "",
        f", new columns: {', '.join(tally.new_columns)}" if tally.new_columns else "",
        f", {tally.rejected_lines:,} line(s) rejected" if tally.rejected_lines else ""])
    typer.echo(f"ingested {tally.rows} rows into {table} in {tally.chunks} chunk(s): snapshot "
               f"{tally.last_snapshot}, {tally.read_bytes / dt / 1e6:.1f} MB/s{extra}")


def _ingest(db: Shoal, stream: IO[bytes], size: int | None, *, table: str,
            idempotency_key: str | None, mode: SchemaMode | None, partial: bool,
            chunk_bytes: int) -> _Tally:
    """Send the chunks of `stream`, `IN_FLIGHT` at once, in order; a `PayloadError` names
    lines of the whole input."""
    from rich.progress import (BarColumn, DownloadColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    tally = _Tally()
    progress = progress_bar("[progress.description]{task.description}", BarColumn(),
                            DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                            transient=False)
    with progress, ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        task = progress.add_task(f"ingest -> {table}", total=size)
        inflight: list[tuple[Future[IngestAck], int, int]] = []

        def settle(fut: Future[IngestAck], offset: int, nbytes: int) -> None:
            try:
                ack = fut.result()
            except PayloadError as e:
                raise PayloadError([le.shifted(offset) for le in e.errors],
                                   total_errors=e.total_errors) from e
            tally.add(ack, offset)
            progress.advance(task, nbytes)

        for i, (chunk, offset) in enumerate(iter_chunks(stream, chunk_bytes)):
            # The chunk is read before waiting for a slot: reading overlaps the work.
            while len(inflight) >= IN_FLIGHT:
                settle(*inflight.pop(0))
            key = None if idempotency_key is None else f"{idempotency_key}#{i}"
            tally.read_bytes += len(chunk)
            inflight.append((pool.submit(db.ingest_ndjson, table, chunk, mode=mode,
                                         partial=partial, idempotency_key=key),
                             offset, len(chunk)))
        while inflight:
            settle(*inflight.pop(0))
    return tally
