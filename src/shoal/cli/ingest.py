"""`shoal ingest <input>... --table t`: NDJSON files, globs or stdin through the shared write
path.

Inputs: each argument is a file (plain or gzip, sniffed by its magic bytes), `-` for stdin
(at most once), or a glob that shoal expands itself (`'logs/*.ndjson'`, quoted so the shell
leaves it alone; `**` spans directories), sorted by name; a glob matching nothing is an error,
and a file named twice is read once. Every input is resolved before anything is sent.

Each input is cut at line boundaries into chunks of about `--chunk-mb`; each chunk is one
write-path request (atomic on its own). The first chunk is read, and with an embedded catalog
coerced, on a thread while the command imports SQLAlchemy and opens the catalog
(`_ReadAhead`, `_Speculation`). Chunks flow through one pipeline across all inputs:
`IN_FLIGHT` (2) requests at once, so coercing the next overlaps writing and committing the
previous, and the chunk after them is read meanwhile. A chunk's coercion starts when the
previous chunk's has ended (`_Staggered`): the first two chunks no longer share the cores to
coerce at once while the extent writer waits for either. Memory is bounded by those chunks,
not by the input (`MEMORY_BOUND_HELP`; docs/cli.md).

Idempotency (`--idempotency-key K`): with one input chunk i carries `K#i`; with several, chunk
i of an input carries `K#<absolute path of the input>#i` (`K#-#i` for stdin), so re-running
the same command after a failure applies exactly the chunks that did not land, however the
inputs are ordered and whatever else a glob matches by then.

Errors name the input and the line within it (`b.ndjson.gz line 7: field "n": ...`; stdin has
no name: `line 7: ...`). On a terminal a progress bar shows bytes (rich, imported only then);
the last line is a one-line summary of all inputs.
"""

from __future__ import annotations

import glob
import gzip
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Annotated, Any, cast

import typer

from shoal.cli.common import SchemaModeOption, connect_or_exit, fail, stderr_is_tty
from shoal.errors import LineError, PayloadError, ShoalError
from shoal.ingest.chunks import is_regular_file, iter_chunks, iter_file_chunks, record_lines
from shoal.ingest.keys import MAX_IDEMPOTENCY_KEY

if TYPE_CHECKING:
    from shoal.client import Shoal
    from shoal.ingest._values import UnknownFieldPolicy
    from shoal.ingest.coerce import Coerced
    from shoal.ingest.write_path import Coercer, IngestAck
    from shoal.types.schema import Schema, SchemaMode

IN_FLIGHT = 2  # write-path requests at once (each holds a chunk and its Arrow batch)
GZIP_MAGIC = b"\x1f\x8b"
MAX_SHOWN = 20  # bad or rejected lines printed (the error line counts them all)
STDIN = "-"

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


@dataclass(frozen=True)
class Input:
    """One input of the command: `arg` as the user wrote it (or as a glob expanded it)."""

    arg: str
    size: int | None    # bytes on disk; None for stdin

    @property
    def label(self) -> str:
        """How errors name it: nothing for stdin (`line 7: ...`), else the path."""
        return "" if self.arg == STDIN else self.arg

    def key_prefix(self, key: str, several: bool) -> str:
        """Chunk i carries `<prefix>#i` (see the module docstring)."""
        if not several:
            return key
        return f"{key}#{STDIN if self.arg == STDIN else os.path.abspath(self.arg)}"


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


class _Opened:
    """An input opened as bytes (gunzipped when it starts with the gzip magic); `size` is
    what the progress bar counts (None for gzip and stdin: the unzipped size is unknown)."""

    def __init__(self, item: Input) -> None:
        self.size: int | None = None
        self._raw: IO[bytes] | None = None
        if item.arg == STDIN:
            self.stream: IO[bytes] = sys.stdin.buffer
            return
        try:
            raw = open(item.arg, "rb")  # noqa: SIM115 - closed by close()
        except OSError as e:
            fail(f"{item.arg}: {e.strerror or e}")
        self._raw = raw
        if raw.read(2) == GZIP_MAGIC:
            raw.seek(0)
            self.stream = cast(IO[bytes], gzip.open(raw))  # noqa: SIM115 - close()
        else:
            raw.seek(0)
            self.stream, self.size = raw, item.size

    def chunks(self, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
        """`iter_chunks` of the stream; a plain regular file by `os.pread` (same chunks)."""
        if self.stream is self._raw and is_regular_file(self._raw.fileno()):
            return iter_file_chunks(self._raw.fileno(), chunk_bytes)
        return iter_chunks(self.stream, chunk_bytes)

    def close(self) -> None:
        if self._raw is not None:
            if self.stream is not self._raw:
                self.stream.close()
            self._raw.close()


@dataclass(frozen=True)
class _Chunk:
    item: Input
    body: bytes
    lines_before: int   # lines of the same input before this chunk
    key: str | None


def _chunks(inputs: list[Input], chunk_bytes: int, idempotency_key: str | None,
            on_open: Any) -> Iterator[_Chunk]:
    """Every chunk of every input, in order; each input is open only while it is read."""
    several = len(inputs) > 1
    for item in inputs:
        opened = _Opened(item)
        try:
            on_open(item)
            prefix = None if idempotency_key is None else item.key_prefix(idempotency_key,
                                                                           several)
            for i, (body, before) in enumerate(opened.chunks(chunk_bytes)):
                yield _Chunk(item, body, before,
                             None if prefix is None else f"{prefix}#{i}")
        finally:
            opened.close()


def _located(le: LineError, chunk: _Chunk) -> LineError:
    """`le` (a line of the chunk) as a line of its input, named by the input."""
    shifted = le.shifted(chunk.lines_before)
    if not chunk.item.label:
        return shifted
    return LineError(shifted.line, shifted.field, f"{chunk.item.label} {shifted.message}")


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
    changed: list[str] = field(default_factory=list)   # replayed chunks the input changed in

    def add(self, ack: IngestAck, chunk: _Chunk) -> None:
        self.rows += ack.rows
        self.chunks += 1
        self.replayed += ack.replayed
        if ack.replayed:
            self._check_replay(ack, chunk)
        self.new_columns.extend(c for c in ack.new_columns if c not in self.new_columns)
        self.rejected.extend(_located(le, chunk)
                             for le in ack.rejected[:MAX_SHOWN - len(self.rejected)])
        self.rejected_lines += ack.rejected_count or 0
        self.last_snapshot = max(self.last_snapshot or 0, ack.snapshot_id)

    def _check_replay(self, ack: IngestAck, chunk: _Chunk) -> None:
        """A replayed chunk must hold the lines its first run answered for (rows plus
        rejected lines): else the input changed since that run (a file still being written
        ends in a shorter last chunk, cut at a different place once it grew) and the lines
        that differ were not applied by either run. Said, not guessed around: a new key
        would apply the old lines twice."""
        then = ack.rows + (ack.rejected_count or 0)
        lines = record_lines(chunk.body)
        if len(lines) == then:
            return
        first = chunk.lines_before + 1
        where = f"{chunk.item.label} " if chunk.item.label else ""
        said = (f"{where}line {first}: the chunk starting here was applied by an earlier run "
                f"with this idempotency key ({chunk.key}) as {then} line(s); it now holds "
                f"{len(lines)}: the input changed since that run")
        if len(lines) > then:
            said += (f"; its lines {chunk.lines_before + int(lines[then]) + 1} to "
                     f"{chunk.lines_before + int(lines[-1]) + 1} ({len(lines) - then} record(s), "
                     "if the first ones are those applied) were not applied")
        self.changed.append(said)


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
    from shoal.ingest.nopandas import forgo_pandas
    from shoal.native import exit_now, own_cli_process, tune_allocators

    own_process = own_cli_process()
    if own_process:
        forgo_pandas()
        tune_allocators(KEEP_FREED, 2 * KEEP_FREED)
    t0 = time.perf_counter()
    progress = _Progress(table, _total_bytes(items))
    chunks = _ReadAhead(_chunks(items, chunk_mb << 20, idempotency_key, progress.reading))
    literal = None if mode is None else mode.literal()
    speculation = None
    try:
        speculation = _speculation(ctx, table, literal)
    finally:
        chunks.speculate(speculation)   # always: the reading thread waits for it
    db = connect_or_exit(ctx)
    tally = _Tally()
    try:
        _ingest(db, chunks, progress, tally, speculation, table=table, mode=literal,
                partial=partial)
    except PayloadError as e:
        for le in e.errors[:MAX_SHOWN]:
            typer.echo(le.message, err=True)
        _landed_so_far(tally)
        fail(str(e))
    except ShoalError as e:
        _landed_so_far(tally)
        fail(str(e))
    finally:
        db.close()
    dt = time.perf_counter() - t0
    for le in tally.rejected:
        typer.echo(f"rejected {le.message}", err=True)
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


def _say_changed(tally: _Tally) -> None:
    for said in tally.changed:
        typer.echo(f"changed {said}", err=True)


def _landed_so_far(tally: _Tally) -> None:
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


class _Staggered:
    """The write path's coercer for this command: chunk i+1's coercion starts once chunk
    i's has ended, or chunk i's request has (a replay coerces nothing). Two chunks coercing
    at once shared the two cores and both ended late while the extent writer waited for the
    first (a timeline of 32 MB chunks: ~95 ms each together, ~45 ms alone)."""

    def __init__(self, coerce: Coercer) -> None:
        self._coerce = coerce
        self._ended = 0
        self._cond = threading.Condition()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._coerce(*args, **kwargs)
        finally:
            with self._cond:
                self._ended += 1
                self._cond.notify_all()

    def wake(self, _request: object = None) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait(self, coercions: int, previous: Future[IngestAck] | None) -> None:
        """Until `coercions` coercions have ended or the `previous` request has."""
        with self._cond:
            self._cond.wait_for(lambda: self._ended >= coercions
                                or previous is None or previous.done())


class _Speculation:
    """The first chunk coerced against the table's schema as `shoal.catalog.peek` read it
    before the catalog was open, handed to the write path only for exactly that call: the
    same body, the schema the catalog loaded equal to the hint, the same unknown-field
    policy and error cap, no `unknown_fields` (an evolving second pass). Any other call, or
    a mismatch, coerces as usual (`base`); so a hint gone stale costs one coercion, never a
    wrong row. The write path's `ingest_time_ns` is not compared: the speculative one is
    taken when its coercion starts, during this same command."""

    def __init__(self, base: Coercer, schema: Schema, unknown: UnknownFieldPolicy) -> None:
        self._base = base
        self._schema = schema
        self._unknown = unknown
        self._body: bytes | None = None
        self._result: Future[Coerced] = Future()
        self._taken = False

    def run(self, body: bytes) -> None:
        """Coerce `body` (the first chunk) now, on the reading thread; `expect(body)` first."""
        from shoal.ingest.coerce import DEFAULT_MAX_ERRORS

        try:
            self._result.set_result(self._base(body, self._schema, unknown=self._unknown,
                                               ingest_time_ns=time.time_ns(),
                                               max_errors=DEFAULT_MAX_ERRORS))
        except BaseException as e:      # noqa: BLE001 - raised to the write path's call
            self._result.set_exception(e)
        if self._taken:                 # the first chunk's request ended without it
            self.release()

    def expect(self, body: bytes) -> None:
        """`body` is the first chunk: the one call with it takes what `run` makes."""
        self._body = body

    def release(self, _request: object = None) -> None:
        """Drop the chunk and its coercion (taken, or of no use any more: the first chunk's
        request has ended), so they do not outlive it: the memory bound counts them once."""
        self._taken = True
        self._body = None
        if self._result.done():
            self._result = Future()

    def __call__(self, body: bytes, schema: Schema, *, unknown: UnknownFieldPolicy,
                 ingest_time_ns: int, max_errors: int = 100,
                 unknown_fields: Sequence[str] | None = None) -> Coerced:
        from shoal.ingest.coerce import DEFAULT_MAX_ERRORS

        if (not self._taken and body is self._body and schema == self._schema
                and unknown == self._unknown and max_errors == DEFAULT_MAX_ERRORS
                and unknown_fields is None):
            self._taken = True
            try:
                return self._result.result()
            finally:
                self.release()
        return self._base(body, schema, unknown=unknown, ingest_time_ns=ingest_time_ns,
                          max_errors=max_errors, unknown_fields=unknown_fields)


class _ReadAhead:
    """The chunks, the first of them read on a thread from the moment this is made, then
    coerced there if `speculate` hands it a `_Speculation`: the command makes this before
    it imports and opens the catalog (about a third of its start-up, holding the GIL), while
    `os.pread` and most of a coercion release the GIL, so the first chunk is read and
    coerced by the time the write path asks for it. Only the first: the rest are read in the
    command's loop, each while the previous chunks are coerced and written (the memory bound
    counts one chunk read ahead)."""

    def __init__(self, chunks: Iterator[_Chunk]) -> None:
        self._chunks = chunks
        self._first: Future[_Chunk | None] = Future()
        self._speculation: Future[_Speculation | None] = Future()
        threading.Thread(target=self._read_first, name="shoal-read-first", daemon=True).start()

    def speculate(self, speculation: _Speculation | None) -> None:
        """What to coerce the first chunk with once it is read (None: nothing). Call once."""
        self._speculation.set_result(speculation)

    def _read_first(self) -> None:
        try:
            first = next(self._chunks, None)
        except BaseException as e:      # noqa: BLE001 - raised where the chunks are iterated
            self._first.set_exception(e)
            return
        # The command says before it opens the catalog, so before it iterates: no delay.
        speculation = self._speculation.result()
        if first is not None and speculation is not None:
            speculation.expect(first.body)
        self._first.set_result(first)
        if first is not None and speculation is not None:
            speculation.run(first.body)

    def __iter__(self) -> Iterator[_Chunk]:
        first = self._first.result()
        if first is not None:
            yield first
            yield from self._chunks


def _speculation(ctx: typer.Context, table: str, mode: SchemaMode | None
                 ) -> _Speculation | None:
    """A `_Speculation` for the first chunk, if the catalog is an embedded one that holds
    `table` (`shoal.catalog.peek`); imports the coercion (not the catalog) to make it."""
    from shoal.catalog.peek import peek_table
    from shoal.cli.common import config_of

    hint = peek_table(config_of(ctx).resolved_catalog_url, table)
    if hint is None:
        return None
    from shoal.ingest.coerce import UNKNOWN_POLICY, coerce_ndjson

    schema, table_mode = hint
    return _Speculation(coerce_ndjson, schema, UNKNOWN_POLICY[mode or table_mode])


def _total_bytes(items: list[Input]) -> int | None:
    """What the progress bar counts to: None when an input is stdin or gzip."""
    sizes = [i.size for i in items]
    if None in sizes or any(_is_gzip(i) for i in items):
        return None
    return sum(s for s in sizes if s is not None)


def _ingest(db: Shoal, chunks: Iterable[_Chunk], progress: _Progress, tally: _Tally,
            speculation: _Speculation | None, *, table: str, mode: SchemaMode | None,
            partial: bool) -> None:
    """Send the chunks, `IN_FLIGHT` at once, in order, adding what landed to `tally`; a
    `PayloadError` names lines of its input."""
    from shoal.ingest.coerce import coerce_ndjson

    # The speculation coerced with `coerce_ndjson`: it stands in for that alone.
    staggered = _Staggered(db.write_path.coercer or speculation or coerce_ndjson)
    db.write_path.coercer = staggered
    with progress, ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        inflight: list[tuple[Future[IngestAck], _Chunk]] = []
        sent = 0
        previous: Future[IngestAck] | None = None

        def settle(fut: Future[IngestAck], chunk: _Chunk) -> None:
            try:
                ack = fut.result()
            except PayloadError as e:
                raise PayloadError([_located(le, chunk) for le in e.errors],
                                   total_errors=e.total_errors) from e
            tally.add(ack, chunk)
            progress.advance(len(chunk.body))

        try:
            for chunk in chunks:
                # The chunk is read before waiting for a slot: reading overlaps the work.
                while len(inflight) >= IN_FLIGHT:
                    settle(*inflight.pop(0))
                tally.read_bytes += len(chunk.body)
                staggered.wait(sent, previous)
                previous = pool.submit(db.ingest_ndjson, table, chunk.body, mode=mode,
                                       partial=partial, idempotency_key=chunk.key)
                previous.add_done_callback(staggered.wake)
                if speculation is not None and sent == 0:
                    previous.add_done_callback(speculation.release)
                inflight.append((previous, chunk))
                sent += 1
            while inflight:
                settle(*inflight.pop(0))
        finally:
            # On an error, the requests already sent still finish (each is atomic): count
            # what landed so the error can say how far the run got.
            for fut, chunk in inflight:
                if fut.exception() is None:
                    tally.add(fut.result(), chunk)


def _is_gzip(item: Input) -> bool:
    if item.arg == STDIN:
        return False
    try:
        with open(item.arg, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False    # reported when the input is opened
