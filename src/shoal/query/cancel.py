"""Cancelling one statement: its deadline, a client's cancel, and the Spark tasks it leaves.

`_Run` is one statement's run on the calling thread: the watchdog that cancels it at
`QueryLimits.timeout_s`, the job tag its Spark jobs carry (so they can be cancelled, and
their tasks counted until none runs), the embedded engine's interrupt, and the mapping of
an exception out of Spark to shoal's error (a dead engine, a timeout, a cancel, a bad
statement). `CancelHandle` is what a caller holds to cancel a statement from another
thread (`QueryEngine.execute(cancel=...)`) and to wait until its Spark tasks have stopped.
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from shoal.errors import (EngineUnavailableError, QueryCancelledError, QueryError,
                          QueryTimeoutError, ResultTooLargeError, ShoalError)
from shoal.query.spark.failures import engine_gone
from shoal.query.spark.failures import spark_message as _spark_message
from shoal.query.spark.session import spark_generation, spark_process

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("shoal.query")

# A cancelled statement is cancelled again at this interval until it returns: a job that
# started just after a cancellation must not escape it.
CANCEL_REPEAT_S = 0.25


class CancelHandle:
    """Cancels, from another thread, the statement `QueryEngine.execute(cancel=...)` runs
    (a `/v1/query` client that went away): its Spark jobs or embedded run are interrupted and
    it fails with `QueryCancelledError`. A cancel before the statement starts cancels it as it
    starts; one after it ended does nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._cancelled = False

    def bind(self, run: _Run) -> None:
        with self._lock:
            self._run = run
            late = self._cancelled
        if late:
            run.cancel()

    def cancel(self) -> bool:
        """Interrupt the statement; False when it had already finished."""
        with self._lock:
            self._cancelled = True
            run = self._run
        return True if run is None else run.cancel()

    def wait_stopped(self, guard_s: float) -> bool:
        """After the statement returned: wait until none of its Spark tasks still runs
        (`_Run.wait_stopped`). True at once when it never reached Spark."""
        with self._lock:
            run = self._run
        return True if run is None else run.wait_stopped(guard_s)

    def stopped(self) -> bool:
        """Whether none of the statement's Spark tasks runs now (no waiting)."""
        with self._lock:
            run = self._run
        return True if run is None else run.stopped()


class _Run:
    """One statement's Spark work on the calling thread: the watchdog that cancels it at the
    deadline (counted from the start, planning included), its job tag (added once the
    statement reaches Spark), and what tells a dead engine from a bad statement.

    `cancellable=True` (a streamed statement, `shoal.query.answer_stream`) tags its Spark jobs even
    without a deadline, so that `cancel()` (from any thread: a client's cancel request) can
    interrupt it the way the deadline does; the statement then fails with
    `QueryCancelledError`."""

    def __init__(self, timeout_s: float | None, *, cancellable: bool = False) -> None:
        self.timeout_s = timeout_s
        self.cancellable = cancellable
        self.cancelled = threading.Event()
        self._detached = False
        self.tag = f"shoal-query-{uuid.uuid4().hex}"
        self.spark: SparkSession | None = None
        self.generation: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.timed_out = threading.Event()
        self._finished = threading.Event()
        self._cancels: list[Callable[[], None]] = []
        self._cancel_lock = threading.Lock()

    def __enter__(self) -> _Run:
        if self.timeout_s is not None:
            threading.Thread(target=self._watch, name=f"shoal-deadline-{self.tag[-8:]}",
                             daemon=True).start()
        return self

    def attach(self, spark: SparkSession, generation: int) -> None:
        """The statement reaches Spark: tag the jobs this thread starts from now on."""
        self.spark, self.generation, self.proc = spark, generation, spark_process()
        if not self._tagged:
            return
        try:
            sc = spark.sparkContext
            sc.addJobTag(self.tag)
            sc.setInterruptOnCancel(True)
        except Exception as e:
            raise self.failure(e) from e

    @property
    def _tagged(self) -> bool:
        return self.timeout_s is not None or self.cancellable

    def __exit__(self, *_exc: object) -> None:
        self._finished.set()
        self.detach()

    def detach(self) -> None:
        """Take the job tag off the calling thread (the one `attach` tagged): done before
        the statement leaves that thread, e.g. a streamed answer collected from Spark and
        then sent from whichever thread the client's reads run on."""
        if not self._tagged or self.spark is None or self._detached:
            return
        self._detached = True
        try:
            sc = self.spark.sparkContext
            sc.removeJobTag(self.tag)       # the thread is reused for other statements
            sc.setInterruptOnCancel(False)
        except Exception as e:  # noqa: BLE001 - the engine may be gone; nothing to untag
            log.debug("could not clear job tag %s: %s", self.tag, _spark_message(e))

    def on_cancel(self, cancel: Callable[[], None]) -> None:
        """Call `cancel` at the deadline (at once if it has passed): how the embedded
        engine's run is interrupted."""
        with self._cancel_lock:
            self._cancels.append(cancel)
            late = self.timed_out.is_set() or self.cancelled.is_set()
        if late:
            cancel()

    def cancel(self) -> bool:
        """Interrupt the statement now, from any thread: the embedded engine's run and the
        statement's Spark jobs (again and again until it returns, as at the deadline).
        False when it had already finished or been cancelled."""
        with self._cancel_lock:
            if self._finished.is_set() or self.cancelled.is_set():
                return False
            self.cancelled.set()
            cancels = list(self._cancels)
        self._interrupt(cancels)
        log.info("query %s was cancelled by its client", self.tag)
        threading.Thread(target=self._keep_cancelling, name=f"shoal-cancel-{self.tag[-8:]}",
                         daemon=True).start()
        return True

    def _interrupt(self, cancels: list[Callable[[], None]]) -> None:
        for cancel in cancels:
            try:
                cancel()
            except Exception as e:  # noqa: BLE001 - the run may have just ended
                log.warning("could not interrupt query %s: %s", self.tag, e)

    def _watch(self) -> None:
        assert self.timeout_s is not None
        if self._finished.wait(self.timeout_s):
            return
        with self._cancel_lock:
            self.timed_out.set()
            cancels = list(self._cancels)
        self._interrupt(cancels)
        log.info("query %s passed its %gs limit; cancelling its Spark jobs", self.tag,
                 self.timeout_s)
        self._keep_cancelling()

    def _keep_cancelling(self) -> None:
        """Interrupt the statement until it returns: its tagged Spark jobs, and the embedded
        engine again (an interrupt that lands just before the engine starts its run is
        lost)."""
        again = False           # the caller has just interrupted the embedded engine once
        while True:
            if again:
                with self._cancel_lock:
                    cancels = list(self._cancels)
                self._interrupt(cancels)
            again = True
            spark = self.spark
            if spark is not None:
                try:
                    spark.sparkContext.cancelJobsWithTag(self.tag)
                except Exception as e:  # noqa: BLE001 - a dead engine fails the query anyway
                    log.warning("could not cancel query %s: %s", self.tag, _spark_message(e))
                    return
            if self._finished.wait(CANCEL_REPEAT_S):
                return

    def spark_tasks_running(self) -> int:
        """Tasks of this statement's Spark jobs still running, by Spark's status tracker (a
        job still running counts one at least). A cancelled job fails at once, but a task
        that never checks for interruption (a JVM loop such as Java's regex matching) runs on
        until it ends by itself: this counts it. 0 when the statement never reached Spark or
        its jobs were not tagged."""
        if not self._tagged or self.spark is None:
            return 0
        tracker = self.spark.sparkContext._jsc.sc().statusTracker()
        running = 0
        for job in tracker.getJobIdsForTag(self.tag):
            info = tracker.getJobInfo(job)
            if info.isEmpty():          # forgotten by the status store: long finished
                continue
            tasks = 0
            for stage in info.get().stageIds():
                stage_info = tracker.getStageInfo(stage)
                if not stage_info.isEmpty():
                    tasks += stage_info.get().numActiveTasks()
            if str(info.get().status()) == "RUNNING":
                tasks = max(tasks, 1)
            running += tasks
        return running

    def stopped(self) -> bool:
        """Whether no task of this statement's Spark jobs runs now (True if the engine does
        not answer: a dead JVM runs nothing)."""
        try:
            return self.spark_tasks_running() == 0
        except Exception as e:  # noqa: BLE001 - a dead JVM runs nothing
            log.info("query %s: Spark's status tracker did not answer (%s); its tasks are "
                     "taken as stopped", self.tag, _spark_message(e))
            return True

    def wait_stopped(self, guard_s: float, *, poll_s: float = 0.1) -> bool:
        """Wait until no task of this statement's Spark jobs runs (the statement itself has
        returned). False, with a log line, if Spark still shows one after `guard_s`; True at
        once if the engine is gone (its tasks went with it)."""
        end = time.monotonic() + guard_s
        while not self.stopped():
            if time.monotonic() >= end:
                log.error("query %s: Spark task(s) still running %gs after the statement "
                          "ended; its slot is freed anyway", self.tag, guard_s)
                return False
            time.sleep(poll_s)
        return True

    def check(self) -> None:
        """Raise if the deadline passed or the statement was cancelled (before starting a
        job that nothing would cancel)."""
        if self.cancelled.is_set():
            raise QueryCancelledError()
        if self.timed_out.is_set():
            assert self.timeout_s is not None
            raise QueryTimeoutError(self.timeout_s)

    def failure(self, e: BaseException) -> ShoalError:
        """The shoal error for an exception out of Spark during this statement."""
        if self.cancelled.is_set():
            return QueryCancelledError()
        if self.timed_out.is_set():
            assert self.timeout_s is not None
            return QueryTimeoutError(self.timeout_s)
        gone = engine_gone(e)
        if self.proc is not None and self.proc.poll() is not None:
            gone = f"the Spark JVM exited (status {self.proc.returncode})"
        elif self.generation is not None and self.generation != spark_generation():
            gone = "the Spark session was restarted during the query"
        if gone:
            return EngineUnavailableError(gone)
        text = str(e)
        match = _MAX_RESULT.search(text)
        if match:
            return ResultTooLargeError(match.group(1))
        return QueryError(_spark_message(e))


_MAX_RESULT = re.compile(r"bigger than spark\.driver\.maxResultSize \(([^)]*)\)")
