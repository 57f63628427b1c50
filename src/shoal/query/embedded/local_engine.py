"""The embedded query engine: a SELECT over pruned scans, in process (docs/architecture.md).

`LocalEngine.stream(statement, scans)` hands every planned scan to the engine as a stream
(`ScanStream`: shoal's own reader over only the projected columns of the blocks stages 1-2
kept, in the values Spark's DataSource yields, read lazily as the engine pulls, a few
extents ahead: v3 extents of the local store through `shoal.query.scan_fast`, which keeps
dictionary-coded strings as dictionaries, the others block by block through
`shoal.query.scan_read.read_tasks`), registered under the name its view says,
runs the statement `shoal.query.embedded.transpile` produced, and conforms the answer to what
Spark gives: Spark's column names, Spark's Arrow types (µs UTC timestamps, bigint sums,
`list<element: float>`), or `LocalMismatchError` when a column comes back in a type that is
not certainly Spark's.

The engine is an `Executor` (one small protocol, so another embedded engine can replace
it); `DuckDBExecutor` is the one chosen in BENCHMARKS.md (DuckDB vs DataFusion). Each
running statement has an in-memory database of its own (from a pool of idle ones), created
locked: no file or network access (`enable_external_access=false`), no extension installed
or loaded on demand, a `memory_limit` of its own (the per-query memory,
`Config.local_query_memory`), spilling past it only into its own directory under the data
directory's scratch area, up to `Config.local_query_spill_bytes`, and no setting a
statement could change (`lock_configuration=true`). A query only ever sees the Arrow inputs
registered on its own cursor, plus shoal's byte functions (the same vectorised code as the
Spark UDFs, reporting to the same processing log).

Memory: the inputs are streams, so a statement holds of them only what its operators keep
(an aggregate's groups, a sort's rows, a join's build side), inside DuckDB's memory limit
and spilled past it; the reader holds at most a few extents' projected columns ahead. A
statement that needs more than the limit plus the spill cap fails with `LocalMemoryError`
(Spark answers it in `auto`), and `stream` yields the answer batch by batch, so a caller that
stops reading (the caps) stops the statement.

Timestamps go in as zone-less µs values (UTC wall time, which is what Spark shows with its
UTC session) because DuckDB's zone-aware kernels are ~3x slower; every zone-less timestamp
of the answer is UTC again.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import pyarrow as pa

from shoal.errors import QueryError
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.query.scan_fast import BodyCache, FastScan
from shoal.query.scan_plan import ScanSpec
from shoal.query.scan_read import read_tasks, spec_arrow_schema
from shoal.query.embedded.transpile import NOT_IDENTICAL_MARK, LocalStatement
from shoal.storage.base import ObjectStore

logger = logging.getLogger("shoal.query.local")

class LocalExecutionError(QueryError):
    """The embedded engine failed on a statement (its own error message)."""

    code = "local_engine_error"


class LocalMismatchError(LocalExecutionError):
    """The embedded engine's answer is not certainly the one Spark gives."""

    code = "local_engine_mismatch"


class Executor(Protocol):
    """An in-process SQL engine over named Arrow tables."""

    name: str

    def run(self, sql: str, inputs: Mapping[str, Any], functions: Sequence[str],
            on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        """Answer `sql` (the engine's dialect) over `inputs`; `functions` names shoal's
        functions it uses. `on_cancel` is given a callable that interrupts the run (the
        caller's deadline calls it)."""
        ...

    def stream(self, sql: str, inputs: Mapping[str, Any], functions: Sequence[str],
               on_cancel: Callable[[Callable[[], None]], None] | None = None, *,
               batch_rows: int = 1 << 16) -> Generator[pa.RecordBatch, None, None]:
        """`run`, as record batches of at most `batch_rows` rows produced as the engine
        computes them (a generator: closing it early stops the statement and frees it)."""
        ...

    def close(self) -> None:
        """Free what the engine holds between statements."""
        ...


class LocalMemoryError(LocalExecutionError):
    """A statement needs more memory than the embedded engine grants one query
    (`local_query_memory`): its inputs as Arrow, or DuckDB's own working memory. In `auto`
    Spark answers it instead; with `engine=local` it is a 400."""

    code = "query_memory_exceeded"

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        super().__init__(f"the local engine needs more than {_fmt_bytes(limit)} for this "
                         f"query ({what}; SHOAL_LOCAL_QUERY_MEMORY); run it with "
                         "engine=auto or engine=spark, or narrow it")


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


DEFAULT_QUERY_MEMORY = 512 << 20
DEFAULT_SPILL_BYTES = 4 << 30
SPILL_PREFIX = "duckdb-"


def clear_stale_spills(spill_dir: str) -> None:
    """Remove the spill directories of processes that no longer run (a process killed
    before it could remove its own)."""
    try:
        names = os.listdir(spill_dir)
    except FileNotFoundError:
        return
    for name in names:
        if not name.startswith(SPILL_PREFIX):
            continue
        try:
            pid = int(name[len(SPILL_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid() or _alive(pid):
            continue
        logger.info("removing the spill directory of a process that is gone: %s", name)
        shutil.rmtree(os.path.join(spill_dir, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DuckDBExecutor:
    """DuckDB over Arrow tables and streams. Each running statement has a database of its
    own (from a small pool of idle ones: opening a database costs ~10 ms, taking an idle one
    a few µs), so `memory_limit`, which DuckDB applies per database, bounds that one
    statement's working memory. With `spill_dir`, a statement past it spills to a directory
    of its database's own under it, up to `spill_bytes` (DuckDB's
    `max_temp_directory_size`), and fails with `LocalMemoryError` beyond; without, spilling
    is off and the memory limit is the bound. At most `idle` databases are kept; `close()`
    closes them and removes their spill directories."""

    name = "duckdb"

    def __init__(self, *, threads: int = 2, query_memory: int = DEFAULT_QUERY_MEMORY,
                 idle: int = 4, processing_log: str | None = None,
                 spill_dir: str | None = None, spill_bytes: int = DEFAULT_SPILL_BYTES
                 ) -> None:
        import duckdb

        from shoal.query.byte_functions import ProcessingLog

        self._duckdb = duckdb
        self.threads = threads
        self.query_memory = query_memory
        self.spill_dir = spill_dir
        self.spill_bytes = spill_bytes
        self._max_idle = idle
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._opened = itertools.count()
        self._spills: dict[int, str] = {}       # id(database) -> its spill directory
        self._log = ProcessingLog(processing_log)
        if spill_dir is not None:
            os.makedirs(spill_dir, exist_ok=True)
            clear_stale_spills(spill_dir)
        self._give_back(self._open())       # opened now: a bad setting fails at start

    def _open(self) -> Any:
        temp = ""
        if self.spill_dir is not None:
            # one directory per database: DuckDB removes its own files when it closes
            temp = os.path.join(self.spill_dir, f"{SPILL_PREFIX}{os.getpid()}-"
                                                f"{next(self._opened)}")
        config: dict[str, str | bool | int | float | list[str]] = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": self.threads,
            "memory_limit": f"{self.query_memory}B",
            "temp_directory": temp,
            "lock_configuration": True,
        }
        if temp:
            config["max_temp_directory_size"] = f"{self.spill_bytes}B"
        db = self._duckdb.connect(config=config)
        if temp:
            self._spills[id(db)] = temp
        for fn in ("int_from_bytes", "bigint_from_bytes", "double_from_bytes"):
            self._register_function(db, fn)   # in the database: every cursor sees them
        return db

    def _take(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._open()

    def _give_back(self, db: Any) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(db)
                return
        self._close_db(db)

    def _close_db(self, db: Any) -> None:
        with self._lock:
            spill = self._spills.pop(id(db), "")
        db.close()
        if spill:
            shutil.rmtree(spill, ignore_errors=True)

    def close(self) -> None:
        """Close the idle databases and remove their spill directories."""
        with self._lock:
            idle, self._idle = self._idle, []
        for db in idle:
            self._close_db(db)

    def run(self, sql: str, inputs: Mapping[str, Any], functions: Sequence[str],
            on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        db = self._take()
        cursor = None
        try:
            cursor = self._cursor(db, on_cancel)
            for name, table in inputs.items():
                cursor.con.register(name, _zoneless(table))
            return cursor.con.execute(sql).to_arrow_table()
        except self._duckdb.Error as e:
            raise self._error(e) from None
        finally:
            if cursor is not None:
                cursor.close()
            self._give_back(db)

    def _cursor(self, db: Any,
                on_cancel: Callable[[Callable[[], None]], None] | None) -> _RunCursor:
        cursor = _RunCursor(db.cursor())
        if on_cancel is not None:
            on_cancel(cursor.interrupt)
        return cursor

    def stream(self, sql: str, inputs: Mapping[str, Any], functions: Sequence[str],
               on_cancel: Callable[[Callable[[], None]], None] | None = None, *,
               batch_rows: int = 1 << 16) -> Generator[pa.RecordBatch, None, None]:
        # DuckDB's Arrow reader over a streaming result: each read runs the pipeline only as
        # far as the next chunk, so the answer is never whole in memory (a blocking
        # operator, e.g. ORDER BY or an aggregate, still holds its own state, within the
        # database's memory limit). Closing the generator closes the reader and the cursor,
        # which stops the statement.
        db = self._take()
        cursor = None
        reader = None
        try:
            cursor = self._cursor(db, on_cancel)
            for name, table in inputs.items():
                cursor.con.register(name, _zoneless(table))
            reader = cursor.con.execute(sql).to_arrow_reader(batch_rows)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                yield batch
        except (self._duckdb.Error, pa.ArrowException, OSError) as e:
            # a failure while reading comes through the Arrow reader, as pyarrow's error for
            # the C stream's status (an OSError for "INTERRUPT Error: Interrupted!")
            raise self._error(e) from None
        finally:
            if reader is not None:
                reader.close()
            if cursor is not None:
                cursor.close()
            self._give_back(db)

    def _error(self, e: BaseException) -> LocalExecutionError:
        if isinstance(e, self._duckdb.OutOfMemoryException) or "Out of Memory Error" in str(e):
            if self.spill_dir is None:
                return LocalMemoryError(self.query_memory, "its working memory in the engine")
            return LocalMemoryError(self.query_memory, "its working memory in the engine, "
                                    f"and more than {_fmt_bytes(self.spill_bytes)} spilled "
                                    "to disk (SHOAL_LOCAL_QUERY_SPILL_BYTES)")
        return _local_error(e)

    def _register_function(self, con: Any, name: str) -> None:
        from duckdb import sqltypes as t

        from shoal.query import byte_functions as f

        decode, result = {"int_from_bytes": (f.int_from_bytes, t.INTEGER),
                          "bigint_from_bytes": (f.bigint_from_bytes, t.BIGINT),
                          "double_from_bytes": (f.double_from_bytes, t.DOUBLE)}[name]
        log = self._log

        def body(values: pa.ChunkedArray, order: pa.ChunkedArray) -> pa.Array:
            return decode(_one_chunk(values), _one_chunk(order), log=log)

        con.create_function(name, body, [t.BLOB, t.VARCHAR], result, type="arrow",
                            null_handling="special", side_effects=True)


class _RunCursor:
    """One run's own DuckDB cursor (`.con`) and its interrupt, which is safe to call at any
    time and again and again (the caller repeats it: an interrupt that lands before the run
    starts is lost), and a no-op once the cursor is closed."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self._lock = threading.Lock()
        self._closed = False

    def interrupt(self) -> None:
        with self._lock:
            if not self._closed:
                self.con.interrupt()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self.con.close()


def _local_error(e: BaseException) -> LocalExecutionError:
    """The shoal error of a DuckDB failure (its first line)."""
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if NOT_IDENTICAL_MARK in message:
        why = message.split(NOT_IDENTICAL_MARK, 1)[1].lstrip(": ").strip() or "a value"
        return LocalMismatchError(f"a value the local engine would not render as Spark does "
                                  f"({why})")
    return LocalExecutionError(f"local engine: {message[:2000]}")


def _one_chunk(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


def _zoneless_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(pa.timestamp(f.type.unit))
                      if pa.types.is_timestamp(f.type) and f.type.tz is not None else f
                      for f in schema])


def _zoneless_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    schema = _zoneless_schema(batch.schema)
    if schema.equals(batch.schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [c.cast(f.type) if not c.type.equals(f.type) else c
         for c, f in zip(batch.columns, schema, strict=True)], schema=schema)


def _zoneless(table: Any) -> Any:
    """An input as DuckDB gets it: a table with zone-less timestamps (a `ScanStream` is
    zone-less already)."""
    if not isinstance(table, pa.Table):
        return table
    schema = _zoneless_schema(table.schema)
    return table if schema.equals(table.schema) else table.cast(schema)


def answer_schema(statement: LocalStatement) -> pa.Schema:
    """The schema `conform` gives the statement's answer: known before it runs."""
    return pa.schema([pa.field(n, t) for n, t in zip(statement.names, statement.spark_types,
                                                     strict=True)])


def conform(answer: pa.Table, statement: LocalStatement) -> pa.Table:
    """`answer` with Spark's names and types, or `LocalMismatchError`."""
    if answer.num_columns != len(statement.names):
        raise LocalMismatchError(f"the local answer has {answer.num_columns} columns, "
                                 f"Spark's has {len(statement.names)}")
    arrays = []
    for i, want in enumerate(statement.spark_types):
        col = answer.column(i)
        arrays.append(_as_spark(col, want, statement.names[i]))
    return pa.Table.from_arrays(arrays, names=statement.names)


def _as_spark(col: pa.ChunkedArray, want: pa.DataType, name: str) -> pa.ChunkedArray:
    got = col.type
    if got.equals(want):
        return col
    ok = (
        (pa.types.is_timestamp(got) and pa.types.is_timestamp(want) and got.tz is None)
        or (pa.types.is_decimal(got) and got.scale == 0 and pa.types.is_int64(want))
        or (pa.types.is_large_string(got) and pa.types.is_string(want))
        or (pa.types.is_large_binary(got) and pa.types.is_binary(want))
        or (pa.types.is_list(got) and pa.types.is_list(want)
            and got.value_type.equals(want.value_type))
        or pa.types.is_null(got))
    if not ok:
        raise LocalMismatchError(f'column "{name}" came back as {got}, Spark gives {want}')
    try:
        if pa.types.is_timestamp(got):
            return col.cast(pa.timestamp(got.unit, tz="UTC")).cast(want)
        return col.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise LocalMismatchError(f'column "{name}" does not fit {want}: {e}') from None


class ScanStream:
    """One planned scan as a re-readable Arrow stream (`__arrow_c_stream__`): every read
    starts a fresh pass over the spec's surviving blocks, decoded lazily as the consumer
    pulls batches: by the block reader up to `threads` extents at a time (each pass holds
    at most that many extents' projected columns, plus the batch being consumed), by the
    fast read (`bodies` given) a few extents or blocks ahead on Arrow's or its own threads.
    The engine may read a view more than once (a self-join through a CTE); `on_bytes` then
    counts every pass."""

    def __init__(self, spec: ScanSpec, store: ObjectStore, formats: dict[str, SegmentFormat],
                 on_bytes: Callable[[int], None], threads: int, *,
                 bodies: BodyCache | None = None,
                 prefilter: BlockPredicate | None = None) -> None:
        self.spec = spec
        self.arrow_schema = spec_arrow_schema(spec)
        self._store = store
        self._formats = formats
        self._threads = max(1, threads)
        # with a footer cache, the v3 extents a store maps are read fast (`FastScan`)
        self._fast = None if bodies is None else FastScan(spec, store, bodies, prefilter)
        if self._fast is not None:
            self.arrow_schema = self._fast.arrow_schema(self.arrow_schema)
        lock = threading.Lock()

        def counted(n: int) -> None:
            with lock:
                on_bytes(n)
        self._count = counted

    def _extent(self, task: Any) -> list[pa.RecordBatch]:
        return [_zoneless_batch(b) for b in read_tasks(self.spec, [task], self._store,
                                                        self._formats, self._count)]

    def batches(self) -> Iterator[pa.RecordBatch]:
        """One pass over the blocks in task order: runs of v3 extents read fast
        (`FastScan`), the others by the block reader."""
        if self._fast is None:
            yield from self._blocks(self.spec.tasks())
            return
        for fast, slow in self._fast.runs():
            for batch in self._fast.read(fast, self._count, self._threads):
                yield _zoneless_batch(batch)
            yield from self._blocks(slow)

    def _blocks(self, tasks: list[Any]) -> Iterator[pa.RecordBatch]:
        """`tasks`' blocks through the block reader, read ahead by `threads` extents."""
        if self._threads == 1 or len(tasks) <= 1:
            for task in tasks:
                yield from self._extent(task)
            return
        pool = ThreadPoolExecutor(self._threads, thread_name_prefix="shoal-read")
        try:
            ahead: deque[Future[list[pa.RecordBatch]]] = deque()
            todo = iter(tasks)
            for task in itertools.islice(todo, self._threads):
                ahead.append(pool.submit(self._extent, task))
            while ahead:
                batches = ahead.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    ahead.append(pool.submit(self._extent, nxt))
                yield from batches
        finally:
            for f in ahead:
                f.cancel()
            pool.shutdown(wait=True)

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(_zoneless_schema(self.arrow_schema),
                                                 self.batches())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.reader().__arrow_c_stream__(requested_schema)


class LocalEngine:
    """Reads planned scans and answers a transpiled statement in process.

    The scans are handed to the engine as streams (`ScanStream`): nothing is read before
    the statement runs, and what the engine keeps of its inputs counts against its own
    memory limit (and spills past it)."""

    def __init__(self, store: ObjectStore, formats: dict[str, SegmentFormat],
                 executor: Executor, *, read_threads: int = 2, fast: bool = True) -> None:
        self.store = store
        self.formats = formats
        self.executor = executor
        self.read_threads = read_threads
        self.bodies = BodyCache() if fast else None

    def read_inputs(self, views: Sequence[str], specs: Sequence[ScanSpec],
                    counters: Sequence[Callable[[int], None]],
                    prefilters: Sequence[BlockPredicate | None] | None = None
                    ) -> dict[str, ScanStream]:
        """Every planned scan of one statement as a stream, by the view name it is
        registered as; `counters[i]` counts the stored bytes scan `i` reads, `prefilters[i]`
        is its pushed predicate, for late materialization (`FastScan`)."""
        filters = list(prefilters) if prefilters is not None else [None] * len(specs)
        return {view: ScanStream(spec, self.store, self.formats, count, self.read_threads,
                                 bodies=self.bodies, prefilter=prefilter)
                for view, spec, count, prefilter in zip(views, specs, counters, filters,
                                                        strict=True)}

    def read(self, spec: ScanSpec, on_bytes: Callable[[int], None]) -> pa.Table:
        """The whole planned scan as one table in the engines' shape."""
        stream = ScanStream(spec, self.store, self.formats, on_bytes, self.read_threads,
                            bodies=self.bodies)
        return pa.Table.from_batches(list(stream.batches()), schema=_zoneless_schema(
            stream.arrow_schema))

    def answer(self, statement: LocalStatement, inputs: Mapping[str, Any], *,
               on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        functions = sorted(statement.functions)
        return conform(self.executor.run(statement.sql, inputs, functions, on_cancel),
                       statement)

    def stream(self, statement: LocalStatement, inputs: Mapping[str, Any], *,
               on_cancel: Callable[[Callable[[], None]], None] | None = None,
               batch_rows: int = 1 << 16) -> Generator[pa.RecordBatch, None, None]:
        """`answer` as conformed record batches, as the engine produces them."""
        functions = sorted(statement.functions)
        batches = self.executor.stream(statement.sql, inputs, functions, on_cancel,
                                       batch_rows=batch_rows)
        try:
            for batch in batches:
                yield from conform(pa.Table.from_batches([batch]), statement).to_batches()
        finally:
            batches.close()     # stop the statement when the reader stops early
