"""`shoal ingest <input>... --table t`: NDJSON files, globs or stdin through the shared write
path.

Inputs: each argument is a file (plain or gzip, sniffed by its magic bytes), `-` for stdin
(at most once), or a glob that shoal expands itself (`'logs/*.ndjson'`, quoted so the shell
leaves it alone; `**` spans directories), sorted by name; a glob matching nothing is an error,
and a file named twice is read once. Every input is resolved before anything is sent.

Each input is cut at line boundaries into chunks of about `--chunk-mb`; each chunk is one
write-path request (atomic on its own). The pipeline that reads, coerces and sends them
(`shoal.ingest.bulk`) starts reading the first chunk before the command imports SQLAlchemy
and opens the catalog, and keeps `IN_FLIGHT` (2) requests at once; this module parses the
arguments, resolves the inputs, runs the pipeline and prints progress and the summary.
Memory is bounded by the chunks in flight, not by the input (`MEMORY_BOUND_HELP`;
docs/cli.md).

Idempotency (`--idempotency-key K`): with one input chunk i carries `K#i`; with several, chunk
i of an input carries `K#<absolute path of the input>#i` (`K#-#i` for stdin), so re-running
the same command after a failure applies exactly the chunks that did not land, however the
inputs are ordered and whatever else a glob matches by then.

With `--url` the chunks go to that server's `POST /v1/ingest/{table}` (two requests at once,
with the same idempotency keys); the server coerces and commits them.

Errors name the input and the line within it (`b.ndjson.gz line 7: field "n": ...`; stdin has
no name: `line 7: ...`). On a terminal a progress bar shows bytes (rich, imported only then);
the last line is a one-line summary of all inputs.
"""

from __future__ import annotations

import glob
import os
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shoal.cli.common import (SchemaModeOption, config_of, connect_or_exit, fail,
                              remote_of, stderr_is_tty)
from shoal.errors import PayloadError, ShoalError
from shoal.ingest.bulk import (IN_FLIGHT, MAX_SHOWN, STDIN, Input, InputUnreadableError,
                               ReadAhead, Tally, input_chunks, pipeline, send_chunks,
                               speculation_for, total_bytes)
from shoal.ingest.keys import MAX_IDEMPOTENCY_KEY

if TYPE_CHECKING:
    from shoal.client import Shoal
    from shoal.remote import RemoteShoal

# The documented memory bound (docs/cli.md "Memory"); tests/cli/test_ingest_memory.py holds
# the command to it. Chunks alive at once: IN_FLIGHT being coerced and committed plus one read
# ahead; each costs at most CHUNK_FACTOR times its size (the bytes, the decoded lines, the
# Arrow batch, the extent being written). BASE_MB: the interpreter with pyarrow and the
# catalog loaded (~160 MB), the catalog's extent cache (at most 64 MB) and allocator slack.
# Measured alone (2026-11-26): 198 MB at --chunk-mb 1, 371 at 8, 550 at 32, 793 at 64 (about
# 9.5 MB per chunk MB), whatever the input's length (20k to 300k lines: the same peak).
CHUNKS_ALIVE = IN_FLIGHT + 1
CHUNK_FACTOR = 5
BASE_MB = 280
# Freed blocks up to this size (and free memory up to twice it at a heap's top) stay in the
# process for the next chunk, Arrow's buffers included (shoal.native.tune_allocators): the
# chunks' buffers are the same sizes over and over, and handing them back cost a page fault
# per 4 KB on every chunk. Only for the command's own process (it exits; a host may not).
KEEP_FREED = 1 << 30
MEMORY_BOUND_HELP = (f"Peak memory stays under {BASE_MB} MB + {CHUNKS_ALIVE * CHUNK_FACTOR} x "
                     "--chunk-mb, whatever the size or number of inputs.")


def memory_bound_mb(chunk_mb: int) -> int:
    """The peak resident memory `shoal ingest --chunk-mb chunk_mb` stays under, in MB."""
    return BASE_MB + CHUNKS_ALIVE * CHUNK_FACTOR * chunk_mb


def resolve_inputs(args: list[str]) -> list[Input]:
    """Files, `-` and expanded globs, in order, each file once; a glob matching nothing, a
    missing file or `-` twice is a one-line error before anything is read."""
    inputs: list[Input] = []
    seen: set[str] = set()
    for arg in args:
        if arg == STDIN:
            if STDIN in seen:
                fail("stdin (-) may be named only once")
            seen.add(STDIN)
            inputs.append(Input(STDIN, None))
            continue
        if glob.has_magic(arg) and not os.path.exists(arg):
            names = sorted(n for n in glob.glob(arg, recursive=True) if os.path.isfile(n))
            if not names:
                fail(f"{arg}: no file matches")
        else:
            names = [arg]
        for name in names:
            try:
                real = os.path.realpath(name)
                size = os.path.getsize(name)
            except OSError as e:
                fail(f"{name}: {e.strerror or e}")
            if os.path.isdir(name):
                fail(f"{name}: is a directory (name its files, or a glob such as "
                     f"'{os.path.join(name, '*.ndjson')}')")
            if real not in seen:
                seen.add(real)
                inputs.append(Input(name, size))
    return inputs


def ingest_command(
    ctx: typer.Context,
    inputs: Annotated[list[str], typer.Argument(
        help="NDJSON files (optionally gzip), quoted globs such as 'logs/*.ndjson', "
             "or - for stdin", show_default=False)],
    table: Annotated[str, typer.Option("--table", "-t", help="Target table")],
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Apply these inputs exactly once: chunk i uses KEY#i (one "
                                  "input) or KEY#<absolute path>#i (several)")] = None,
    mode: Annotated[SchemaModeOption | None, typer.Option(
        help="What to do with unknown fields (default: the table's mode)")] = None,
    partial: Annotated[bool, typer.Option(help="Keep good lines, report bad ones")] = False,
    chunk_mb: Annotated[int, typer.Option(
        min=1, help=f"Chunk size in MB (one write-path request each). {MEMORY_BOUND_HELP}")
    ] = 32,
) -> None:
    """Ingest NDJSON into a table through the shared write path."""
    items = resolve_inputs(inputs)
    if idempotency_key is not None and len(items) > 1:
        longest = max(len(i.key_prefix(idempotency_key, True)) for i in items)
        if longest + 12 > MAX_IDEMPOTENCY_KEY:
            fail(f"--idempotency-key with {len(items)} inputs: the per-input keys "
                 f"(KEY#<absolute path>#i) would be longer than {MAX_IDEMPOTENCY_KEY} characters; "
                 "use a shorter key")
    from shoal.native import exit_now, own_cli_process

    own_process = own_cli_process()
    remote = remote_of(ctx)
    if remote is None:
        from shoal.ingest.nopandas import forgo_pandas
        from shoal.native import tune_allocators

        config_of(ctx).require_data_dir()
        if own_process:
            forgo_pandas()
            tune_allocators(KEEP_FREED, 2 * KEEP_FREED)
    t0 = time.perf_counter()
    progress = _Progress(table, total_bytes(items))
    chunks = ReadAhead(input_chunks(items, chunk_mb << 20, idempotency_key, progress.reading))
    literal = None if mode is None else mode.literal()
    speculation = None
    if remote is None:
        try:
            speculation = speculation_for(config_of(ctx).resolved_catalog_url, table, literal)
        finally:
            chunks.speculate(speculation)   # always: the reading thread waits for it
    else:
        chunks.speculate(None)              # the server coerces
    local: Shoal | None = None if remote is not None else connect_or_exit(ctx)
    db: RemoteShoal | Shoal | None = remote or local
    tally = Tally()
    try:
        with progress:
            if local is not None:
                send_chunks(local, chunks, tally, speculation, table=table, mode=literal,
                            partial=partial, on_landed=progress.advance)
            elif remote is not None:
                pipeline(remote.ingest_ndjson, chunks, tally, None, None, table=table,
                         mode=literal, partial=partial, on_landed=progress.advance)
    except InputUnreadableError as e:
        fail(str(e))
    except PayloadError as e:
        for le in e.errors[1:MAX_SHOWN]:     # the first one is the error line's own
            typer.echo(le.message, err=True)
        _landed_so_far(tally)
        fail(str(e))
    except ShoalError as e:
        _landed_so_far(tally)
        fail(str(e))
    finally:
        if db is not None:
            db.close()
    dt = time.perf_counter() - t0
    for le in tally.rejected:
        typer.echo(f"rejected {le.message}", err=True)
    for w in tally.warnings:
        typer.echo(f"warning: column {w.column}: {w.message}", err=True)
    _say_changed(tally)
    extra = "".join([
        f", {tally.replayed} chunk(s) replayed" if tally.replayed else "",
        f", new columns: {', '.join(tally.new_columns)}" if tally.new_columns else "",
        f", {tally.rejected_lines:,} line(s) rejected" if tally.rejected_lines else ""])
    files = f" from {len(items)} inputs" if len(items) > 1 else ""
    typer.echo(f"ingested {tally.rows} rows into {table} in {tally.chunks} chunk(s){files}: "
               f"snapshot {tally.last_snapshot}, {tally.read_bytes / dt / 1e6:.1f} MB/s{extra}")
    if tally.changed:
        fail(f"{len(tally.changed)} replayed chunk(s) differ from what their key applied "
             "(see above): the inputs changed since the earlier run; not every line is in "
             "the table")
    if own_process:
        exit_now(0)     # everything is committed and closed: skip the interpreter's teardown


def _say_changed(tally: Tally) -> None:
    for said in tally.changed:
        typer.echo(f"changed {said}", err=True)


def _landed_so_far(tally: Tally) -> None:
    _say_changed(tally)
    if tally.chunks:
        typer.echo(f"{tally.chunks} chunk(s) ({tally.rows} rows) had landed before the error",
                   err=True)


class _Progress:
    """Bytes done, as a rich bar on a terminal; nothing (and no rich import) otherwise."""

    def __init__(self, table: str, total: int | None) -> None:
        self._bar: Any = None
        self.table = table
        if not stderr_is_tty():
            return
        from rich.progress import (BarColumn, DownloadColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        from shoal.cli.common import progress_bar

        self._bar = progress_bar("[progress.description]{task.description}", BarColumn(),
                                 DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                                 transient=False)
        self._task = self._bar.add_task(f"ingest -> {table}", total=total)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def reading(self, item: Input) -> None:
        if self._bar is not None:
            from rich.markup import escape

            name = os.path.basename(item.arg) if item.arg != STDIN else "stdin"
            self._bar.update(self._task, description=escape(f"{name} -> {self.table}"))

    def advance(self, nbytes: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, nbytes)
