"""The embedded query engine: a SELECT over small pruned scans, in process (docs/architecture.md).

`LocalEngine.answer(statement, scans)` reads every planned scan with shoal's own reader
(`shoal.query.shapes.read_tasks`: only the projected columns, the blocks stages 1-2 kept, in
exactly the shapes Spark's DataSource yields), registers each as the in-memory table its
view name says, runs the statement `shoal.query.transpile` produced, and conforms the answer
to what Spark gives: Spark's column names, Spark's Arrow types (µs UTC timestamps, bigint
sums, `list<element: float>`), or `LocalMismatchError` when a column comes back in a type
that is not certainly Spark's.

The engine is an `Executor` (one small protocol, so another embedded engine can replace
it); `DuckDBExecutor` is the one chosen by `bench/bench_engines.py` (BENCHMARKS.md). Its one
in-memory database is created locked: no file or network access
(`enable_external_access=false`), no extension installed or loaded on demand, and no
setting a statement could change (`lock_configuration=true`). A query only ever sees the
Arrow tables registered on its own cursor, plus shoal's byte functions (the same
vectorised code as the Spark UDFs, reporting to the same processing log).

Timestamps go in as zone-less µs values (UTC wall time, which is what Spark shows with its
UTC session) because DuckDB's zone-aware kernels are ~3x slower; every zone-less timestamp
of the answer is UTC again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import pyarrow as pa

from shoal.errors import QueryError
from shoal.format.base import SegmentFormat
from shoal.query.scanspec import ScanSpec
from shoal.query.shapes import read_tasks, spec_arrow_schema
from shoal.query.transpile import NOT_IDENTICAL_MARK, LocalStatement
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

    def run(self, sql: str, inputs: Mapping[str, pa.Table], functions: Sequence[str],
            on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        """Answer `sql` (the engine's dialect) over `inputs`; `functions` names shoal's
        functions it uses. `on_cancel` is given a callable that interrupts the run (the
        caller's deadline calls it)."""
        ...

    def stream(self, sql: str, inputs: Mapping[str, pa.Table], functions: Sequence[str],
               on_cancel: Callable[[Callable[[], None]], None] | None = None, *,
               batch_rows: int = 1 << 16) -> Generator[pa.RecordBatch, None, None]:
        """`run`, as record batches of at most `batch_rows` rows produced as the engine
        computes them (a generator: closing it early stops the statement and frees it)."""
        ...


class DuckDBExecutor:
    name = "duckdb"

    def __init__(self, *, threads: int = 2, memory_limit: str = "2GB",
                 processing_log: str | None = None) -> None:
        import duckdb

        self._duckdb = duckdb
        self._db = duckdb.connect(config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": threads,
            "memory_limit": memory_limit,
            "lock_configuration": True,
        })
        self._lock = threading.Lock()
        from shoal.query.functions import ProcessingLog

        self._log = ProcessingLog(processing_log)
        for fn in ("int_from_bytes", "bigint_from_bytes", "double_from_bytes"):
            self._register_function(self._db, fn)   # in the database: every cursor sees them

    def run(self, sql: str, inputs: Mapping[str, pa.Table], functions: Sequence[str],
            on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        cursor = self._cursor(on_cancel)
        try:
            for name, table in inputs.items():
                cursor.con.register(name, _zoneless(table))
            return cursor.con.execute(sql).to_arrow_table()
        except self._duckdb.Error as e:
            raise _local_error(e) from None
        finally:
            cursor.close()

    def _cursor(self, on_cancel: Callable[[Callable[[], None]], None] | None) -> _RunCursor:
        with self._lock:            # cursor() on the shared database is not thread-safe
            cursor = _RunCursor(self._db.cursor())
        if on_cancel is not None:
            on_cancel(cursor.interrupt)
        return cursor

    def stream(self, sql: str, inputs: Mapping[str, pa.Table], functions: Sequence[str],
               on_cancel: Callable[[Callable[[], None]], None] | None = None, *,
               batch_rows: int = 1 << 16) -> Generator[pa.RecordBatch, None, None]:
        # DuckDB's Arrow reader over a streaming result: each read runs the pipeline only as
        # far as the next chunk, so the answer is never whole in memory (a blocking
        # operator, e.g. ORDER BY or an aggregate, still holds its own state).
        cursor = self._cursor(on_cancel)
        reader = None
        try:
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
            raise _local_error(e) from None
        finally:
            if reader is not None:
                reader.close()
            cursor.close()

    def _register_function(self, con: Any, name: str) -> None:
        from duckdb import sqltypes as t

        from shoal.query import functions as f

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
        return LocalMismatchError("a value the local engine would not render as Spark does "
                                  "(a JSON number or object)")
    return LocalExecutionError(f"local engine: {message[:2000]}")


def _one_chunk(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


def _zoneless(table: pa.Table) -> pa.Table:
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            table = table.set_column(i, f.name, table.column(i).cast(pa.timestamp(f.type.unit)))
    return table


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


class LocalEngine:
    """Reads planned scans and answers a transpiled statement in process."""

    def __init__(self, store: ObjectStore, formats: dict[str, SegmentFormat],
                 executor: Executor, *, read_threads: int = 2) -> None:
        self.store = store
        self.formats = formats
        self.executor = executor
        self.read_threads = read_threads

    def read(self, spec: ScanSpec, on_bytes: Callable[[int], None]) -> pa.Table:
        """The whole planned scan as one table in the engines' shape."""
        schema = spec_arrow_schema(spec)
        tasks = spec.tasks()
        if len(tasks) <= 1 or self.read_threads <= 1:
            batches = list(read_tasks(spec, tasks, self.store, self.formats, on_bytes))
        else:
            lock = threading.Lock()

            def counted(n: int) -> None:
                with lock:
                    on_bytes(n)

            def one(task: Any) -> list[pa.RecordBatch]:
                return list(read_tasks(spec, [task], self.store, self.formats, counted))

            with ThreadPoolExecutor(self.read_threads, thread_name_prefix="shoal-read") as p:
                batches = [b for part in p.map(one, tasks) for b in part]
        return pa.Table.from_batches(batches, schema=schema)

    def answer(self, statement: LocalStatement, inputs: Mapping[str, pa.Table], *,
               on_cancel: Callable[[Callable[[], None]], None] | None = None) -> pa.Table:
        functions = sorted(statement.functions)
        return conform(self.executor.run(statement.sql, inputs, functions, on_cancel),
                       statement)

    def stream(self, statement: LocalStatement, inputs: Mapping[str, pa.Table], *,
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
