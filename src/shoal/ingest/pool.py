"""A pool of coercion worker processes: NDJSON coercion on every core.

`coerce_ndjson` spends most of its time in a msgspec pass that holds the GIL, so in one
process concurrent requests coerce on about one core. `CoercionPool(n).start()` runs `n`
worker processes; `pool.coerce(body, schema, ...)` has the signature and result of
`shoal.ingest.coerce.coerce_ndjson` and is what `WritePath(coercer=...)` calls, so the
evolve flow (coerce -> new columns -> coerce again), idempotency, the staging buffer and
the commit stay in the calling process, unchanged.

Protocol: each worker holds one end of a socket pair (`multiprocessing.connection`
framing) and serves one call at a time: the parent sends a small header (the schema as
JSON text, the options) and the body's bytes; the worker answers a header (errors,
rejected lines, unknown fields) and the accepted rows as one Arrow IPC stream, which the
parent maps without copying. A call waits for a free worker; the waiting thread sleeps in
a system call (GIL released).

Workers are started as fresh interpreters (`python -m shoal.ingest._pool_worker`, through
`subprocess`: fork + exec), never forked from the server: a fork of a process running
threads (uvicorn, the flusher threads, Arrow's pools) could copy a held lock. Each worker
imports the coercion modules once, says it is ready, ignores SIGINT and SIGTERM (sent to
the whole process group, they would fail the requests a stopping server still drains; the
parent decides when workers stop), and exits when its socket closes, so a server killed
with SIGKILL leaves no worker behind.

Failure: a worker that dies (killed, out of memory) fails only the call it was serving,
with `CoercionWorkerLostError` (503 + Retry-After: nothing of that request was buffered,
so a retry is safe), and is replaced in the background; a worker found dead while idle is
replaced before it is used. An exception inside a worker (a bug) is raised in the caller
as `InternalError` with the worker's traceback text, and the worker keeps serving.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from shoal.errors import CoercionWorkerLostError, InternalError, LineError, UnavailableError
from shoal.types.conventions import DEFAULT_CONVENTIONS, IngestConventions, IngestWarning
from shoal.types.schema import Schema

if TYPE_CHECKING:
    from shoal.ingest._values import UnknownFieldPolicy
    from shoal.ingest.coerce import Coerced

log = logging.getLogger(__name__)

WORKER_MODULE = "shoal.ingest._pool_worker"
READY = b"shoal-coerce-ready"
START_TIMEOUT_S = 120.0     # guards a hang only: a worker imports pyarrow, numpy, msgspec


@dataclass
class PoolStats:
    calls: int = 0
    restarts: int = 0        # workers replaced after dying
    lost_calls: int = 0      # calls failed because their worker died


class _Worker:
    """One worker process and the parent's end of its socket."""

    def __init__(self, index: int) -> None:
        self.index = index
        parent, child = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, str(child.fileno())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, close_fds=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.conn = Connection(parent.detach())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> None:
        if not self.conn.poll(timeout_s):
            self.kill()
            raise InternalError(f"coercion worker {self.pid} did not start within "
                                f"{timeout_s:g} s")
        try:
            hello = self.conn.recv_bytes()
        except (EOFError, OSError) as e:
            self.kill()
            raise InternalError(f"coercion worker {self.pid} exited while starting "
                                f"(exit status {self.proc.poll()})") from e
        if hello != READY:
            self.kill()
            raise InternalError(f"coercion worker {self.pid} sent {hello[:40]!r} at start")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float) -> None:
        """Ask the worker to leave (its socket closes), then make sure it did."""
        try:
            self.conn.close()
        except OSError as e:
            log.debug("closing the socket of coercion worker %d: %s", self.pid, e)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("coercion worker %d did not exit within %g s; killing it",
                        self.pid, timeout_s)
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if not self.conn.closed:
            self.conn.close()


class CoercionPool:
    """`workers` coercion processes; see the module docstring."""

    def __init__(self, workers: int, *, start_timeout_s: float = START_TIMEOUT_S,
                 acquire_timeout_s: float = 60.0, retry_after_s: float = 1.0) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.size = workers
        self.start_timeout_s = start_timeout_s
        self.acquire_timeout_s = acquire_timeout_s
        self.retry_after_s = retry_after_s
        self.stats = PoolStats()
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._starting = 0
        self._waiting = 0
        self._closed = False
        self._schemas: dict[int, tuple[Schema, str]] = {}   # id -> (schema, its JSON)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> CoercionPool:
        """Start every worker and wait until each is ready (they start in parallel)."""
        started: list[_Worker] = []
        try:
            for i in range(self.size):
                started.append(_Worker(i))
            for w in started:
                w.wait_ready(self.start_timeout_s)
        except BaseException:
            for w in started:
                w.kill()
            raise
        with self._cond:
            self._idle.extend(started)
            self._cond.notify_all()
        log.info("coercion pool: %d worker processes (pids %s)", self.size,
                 ", ".join(str(w.pid) for w in started))
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop every worker; waits for calls in progress (up to `timeout_s`) first."""
        end = time.monotonic() + timeout_s
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while (self._busy or self._starting) and time.monotonic() < end:
                self._cond.wait(timeout=max(0.0, end - time.monotonic()))
            workers = self._idle + list(self._busy)
            self._idle = []
            self._busy = set()
        for w in workers:
            w.stop(timeout_s=max(1.0, end - time.monotonic()))

    def __enter__(self) -> CoercionPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        with self._cond:
            return sorted(w.pid for w in self._idle + list(self._busy))

    @property
    def busy(self) -> int:
        """Calls being served now."""
        with self._cond:
            return len(self._busy)

    @property
    def waiting(self) -> int:
        """Calls waiting for a free worker now."""
        with self._cond:
            return self._waiting

    # -- calls -------------------------------------------------------------------------
    def coerce(self, body: bytes, schema: Schema, *, unknown: UnknownFieldPolicy,
               ingest_time_ns: int,
               max_errors: int = 100, unknown_fields: Sequence[str] | None = None,
               conventions: IngestConventions = DEFAULT_CONVENTIONS) -> Coerced:
        """`coerce_ndjson(body, schema, ...)` in a worker process (same arguments, result)."""
        header = {"schema": self._schema_json(schema), "unknown": unknown,
                  "ingest_time_ns": ingest_time_ns, "max_errors": max_errors,
                  "unknown_fields": None if unknown_fields is None else list(unknown_fields),
                  "conventions": conventions.to_json()}
        worker = self._acquire()
        try:
            try:
                worker.conn.send(header)
                worker.conn.send_bytes(body)
                answer = worker.conn.recv()
                data = worker.conn.recv_bytes() if answer.get("ok") else b""
            except (EOFError, OSError) as e:
                self._lost(worker, e)
                raise CoercionWorkerLostError(worker.pid, worker.proc.poll(),
                                              retry_after_s=self.retry_after_s) from None
        except BaseException:
            self._release(worker, alive=False)
            raise
        self._release(worker, alive=True)
        if not answer.get("ok"):
            raise InternalError(f"coercion worker {worker.pid} failed: {answer.get('error')}")
        return _coerced(answer, data, schema)

    def _schema_json(self, schema: Schema) -> str:
        # Schemas are immutable and few (one per table version): their JSON is kept by
        # identity, with the schema itself so that the id cannot be reused meanwhile.
        hit = self._schemas.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        text = json.dumps(schema.to_json(), separators=(",", ":"))
        if len(self._schemas) > 256:
            self._schemas.clear()
        self._schemas[id(schema)] = (schema, text)
        return text

    def _acquire(self) -> _Worker:
        end = time.monotonic() + self.acquire_timeout_s
        with self._cond:
            while True:
                if self._closed:
                    raise UnavailableError("the coercion pool is closed (the server is "
                                           "shutting down)")
                while self._idle:
                    w = self._idle.pop()
                    if w.alive():
                        self._busy.add(w)
                        self.stats.calls += 1
                        return w
                    log.warning("coercion worker %d died while idle (exit status %s); "
                                "replacing it", w.pid, w.proc.poll())
                    self._replace_locked(w)
                left = end - time.monotonic()
                if left <= 0:
                    raise UnavailableError(f"no coercion worker free within "
                                           f"{self.acquire_timeout_s:g} s; retry later")
                self._waiting += 1
                try:
                    self._cond.wait(timeout=left)
                finally:
                    self._waiting -= 1

    def _release(self, worker: _Worker, *, alive: bool) -> None:
        with self._cond:
            if worker not in self._busy:      # already handled (lost) or pool closed
                self._cond.notify_all()
                return
            self._busy.discard(worker)
            if alive and not self._closed:
                self._idle.append(worker)
            elif alive:
                threading.Thread(target=worker.stop, args=(5.0,), daemon=True).start()
            else:
                self._replace_locked(worker)
            self._cond.notify_all()

    def _lost(self, worker: _Worker, error: BaseException) -> None:
        with self._cond:
            self.stats.lost_calls += 1
        try:
            worker.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.proc.kill()     # the socket broke but the process lingers: no half state
            worker.proc.wait()
        log.error("coercion worker %d died during a call (%s: %s; exit status %s); the call "
                  "fails with 503, the worker is replaced", worker.pid,
                  type(error).__name__, error, worker.proc.returncode)

    def _replace_locked(self, dead: _Worker) -> None:
        """Start a replacement for `dead` in the background (the lock is held)."""
        if not dead.conn.closed:
            dead.conn.close()
        if dead.proc.poll() is None:
            dead.proc.kill()
            dead.proc.wait()
        if self._closed:
            return
        self._starting += 1
        threading.Thread(target=self._start_replacement, args=(dead.index,),
                         name="shoal-coerce-respawn", daemon=True).start()

    def _start_replacement(self, index: int) -> None:
        worker: _Worker | None = None
        try:
            worker = _Worker(index)
            worker.wait_ready(self.start_timeout_s)
        except Exception as e:  # noqa: BLE001 - logged; the pool runs on with fewer workers
            log.error("coercion pool: a replacement worker failed to start: %s", e)
            worker = None
        with self._cond:
            self._starting -= 1
            if worker is not None:
                if self._closed:
                    threading.Thread(target=worker.stop, args=(5.0,), daemon=True).start()
                else:
                    self.stats.restarts += 1
                    self._idle.append(worker)
                    log.info("coercion pool: worker %d replaced by %d", index, worker.pid)
            self._cond.notify_all()


def _coerced(answer: dict[str, Any], data: bytes, schema: Schema) -> Coerced:
    from shoal.ingest.coerce import Coerced

    batch = pa.ipc.open_stream(data).read_next_batch()
    target = schema.arrow()
    if not batch.schema.equals(target, check_metadata=True):
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=target)
    return Coerced(batch, batch.num_rows,
                   [LineError(line, field, message) for line, field, message in answer["errors"]],
                   list(answer["rejected_lines"]), list(answer["unknown_fields"]),
                   [IngestWarning.from_json(w) for w in answer.get("warnings", [])])


# -- the worker side (run by `shoal.ingest._pool_worker`) -----------------------------------

def serve_worker(fd: int) -> None:
    """A worker's loop: answer calls on socket `fd` until it closes."""
    import traceback

    from shoal.ingest.nopandas import forgo_pandas
    from shoal.native import LONG_RUNNING, keep_freed_memory

    forgo_pandas()  # a worker process only coerces
    # Its bodies' buffers reused, not faulted in afresh (Arrow's pool: `shoal serve` set it
    # for its children before this module imported pyarrow).
    keep_freed_memory(*LONG_RUNNING)
    from shoal.ingest.coerce import coerce_ndjson, warm_up

    # A Ctrl-C or a service manager's SIGTERM reaches the whole process group: the server
    # drains its requests (which need their workers) and then closes the sockets.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn = Connection(fd)
    schemas: dict[str, Schema] = {}
    warm_up()
    conn.send_bytes(READY)
    while True:
        try:
            header = conn.recv()
            body = conn.recv_bytes()
        except (EOFError, OSError):
            return     # the parent closed the socket (stop) or went away
        try:
            text = header["schema"]
            schema = schemas.get(text)
            if schema is None:
                if len(schemas) > 64:
                    schemas.clear()
                schema = schemas[text] = Schema.from_json(json.loads(text))
            out = coerce_ndjson(body, schema, unknown=header["unknown"],
                                ingest_time_ns=header["ingest_time_ns"],
                                max_errors=header["max_errors"],
                                unknown_fields=header["unknown_fields"],
                                conventions=IngestConventions.from_json(
                                    header.get("conventions")))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, out.batch.schema) as writer:
                writer.write_batch(out.batch)
            answer = {"ok": True,
                      "errors": [(e.line, e.field, e.message) for e in out.errors],
                      "rejected_lines": [int(x) for x in out.rejected_lines],
                      "unknown_fields": list(out.unknown_fields),
                      "warnings": [w.to_json() for w in out.warnings]}
            data: Any = sink.getvalue()
        except Exception as e:  # noqa: BLE001 - sent to the caller, which raises it
            answer = {"ok": False, "error": "".join(
                traceback.format_exception(e, limit=8)).rstrip()}
            data = None
        try:
            conn.send(answer)
            if data is not None:
                conn.send_bytes(data)
        except (EOFError, OSError):
            return
