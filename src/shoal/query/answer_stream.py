"""Streamed answers: a SELECT planned first (its schema known before any row is read), then
run as record batches that leave while the engine still produces them (Flight SQL).

`plan_stream(engine, sql)` analyses the statement, plans its scans (stages 1-2) and picks the
engine exactly as `QueryEngine.execute` does, and works out the answer's Arrow schema without
reading a row: the embedded engine's from the transpiled statement (Spark's names and types,
`shoal.query.embedded.local_engine.answer_schema`), Spark's from the analysed DataFrame (no
job runs).
`QueryStream(engine, plan, limits)` then runs it:

- The embedded engine streams for real: the planned scans are read (bounded by
  `local_scan_max_bytes`, as for `execute`), and the answer comes out of DuckDB's Arrow
  reader batch by batch, each leaving before the next is computed.
- Spark does not stream here: its Arrow collection (`DataFrame.toArrow`, i.e.
  `_collect_as_arrow`) receives the partitions out of order and learns their order only at
  the end, so it holds the whole answer in the driver; `toLocalIterator` streams partition
  by partition but as pickled Rows (a Python object per value, the cost Flight exists to
  avoid). So a Spark answer is collected under the row cap (Spark collects at most
  `max_rows + 1` rows, and `spark.driver.maxResultSize` bounds its bytes), then sent in
  batches.
- Bounds: the same `QueryLimits` as `execute`. The caps end the stream at the longest
  prefix within `max_rows` and `max_bytes` (`truncated` names the cap, as
  `QueryResult.truncated`); the deadline covers the whole stream, the client's reading
  included; `cancel()` (any thread) interrupts the engine. Either ends the stream with
  `QueryTimeoutError` / `QueryCancelledError`.
- In `auto`, a statement the embedded engine fails on before its first batch is answered by
  Spark, as in `execute`; once a batch has left, a failure ends the stream with its error.
- Closing the stream early (`close()`, or dropping it) stops the engine's work and frees its
  resources.

Every batch has exactly `plan.schema` (the announced schema), whichever engine answered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shoal.query.cancel import _Run
from shoal.query.engine import Planned, QueryEngine, QueryStats, read_local_inputs
from shoal.query.limits import QueryLimits, cap_table
from shoal.query.routing import EngineMode, Route, engine_mode, handed_off

log = logging.getLogger("shoal.query")

BATCH_ROWS = 1 << 16        # rows per batch asked of the embedded engine


@dataclass
class StreamPlan:
    """A SELECT planned for `QueryStream`: its scans, its engine and its answer's schema."""

    sql: str
    prune: bool
    mode: EngineMode
    planned: Planned
    route: Route
    schema: pa.Schema

    @property
    def stats(self) -> QueryStats:
        return self.planned.stats


def plan_stream(engine: QueryEngine, sql: str, *, prune: bool = True,
                mode: str | None = None) -> StreamPlan:
    """Plan a SELECT (or WITH) for streaming, reading no rows. Raises what `execute` raises
    for a statement that cannot run (unknown table, bad SQL, `local` refused...)."""
    resolved = engine_mode(mode, engine.db.config.query_engine)
    planned = engine._scans(sql, prune=prune)
    route = engine._route(planned, resolved)
    if route.engine == "local":
        from shoal.query.embedded.local_engine import answer_schema

        assert route.statement is not None
        schema = answer_schema(route.statement)
    else:
        schema = _spark_schema(engine, planned)
    planned.stats.engine, planned.stats.engine_reason = route.engine, route.reason
    return StreamPlan(sql, prune, resolved, planned, route, schema)


def _spark_schema(engine: QueryEngine, planned: Planned) -> pa.Schema:
    """The Arrow schema Spark's answer has (`DataFrame.toArrow`'s), from analysis only."""
    from pyspark.sql.pandas.types import to_arrow_schema

    with _Run(None) as run:
        df, _, done = engine._plan(planned.sql, prune=True, planned=planned, run=run)
        try:
            return to_arrow_schema(df.schema, timezone="UTC",
                                   error_on_duplicated_field_names_in_struct=True)
        except Exception as e:
            raise run.failure(e) from e
        finally:
            done()


class QueryStream:
    """One planned SELECT running as a stream of record batches (see the module docstring).

    Iterate it once. `truncated`, `rows` and `stats` are final once the iteration ends;
    `finished` is set then (also when it failed, was cancelled or closed)."""

    def __init__(self, engine: QueryEngine, plan: StreamPlan, limits: QueryLimits) -> None:
        self.schema = plan.schema
        self.stats = plan.stats
        self.truncated: str | None = None
        self.rows = 0
        self.nbytes = 0
        self.finished = threading.Event()
        self._engine = engine
        self._plan = plan
        self._limits = limits
        self._run = _Run(limits.timeout_s, cancellable=True)
        self._batches = self._produce()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._batches

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)

    def cancel(self) -> bool:
        """Interrupt the running statement (any thread); False if it had already ended."""
        if self.finished.is_set():
            return False
        return self._run.cancel()

    @property
    def cancelled(self) -> bool:
        return self._run.cancelled.is_set()

    def close(self) -> None:
        """Stop early: the engine's work is interrupted and its resources freed."""
        self._batches.close()

    def wait_stopped(self, guard_s: float) -> bool:
        """After the stream ended: wait until none of its Spark tasks still runs."""
        return self._run.wait_stopped(guard_s)

    def stopped(self) -> bool:
        """Whether none of its Spark tasks runs now."""
        return self._run.stopped()

    def final_stats(self) -> dict[str, Any]:
        """The answer's stats as `/v1/query` gives them, with `truncated` (and
        `truncated_by`), `rows` and `bytes` sent."""
        stats: dict[str, Any] = self.stats.to_json()
        stats["truncated"] = self.truncated is not None
        if self.truncated is not None:
            stats["truncated_by"] = self.truncated
        stats["rows"] = self.rows
        stats["bytes"] = self.nbytes
        return stats

    # ---- producing -----------------------------------------------------------------------
    def _produce(self) -> Generator[pa.RecordBatch, None, None]:
        try:
            with self._run as run:
                run.check()
                yield from self._answer(run)
        finally:
            self.finished.set()

    def _answer(self, run: _Run) -> Generator[pa.RecordBatch, None, None]:
        from shoal.query.embedded.local_engine import LocalExecutionError

        plan = self._plan
        if plan.route.engine == "local":
            sent = False
            try:
                for batch in self._capped(self._local(run), run):
                    sent = True
                    yield batch
                return
            except LocalExecutionError as e:
                run.check()             # interrupted by the deadline or a cancel
                if plan.mode == "local" or sent:
                    raise
                log.info("local engine handed a streamed statement to Spark: %s", e)
                route = handed_off(plan.route, e)
                planned = self._engine._scans(plan.sql, prune=plan.prune)
                planned.stats.engine, planned.stats.engine_reason = route.engine, route.reason
                self.stats = planned.stats
                yield from self._spark(planned, run)
                return
        yield from self._spark(plan.planned, run)

    def _local(self, run: _Run) -> Generator[pa.RecordBatch, None, None]:
        engine, plan = self._engine, self._plan
        local = engine.local
        assert plan.route.statement is not None
        inputs = read_local_inputs(local, plan.planned, plan.route.statement)
        run.check()
        yield from local.stream(plan.route.statement, inputs, on_cancel=run.on_cancel,
                                batch_rows=BATCH_ROWS)

    def _capped(self, source: Generator[pa.RecordBatch, None, None], run: _Run
                ) -> Generator[pa.RecordBatch, None, None]:
        """`source`'s batches within the caps; the first batch over one is cut to the
        longest prefix that fits, and the source is closed (the engine stops)."""
        limits = self._limits
        try:
            for batch in source:
                run.check()
                if batch.num_rows == 0:
                    continue
                kept, cut = cap_table(
                    pa.Table.from_batches([batch]),
                    max_rows=None if limits.max_rows is None else limits.max_rows - self.rows,
                    max_bytes=(None if limits.max_bytes is None
                               else limits.max_bytes - self.nbytes))
                for part in kept.to_batches():
                    if part.num_rows:
                        yield self._sent(part)
                if cut is not None:
                    self.truncated = cut
                    return
        finally:
            source.close()

    def _spark(self, planned: Planned, run: _Run) -> Generator[pa.RecordBatch, None, None]:
        engine = self._engine
        df, _, done = engine._plan(planned.sql, prune=self._plan.prune, planned=planned,
                                   run=run)
        try:
            table, self.truncated = engine._collect(df, self._limits, run)
        finally:
            done()
            run.detach()    # the batches may be sent from other threads
        for batch in table.to_batches():
            run.check()
            if batch.num_rows:
                yield self._sent(batch)

    def _sent(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` in the announced schema, counted."""
        if not batch.schema.equals(self.schema):
            arrays = [col if col.type.equals(f.type) else col.cast(f.type)
                      for col, f in zip(batch.columns, self.schema, strict=True)]
            batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.rows += batch.num_rows
        self.nbytes += batch.nbytes
        return batch
