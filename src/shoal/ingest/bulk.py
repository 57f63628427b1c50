"""Bulk NDJSON ingest of files and stdin: the read-ahead pipeline behind `shoal ingest`.

Each input is cut at line boundaries into chunks (`input_chunks`); each chunk is one
write-path request (atomic on its own). The first chunk is read, and with an embedded catalog
coerced, on a thread while the caller imports SQLAlchemy and opens the catalog (`ReadAhead`,
`Speculation`). Chunks flow through one pipeline across all inputs (`send_chunks`):
`IN_FLIGHT` (2) requests at once, so coercing the next overlaps writing and committing the
previous, and the chunk after them is read meanwhile. A chunk's coercion starts when the
previous chunk's has ended (`Staggered`): the first two chunks no longer share the cores to
coerce at once while the extent writer waits for either. Memory is bounded by those chunks,
not by the input.

Idempotency: with one input chunk i carries `K#i`; with several, chunk i of an input carries
`K#<absolute path of the input>#i` (`K#-#i` for stdin) (`Input.key_prefix`). What landed adds
up in a `Tally`; errors name the input and the line within it (`located`).

Imports are as lazy as the command's start-up needs: nothing here imports SQLAlchemy, the
catalog or the client; the coercion is imported when a chunk is first coerced.
"""

from __future__ import annotations

import gzip
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from shoal.errors import LineError, PayloadError, RequestError
from shoal.ingest.chunks import is_regular_file, iter_chunks, iter_file_chunks, record_lines

if TYPE_CHECKING:
    # Not at run time: `shoal.types` imports pyarrow, which `shoal ingest` imports only
    # after its first chunk is on its way (tests/cli/test_ingest_startup.py).
    from shoal.types.conventions import IngestConventions, IngestWarning
    from shoal.ingest._values import UnknownFieldPolicy
    from shoal.ingest.coerce import Coerced
    from shoal.ingest.write_path import Coercer, IngestAck, WritePath
    from shoal.types.schema import Schema, SchemaMode

IN_FLIGHT = 2  # write-path requests at once (each holds a chunk and its Arrow batch)
GZIP_MAGIC = b"\x1f\x8b"
MAX_SHOWN = 20  # bad or rejected lines kept to be shown (the error line counts them all)
STDIN = "-"


class InputUnreadableError(RequestError):
    """An input file that could not be opened (missing, unreadable)."""

    code = "input_unreadable"


class NdjsonSink(Protocol):
    """Where the chunks go: an open shoal (`shoal.client.Shoal`)."""

    @property
    def write_path(self) -> WritePath: ...

    def ingest_ndjson(self, name: str, body: bytes, **options: Any) -> IngestAck: ...


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


class OpenedInput:
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
            raise InputUnreadableError(f"{item.arg}: {e.strerror or e}") from e
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
class Chunk:
    item: Input
    body: bytes
    lines_before: int   # lines of the same input before this chunk
    key: str | None


def input_chunks(inputs: list[Input], chunk_bytes: int, idempotency_key: str | None,
                 on_open: Callable[[Input], None]) -> Iterator[Chunk]:
    """Every chunk of every input, in order; each input is open only while it is read
    (`on_open(input)` when it is opened). An input that cannot be opened raises
    `InputUnreadableError` where the chunks are iterated."""
    several = len(inputs) > 1
    for item in inputs:
        opened = OpenedInput(item)
        try:
            on_open(item)
            prefix = None if idempotency_key is None else item.key_prefix(idempotency_key,
                                                                           several)
            for i, (body, before) in enumerate(opened.chunks(chunk_bytes)):
                yield Chunk(item, body, before,
                            None if prefix is None else f"{prefix}#{i}")
        finally:
            opened.close()


def located(le: LineError, chunk: Chunk) -> LineError:
    """`le` (a line of the chunk) as a line of its input, named by the input."""
    shifted = le.shifted(chunk.lines_before)
    if not chunk.item.label:
        return shifted
    return LineError(shifted.line, shifted.field, f"{chunk.item.label} {shifted.message}")


@dataclass
class Tally:
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
    warnings: list[IngestWarning] = field(default_factory=list)  # the first one per column

    def add(self, ack: IngestAck, chunk: Chunk) -> None:
        self.rows += ack.rows
        self.chunks += 1
        self.replayed += ack.replayed
        if ack.replayed:
            self._check_replay(ack, chunk)
        self.new_columns.extend(c for c in ack.new_columns if c not in self.new_columns)
        self.rejected.extend(located(le, chunk)
                             for le in ack.rejected[:MAX_SHOWN - len(self.rejected)])
        self.rejected_lines += ack.rejected_count or 0
        for w in ack.warnings:
            if all(w.column != seen.column for seen in self.warnings):
                self.warnings.append(w.shifted(chunk.lines_before, chunk.item.label or ""))
        self.last_snapshot = max(self.last_snapshot or 0, ack.snapshot_id)

    def _check_replay(self, ack: IngestAck, chunk: Chunk) -> None:
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


class Staggered:
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


class Speculation:
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
                 unknown_fields: Sequence[str] | None = None,
                 conventions: IngestConventions | None = None) -> Coerced:
        from shoal.ingest.coerce import DEFAULT_MAX_ERRORS

        # The speculation ran under the default conventions: a table with others (its
        # properties are not in the peeked hint) coerces as usual.
        if (not self._taken and body is self._body and schema == self._schema
                and unknown == self._unknown and max_errors == DEFAULT_MAX_ERRORS
                and unknown_fields is None and conventions == _default_conventions()):
            self._taken = True
            try:
                return self._result.result()
            finally:
                self.release()
        return self._base(body, schema, unknown=unknown, ingest_time_ns=ingest_time_ns,
                          max_errors=max_errors, unknown_fields=unknown_fields,
                          conventions=conventions or _default_conventions())


def _default_conventions() -> IngestConventions:
    from shoal.types.conventions import DEFAULT_CONVENTIONS

    return DEFAULT_CONVENTIONS


class ReadAhead:
    """The chunks, the first of them read on a thread from the moment this is made, then
    coerced there if `speculate` hands it a `Speculation`: the command makes this before
    it imports and opens the catalog (about a third of its start-up, holding the GIL), while
    `os.pread` and most of a coercion release the GIL, so the first chunk is read and
    coerced by the time the write path asks for it. Only the first: the rest are read in the
    command's loop, each while the previous chunks are coerced and written (the memory bound
    counts one chunk read ahead)."""

    def __init__(self, chunks: Iterator[Chunk]) -> None:
        self._chunks = chunks
        self._first: Future[Chunk | None] = Future()
        self._speculation: Future[Speculation | None] = Future()
        threading.Thread(target=self._read_first, name="shoal-read-first", daemon=True).start()

    def speculate(self, speculation: Speculation | None) -> None:
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

    def __iter__(self) -> Iterator[Chunk]:
        first = self._first.result()
        if first is not None:
            yield first
            yield from self._chunks


def speculation_for(catalog_url: str, table: str, mode: SchemaMode | None
                    ) -> Speculation | None:
    """A `Speculation` for the first chunk, if the catalog is an embedded one that holds
    `table` (`shoal.catalog.peek`); imports the coercion (not the catalog) to make it."""
    from shoal.catalog.peek import peek_table

    hint = peek_table(catalog_url, table)
    if hint is None:
        return None
    from shoal.ingest.coerce import UNKNOWN_POLICY, coerce_ndjson

    schema, table_mode = hint
    return Speculation(coerce_ndjson, schema, UNKNOWN_POLICY[mode or table_mode])


def total_bytes(items: list[Input]) -> int | None:
    """What the progress bar counts to: None when an input is stdin or gzip."""
    sizes = [i.size for i in items]
    if None in sizes or any(is_gzip(i) for i in items):
        return None
    return sum(s for s in sizes if s is not None)


def send_chunks(db: NdjsonSink, chunks: Iterable[Chunk], tally: Tally,
                speculation: Speculation | None, *, table: str, mode: SchemaMode | None,
                partial: bool, on_landed: Callable[[int], None]) -> None:
    """Send the chunks, `IN_FLIGHT` at once, in order, adding what landed to `tally` and
    telling `on_landed` the bytes of each chunk that landed; a `PayloadError` names lines of
    its input."""
    from shoal.ingest.coerce import coerce_ndjson

    # The speculation coerced with `coerce_ndjson`: it stands in for that alone.
    staggered = Staggered(db.write_path.coercer or speculation or coerce_ndjson)
    db.write_path.coercer = staggered
    pipeline(db.ingest_ndjson, chunks, tally, staggered, speculation, table=table, mode=mode,
             partial=partial, on_landed=on_landed)


def pipeline(send: Callable[..., Any], chunks: Iterable[Chunk], tally: Tally,
             staggered: Staggered | None, speculation: Speculation | None, *, table: str,
             mode: SchemaMode | None, partial: bool, on_landed: Callable[[int], None]) -> None:
    """`send(table, body, mode=, partial=, idempotency_key=)` for every chunk, `IN_FLIGHT`
    at once, in order (see `send_chunks`); without `staggered` (a server coerces: `shoal
    ingest --url`) the requests only overlap."""
    with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        inflight: list[tuple[Future[IngestAck], Chunk]] = []
        sent = 0
        previous: Future[IngestAck] | None = None

        def settle(fut: Future[IngestAck], chunk: Chunk) -> None:
            try:
                ack = fut.result()
            except PayloadError as e:
                raise PayloadError([located(le, chunk) for le in e.errors],
                                   total_errors=e.total_errors) from e
            tally.add(ack, chunk)
            on_landed(len(chunk.body))

        try:
            for chunk in chunks:
                # The chunk is read before waiting for a slot: reading overlaps the work.
                while len(inflight) >= IN_FLIGHT:
                    settle(*inflight.pop(0))
                tally.read_bytes += len(chunk.body)
                if staggered is not None:
                    staggered.wait(sent, previous)
                previous = pool.submit(send, table, chunk.body, mode=mode,
                                       partial=partial, idempotency_key=chunk.key)
                if staggered is not None:
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


def is_gzip(item: Input) -> bool:
    if item.arg == STDIN:
        return False
    try:
        with open(item.arg, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False    # reported when the input is opened
