"""One statement of any protocol front end (`/v1/query`, the Kusto endpoint, Flight SQL)
run under the server's bounds: blocking (`run_statement`, `run_bounded`), in a worker
thread (`run_on_engine`), or planned now and streamed later (`plan_statement`,
`open_stream`).

Scopes: SELECT/EXPLAIN/DESCRIBE/SHOW need `query` (the caller checks it); CREATE/ALTER need
`admin`, decided on the statement's tokens (`shoal.query.guard.classify`), so a leading
comment hides nothing. Anything but those statements is refused by the guard (400
`forbidden_query`). The statement runs in a worker thread on the server's one warm Spark
session.

Bounded cost (settings of `shoal.config.Config`):
- `query_concurrency`: statements that need Spark (SELECT, WITH, EXPLAIN) take one of that
  many slots; with none free the answer is 429 `too_many_queries` + `Retry-After: 1` at
  once (no queue). DDL, DESCRIBE and SHOW touch only the catalog and take no slot. One
  client (its token, or its address without tokens) holds at most
  `query_concurrency_per_client` slots (default all but one): 429 past that too.
- `query_timeout_s`: past it the statement's Spark jobs are cancelled and the answer is
  400 `query_timeout` naming the limit (400, not 408: 408 means the client was slow to send
  its request, and clients may resend a 408 as is; the same statement would time out again).
  The slot of a statement that failed, timed out or was cancelled is freed only once its
  work has stopped: the embedded engine's run has returned, and Spark's status tracker
  shows no task of its job tag running (a task in a loop that ignores interruption, such as
  Java's regex matching, runs on after its job is cancelled); the answer leaves at once.
- A statement whose `CancelHandle` is cancelled (its client went away) stops the same way:
  Spark jobs cancelled, the embedded run interrupted, the slot freed.
- `query_max_rows`, `query_max_bytes`: the answer holds at most that many rows and bytes of
  Arrow data, a prefix of the full answer; `stats` then carry `"truncated": true` and
  `"truncated_by"` (the setting that cut it), in the JSON document and in `X-Shoal-Stats`
  (`"truncated": false` otherwise). A result Spark refuses to collect at all (beyond
  `spark.driver.maxResultSize`, twice the byte cap) is 400 `result_too_large`.
- A dead, wedged or restarting Spark session: 503 `engine_unavailable` + Retry-After, for
  new statements and for those running when it died.

Streamed answers (Flight SQL, `shoal.frontends.flightsql.server`): `plan_statement` plans a
query instead of running it (a slot only while it plans) and runs anything else as
`run_statement` does; `open_stream` then runs the plan as a `BoundedStream`
(`shoal.query.answer_stream.QueryStream` under a slot held until the stream ends, fails or
is abandoned; the same timeout and caps, applied to the whole stream).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from shoal.errors import EngineUnavailableError
from shoal.http.state import ServerState
from shoal.query.cancel import CancelHandle
from shoal.query.guard import classify

if TYPE_CHECKING:
    import pyarrow as pa

    from shoal.query.engine import QueryResult
    from shoal.query.answer_stream import QueryStream, StreamPlan

log = logging.getLogger("shoal.server")

MAX_QUERY_BYTES = 1 << 20     # the largest query text a protocol reads (SQL, KQL, JSON)


def run_statement(state: ServerState, text: str, *, token: str | None, prune: bool,
                  engine: str, kql: bool = False, cancel: CancelHandle | None = None,
                  client: str | None = None) -> QueryResult:
    """One statement of any frontend (`/v1/query`, Flight SQL), blocking: the guard decides
    its kind on its tokens, so no comment or white space can hide DDL; CREATE/ALTER need
    the `admin` scope (when tokens are configured); DESCRIBE/SHOW touch only the catalog
    (no slot, no Spark); queries run under the server's bounds (`run_bounded`). The caller
    has checked the `query` scope; `client` (`ServerState.client_key`) is who the slot is
    counted against."""
    if kql:
        return run_bounded(state, text, prune=prune, engine=engine, kql=True, cancel=cancel,
                           client=client)
    statement = classify(text)
    if statement.kind in ("ddl", "admin_ddl"):
        if statement.kind == "admin_ddl" and state.tokens.enabled:
            state.tokens.allows(token, "admin")
        return state.db.sql(text, prune=prune)
    return run_bounded(state, text, prune=prune, engine=engine, cancel=cancel, client=client)


def answer_stats(result: QueryResult) -> dict[str, Any]:
    """The pruning stats of an answer, with `truncated` (and `truncated_by`)."""
    stats: dict[str, Any] = result.stats.to_json()
    stats["truncated"] = result.truncated is not None
    if result.truncated is not None:
        stats["truncated_by"] = result.truncated
    return stats


async def run_on_engine(state: ServerState, sql: str, *, prune: bool, engine: str,
                         kql: bool = False, client: str | None = None) -> QueryResult:
    """`run_bounded` in a worker thread."""
    return await anyio.to_thread.run_sync(
        lambda: run_bounded(state, sql, prune=prune, engine=engine, kql=kql, client=client))


def run_bounded(state: ServerState, sql: str, *, prune: bool, engine: str,
                kql: bool = False, cancel: CancelHandle | None = None,
                client: str | None = None) -> QueryResult:
    """One statement on the engine under the server's bounds, blocking: a free slot, within
    `client`'s share (else 429), a live engine (else 503), the timeout and the result caps.
    The slot is freed when the work has stopped: at once for an answer; for a failed,
    timed-out or cancelled statement, once Spark shows none of its tasks still running
    (`release_when_stopped`)."""
    reason = state.spark.unavailable()
    if reason is not None:
        raise EngineUnavailableError(reason, retry_after_s=state.spark.retry_after_s)
    cancel = cancel or CancelHandle()       # also what tells when its Spark work stopped
    state.query_slots.acquire(client)
    failed = True
    try:
        executor = state.db.query_engine
        run = executor.execute_kql if kql else executor.execute
        result = run(sql, prune=prune, engine=engine, limits=state.query_limits,
                     cancel=cancel)
        failed = False
        return result
    except EngineUnavailableError as e:
        e.retry_after_s = state.spark.retry_after_s
        state.spark.wake()          # restart now rather than at the next probe
        raise
    finally:
        if failed:
            release_when_stopped(state, cancel.stopped, cancel.wait_stopped, client)
        else:
            state.query_slots.release(client)


# How long a failed statement's slot waits for Spark to show its tasks gone before it is
# freed anyway (with an error in the log): a guard against a status that never comes, far
# beyond any task that stops by itself in a sane time.
STOP_GUARD_S = 600.0


def release_when_stopped(state: ServerState, stopped: Callable[[], bool],
                         wait_stopped: Callable[[float], bool],
                         client: str | None = None) -> None:
    """Free a query slot now if `stopped()`, else once `wait_stopped(guard_s)` returns, from
    a thread of its own (the answer, an error, leaves at once): a statement that timed out or
    was cancelled may still have Spark tasks running (a task stuck in a JVM loop ignores
    interruption), and its slot must not be reused before they end."""
    if stopped():
        state.query_slots.release(client)
        return

    def wait_then_release() -> None:
        try:
            wait_stopped(STOP_GUARD_S)
        except Exception as e:  # noqa: BLE001 - the slot must be freed whatever happens
            log.error("could not tell when a query's Spark tasks stopped: %s", e)
        finally:
            state.query_slots.release(client)

    threading.Thread(target=wait_then_release, name="shoal-slot-release",
                     daemon=True).start()


# ---- streamed answers (Flight SQL) ----------------------------------------------------------
@dataclass
class PlannedQuery:
    """A query planned but not run (`plan_statement`): what a Flight SQL ticket stands for
    until its `DoGet` streams the rows (`open_stream`)."""

    plan: StreamPlan
    extra: dict[str, Any] = field(default_factory=dict)   # a KQL query's `sql` and `render`

    @property
    def schema(self) -> pa.Schema:
        return self.plan.schema

    def planned_stats(self) -> dict[str, Any]:
        """The stats known before any row is read: what the scans will read and skip, the
        engine and why (no `truncated`: that is known when the stream ends)."""
        return {**self.plan.stats.to_json(), **self.extra}


def plan_statement(state: ServerState, text: str, *, token: str | None, prune: bool,
                   engine: str, kql: bool = False,
                   client: str | None = None) -> QueryResult | PlannedQuery:
    """`run_statement` for a frontend that streams answers: a query (SELECT, WITH, KQL) is
    planned, not run (its schema and pruning are known, no row is read), under a query slot
    held only while it plans; anything else (DDL, DESCRIBE, SHOW, EXPLAIN) runs now, as
    `run_statement` runs it."""
    from shoal.query.answer_stream import plan_stream

    extra: dict[str, Any] = {}
    sql = text
    if kql:
        translation = state.db.query_engine.translate_kql(text)
        sql = translation.sql
        extra["sql"] = sql
        if translation.render is not None:
            extra["render"] = translation.render
    if classify(sql).kind != "select":
        return run_statement(state, text, token=token, prune=prune, engine=engine, kql=kql,
                             client=client)
    with _engine_slot(state, client):
        return PlannedQuery(plan_stream(state.db.query_engine, sql, prune=prune, mode=engine),
                            extra)


def query_schema(state: ServerState, text: str, *, engine: str, kql: bool = False,
                 client: str | None = None) -> pa.Schema | None:
    """The answer schema of a query (planned, nothing run); None for a statement that is
    not a query (DDL and the like are never run just to learn their schema)."""
    if not kql and classify(text).kind != "select":
        return None
    planned = plan_statement(state, text, token=None, prune=True, engine=engine, kql=kql,
                             client=client)
    return planned.schema if isinstance(planned, PlannedQuery) else None


class BoundedStream:
    """A planned query running as a stream under the server's bounds: it holds a query slot
    from `open_stream` until its batches end, fail, or are abandoned (`close`, or the
    generator dropped); the engine's work stops then too."""

    def __init__(self, state: ServerState, stream: QueryStream,
                 client: str | None = None) -> None:
        self.state = state
        self.stream = stream
        self.client = client
        self._released = False
        self.batches = self._batches()

    def _batches(self) -> Generator[pa.RecordBatch, None, None]:
        completed = False
        try:
            yield from self.stream
            completed = True
        except EngineUnavailableError as e:
            e.retry_after_s = self.state.spark.retry_after_s
            self.state.spark.wake()
            raise
        finally:
            self.stream.close()
            self.release(stopped=completed)

    def release(self, *, stopped: bool = False) -> None:
        """Free the slot: at once when the stream `stopped` by itself; else once its Spark
        tasks are gone (`release_when_stopped`)."""
        if not self._released:
            self._released = True
            if stopped:
                self.state.query_slots.release(self.client)
            else:
                release_when_stopped(self.state, self.stream.stopped,
                                     self.stream.wait_stopped, self.client)

    def close(self) -> None:
        """Abandon the stream: stop the engine, free the slot (also when never started)."""
        self.batches.close()
        self.stream.close()
        self.release()


def open_stream(state: ServerState, planned: PlannedQuery,
                client: str | None = None) -> BoundedStream:
    """Start streaming a planned query: a free slot, within `client`'s share (else 429), a
    live engine (else 503); the timeout and the row/byte caps apply to the whole stream."""
    from shoal.query.answer_stream import QueryStream

    _check_engine(state)
    state.query_slots.acquire(client)
    try:
        stream = QueryStream(state.db.query_engine, planned.plan, state.query_limits)
    except BaseException:
        state.query_slots.release(client)
        raise
    return BoundedStream(state, stream, client)


def _check_engine(state: ServerState) -> None:
    reason = state.spark.unavailable()
    if reason is not None:
        raise EngineUnavailableError(reason, retry_after_s=state.spark.retry_after_s)


class _engine_slot:
    """A query slot and a live engine for a short piece of engine work (planning)."""

    def __init__(self, state: ServerState, client: str | None) -> None:
        self.state = state
        self.client = client

    def __enter__(self) -> None:
        _check_engine(self.state)
        self.state.query_slots.acquire(self.client)

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        self.state.query_slots.release(self.client)
        if isinstance(exc, EngineUnavailableError):
            exc.retry_after_s = self.state.spark.retry_after_s
            self.state.spark.wake()
