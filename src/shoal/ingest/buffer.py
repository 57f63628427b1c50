"""The staging buffer: per-table group commit across concurrent requests (docs/storage.md).

Requests `submit()` coerced Arrow batches and block until the snapshot holding their rows is
committed. A flusher thread per table collects what is pending until it holds `max_rows`
rows or `max_bytes` bytes, or `debounce_s` has passed since the oldest pending request, then
writes ONE extent for the whole group and commits it in one snapshot together with every
request's idempotency-ledger row. So many small writers produce few healthy extents.

Each table has `writers` such threads (`DEFAULT_WRITERS`): while one writes a group's
extent (statistics, filters, compressed IPC: CPU that holds the GIL only in part), the next
group is taken and written by another, on another core. Their commits keep the order the
groups were taken in (a group commits once every earlier group has committed or failed), so
a client's requests, and `shoal ingest`'s chunks, land in order. Measured (BENCHMARKS.md,
REST ingest): one writer was busy all the time under 8 REST clients (py-spy) while the server
used 1.2 of 2 cores; two writers: +12-25% MB/s, larger extents. A
request that holds a quarter of `max_rows` or `max_bytes` by itself (`shoal ingest`'s 32 MB
chunks: ~100k rows) is a healthy extent alone and does not wait out the debounce for company:
that only left the flusher idle between chunks.

The debounce waits for company only while company is on its way (`early_flush`, the
default): a request announces itself with `arrive(table)` as soon as it starts (the REST
route before it reads the body, `WritePath` otherwise) and stops arriving when it submits or
fails. A group with no request arriving for its table is written at once; waiting could only
add latency, never a member. Postgres' group commit has the same rule (`commit_delay` is
slept only when `commit_siblings` other transactions are active). Measured (BENCHMARKS.md,
REST ingest): 8 closed-loop REST clients had every group wait ~9 ms past its last member; a
lone client paid the whole 20 ms on every request. `early_flush=False` keeps the debounce as
a plain timer (tests that need groups closed by size alone, whatever the scheduling).

- Batches of one group may come from different schema versions (a request coerced just
  before an evolution landed); they are upgraded to the newest version in the group, so an
  extent always has one version.
- Two requests of one group with the same idempotency key: the first is applied, the second
  is answered as its replay. A key that landed elsewhere meanwhile (the catalog refuses it)
  takes its request out of the group, which is then written again without it.
- Memory is bounded: a submit that would push pending bytes past `max_pending_bytes` fails
  fast with `BackpressureError` (HTTP 429/503 with `Retry-After`).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType

import pyarrow as pa

from shoal.catalog.base import Catalog, LedgerEntry, LedgerRecord
from shoal.commit import CommitCoordinator
from shoal.errors import BackpressureError, InternalError, UnavailableError
from shoal.types.schema import Schema, stored_names
from shoal.types.upgrade import upgrade_batch


# Extents of one table written at once (by as many flusher threads); their commits keep the
# order their groups were taken in. Two on two cores (three measured no better).
DEFAULT_WRITERS = min(4, max(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class SubmitResult:
    snapshot_id: int
    extent_ids: list[str]
    replayed: LedgerRecord | None = None


@dataclass(eq=False)        # one request: compared by identity, never by its rows
class _Pending:
    schema: Schema
    batch: pa.RecordBatch
    ledger: Sequence[LedgerEntry]
    nbytes: int
    since: float
    future: Future[SubmitResult] = field(default_factory=Future)


@dataclass
class BufferStats:
    flushes: int = 0
    requests: int = 0
    rows: int = 0
    bytes: int = 0
    extents: int = 0
    replays: int = 0
    rejected_backpressure: int = 0
    commit_seconds: float = 0.0


class _TableQueue:
    def __init__(self, owner: StagingBuffer, table: str) -> None:
        self.owner = owner
        self.table = table
        self.cond = threading.Condition()
        self.pending: list[_Pending] = []
        self.flush_requested = 0
        self.inflight: list[_Pending] = []
        self.closed = False
        # Groups are numbered as they are taken; each commits only once every group taken
        # before it has finished (committed or failed): writers overlap their extents,
        # never the order of their commits.
        self._taken = 0
        self._next_commit = 0
        self._finished: set[int] = set()
        self.threads = [threading.Thread(target=self._run, name=f"shoal-flush-{table}-{i}",
                                         daemon=True) for i in range(owner.writers)]
        for t in self.threads:
            t.start()

    # -- producer side ---------------------------------------------------------------------
    def put(self, p: _Pending) -> None:
        with self.cond:
            if self.closed:
                raise UnavailableError("the staging buffer is closed (the server is shutting down)")
            self.pending.append(p)
            self.cond.notify_all()

    def flush(self) -> None:
        """Flush everything pending now and wait until it is committed (or failed)."""
        with self.cond:
            waiting = [p.future for p in self.inflight + self.pending]
            self.flush_requested += 1
            self.cond.notify_all()
        for f in waiting:
            # Only waiting here (`exception()` waits without raising): the submitter of a
            # failed request reports its own failure.
            f.exception()

    # -- flusher thread --------------------------------------------------------------------
    def _take(self) -> tuple[int, list[_Pending]] | None:
        o = self.owner
        with self.cond:
            while True:
                if self.pending:
                    rows = sum(p.batch.num_rows for p in self.pending)
                    size = sum(p.nbytes for p in self.pending)
                    age = time.monotonic() - self.pending[0].since
                    alone = (4 * self.pending[0].batch.num_rows >= o.max_rows
                             or 4 * self.pending[0].nbytes >= o.max_bytes)
                    nobody_coming = o.early_flush and not o.arriving(self.table)
                    if (self.flush_requested or self.closed or rows >= o.max_rows
                            or size >= o.max_bytes or age >= o.debounce_s or alone
                            or nobody_coming):
                        group: list[_Pending] = []
                        taken_rows = taken_bytes = 0
                        while self.pending and (not group or (
                                taken_rows + self.pending[0].batch.num_rows <= o.max_rows
                                and taken_bytes + self.pending[0].nbytes <= o.max_bytes)):
                            p = self.pending.pop(0)
                            group.append(p)
                            taken_rows += p.batch.num_rows
                            taken_bytes += p.nbytes
                        if not self.pending:
                            self.flush_requested = 0
                        self.inflight.extend(group)
                        self._taken += 1
                        return self._taken - 1, group
                    self.cond.wait(timeout=max(0.0, o.debounce_s - age))
                elif self.closed:
                    return None
                else:
                    self.flush_requested = 0
                    self.cond.wait()

    def _wait_turn(self, ticket: int) -> None:
        """Until every group taken before group `ticket` has finished."""
        with self.cond:
            self.cond.wait_for(lambda: self._next_commit == ticket)

    def _finish(self, ticket: int, group: list[_Pending]) -> None:
        with self.cond:
            self.inflight = [p for p in self.inflight if p not in group]
            self._finished.add(ticket)
            while self._next_commit in self._finished:
                self._finished.remove(self._next_commit)
                self._next_commit += 1
            self.cond.notify_all()

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            ticket, group = taken
            try:
                self.owner._commit_group(self.table, group,
                                         turn=functools.partial(self._wait_turn, ticket))
            except BaseException as e:  # noqa: BLE001 - delivered to every waiting request
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(e)
            finally:
                self._finish(ticket, group)
                self.owner._release(sum(p.nbytes for p in group))


class Arrival:
    """A request on its way to `StagingBuffer.submit()` for `table` (its body being read or
    coerced). `close()` (idempotent; also on leaving a `with` block) says it is no longer
    coming: it submitted, failed or was answered as a replay."""

    __slots__ = ("_buffer", "_open", "table")

    def __init__(self, buffer: StagingBuffer, table: str) -> None:
        self._buffer = buffer
        self.table = table
        self._open = True

    def close(self) -> None:
        self._buffer._leave(self)

    def __enter__(self) -> Arrival:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class StagingBuffer:
    def __init__(self, catalog: Catalog, coordinator: CommitCoordinator, *,
                 max_rows: int = 200_000, max_bytes: int = 64 << 20,
                 debounce_s: float = 0.02, max_pending_bytes: int = 512 << 20,
                 retry_after_s: float = 1.0, early_flush: bool = True,
                 writers: int = DEFAULT_WRITERS) -> None:
        if writers < 1:
            raise ValueError("writers must be at least 1")
        self.catalog = catalog
        self.writers = writers
        self.coordinator = coordinator
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.debounce_s = debounce_s
        self.early_flush = early_flush
        self.max_pending_bytes = max_pending_bytes
        self.retry_after_s = retry_after_s
        self.stats = BufferStats()
        self._lock = threading.Lock()
        self._queues: dict[str, _TableQueue] = {}
        # Requests arriving per table (see `arrive`); no entry = none. Kept apart from
        # `_queues` so that a request for a table that does not exist starts no flusher.
        self._arriving: dict[str, int] = {}
        self._pending_bytes = 0
        self._closed = False

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def _queue(self, table: str) -> _TableQueue:
        with self._lock:
            if self._closed:
                raise UnavailableError("the staging buffer is closed (the server is shutting down)")
            q = self._queues.get(table)
            if q is None:
                q = self._queues[table] = _TableQueue(self, table)
            return q

    def _release(self, nbytes: int) -> None:
        with self._lock:
            self._pending_bytes -= nbytes

    def arrive(self, table: str) -> Arrival:
        """Announce a request for `table` that will `submit()` soon: while it is arriving, a
        small group waits for it (up to `debounce_s`) instead of being written at once."""
        with self._lock:
            self._arriving[table] = self._arriving.get(table, 0) + 1
        return Arrival(self, table)

    def arriving(self, table: str) -> int:
        """Requests announced for `table` by `arrive()` and not yet submitted or failed."""
        with self._lock:
            return self._arriving.get(table, 0)

    def _leave(self, arrival: Arrival) -> None:
        with self._lock:
            if not arrival._open:
                return
            arrival._open = False
            left = self._arriving[arrival.table] - 1
            if left:
                self._arriving[arrival.table] = left
            else:
                del self._arriving[arrival.table]
            q = self._queues.get(arrival.table)
        if q is not None:
            # Outside `_lock` (the flusher takes `_lock` inside `q.cond`): the flusher looks
            # at the count under `q.cond`, so this wake-up cannot fall between its look and
            # its wait.
            with q.cond:
                q.cond.notify_all()

    def submit(self, table: str, schema: Schema, batch: pa.RecordBatch, *,
               ledger: Sequence[LedgerEntry] = (),
               arrival: Arrival | None = None) -> SubmitResult:
        """Queue `batch` (shaped to `schema`) and wait until its snapshot is committed.
        `arrival`: this request's announcement, closed once the batch is queued (not before:
        in between, the flusher would find the request neither pending nor arriving)."""
        nbytes = batch.nbytes
        with self._lock:
            if self._pending_bytes + nbytes > self.max_pending_bytes and self._pending_bytes:
                self.stats.rejected_backpressure += 1
                raise BackpressureError(
                    f"staging buffer full ({self._pending_bytes} bytes pending); retry later",
                    retry_after_s=self.retry_after_s)
            self._pending_bytes += nbytes
        p = _Pending(schema, batch, list(ledger), nbytes, time.monotonic())
        try:
            self._queue(table).put(p)
        except BaseException:
            self._release(nbytes)
            raise
        finally:
            if arrival is not None:
                arrival.close()
        return p.future.result()

    def flush(self, table: str | None = None) -> None:
        with self._lock:
            queues = list(self._queues.values()) if table is None else \
                [q for t, q in self._queues.items() if t == table]
        for q in queues:
            q.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queues = list(self._queues.values())
        for q in queues:
            with q.cond:
                q.closed = True
                q.cond.notify_all()
        for q in queues:
            for t in q.threads:
                t.join(timeout=60)

    # -- one group -----------------------------------------------------------------------------
    def _commit_group(self, table: str, group: list[_Pending], *,
                      turn: Callable[[], None] = lambda: None) -> None:
        """Write `group`'s extent and commit it; `turn()` returns when this group may commit
        (called before each commit attempt). Everything after the first `turn()`, `stats`
        included, runs while the next group waits for its own turn: one writer at a time."""
        # Same key twice in one group: the later requests are replays of the first.
        first_by_key: dict[str, _Pending] = {}
        duplicates: list[tuple[_Pending, _Pending]] = []
        members: list[_Pending] = []
        for p in group:
            dup = next((first_by_key[le.key] for le in p.ledger if le.key in first_by_key), None)
            if dup is not None:
                duplicates.append((p, dup))
                continue
            for le in p.ledger:
                first_by_key[le.key] = p
            members.append(p)
        while members:
            target = max((p.schema for p in members), key=lambda s: s.version)
            info = self.catalog.load_table(table)
            batches = [p.batch if p.schema.version == target.version
                       else upgrade_batch(p.batch, target,
                                          sources=stored_names(target, p.schema))
                       for p in members]
            batches = [b for b in batches if b.num_rows]
            t0 = time.perf_counter()
            entries = ([self.coordinator.write_extent(info, batches, schema=target)]
                       if batches else [])
            turn()
            outcome = self.coordinator.append(
                table, entries, ledger=[le for p in members for le in p.ledger],
                summary={"requests": len(members)})
            self.stats.commit_seconds += time.perf_counter() - t0
            if outcome.replayed is not None:
                # One key was applied elsewhere meanwhile: answer it as a replay, retry the rest.
                key = outcome.replayed.key
                hit = [p for p in members if any(le.key == key for le in p.ledger)]
                for p in hit:
                    p.future.set_result(SubmitResult(outcome.replayed.snapshot_id, [],
                                                     outcome.replayed))
                    self.stats.replays += 1
                members = [p for p in members if p not in hit]
                continue
            assert outcome.snapshot is not None
            sid = outcome.snapshot.snapshot_id
            ids = [e.extent_id for e in entries]
            self.stats.flushes += 1
            self.stats.extents += len(entries)
            self.stats.requests += len(members)
            self.stats.rows += sum(p.batch.num_rows for p in members)
            self.stats.bytes += sum(e.byte_size for e in entries)
            for p in members:
                p.future.set_result(SubmitResult(sid, ids))
            break
        for p, first in duplicates:
            rec = self.catalog.ledger_get(p.ledger[0].key) if p.ledger else None
            if rec is not None:
                p.future.set_result(SubmitResult(rec.snapshot_id, [], rec))
                self.stats.replays += 1
            elif first.future.done() and first.future.exception() is not None:
                p.future.set_exception(first.future.exception())
            else:
                p.future.set_exception(InternalError("duplicate idempotency key lost its first "
                                                  "request"))
