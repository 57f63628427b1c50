"""The server's watch over its Spark session: notice a dead or wedged JVM, restart it.

`SparkSupervisor` runs one daemon thread. Every `interval_s` (or at once when woken: a
query that lost its engine, or `/readyz` seeing the JVM gone, wakes it) it checks the
session, once the engine has started one (an app that never used Spark, or a `--lazy-spark`
server before its first query, has nothing to watch and stays ready):

- the JVM process has exited (e.g. SIGKILL, `System.exit`): dead;
- a cheap probe (`QueryEngine.ping`: a round trip through py4j and Spark's SQL front end,
  no job, so busy executors do not delay it) does not answer within `probe_timeout_s`:
  wedged (e.g. a driver lost in garbage collection). The probe runs on a thread of its own;
  a probe still hanging from the previous round counts as a failure too.

Either way the session is marked down (`unavailable()` gives the reason: `/readyz` answers
503, new queries 503 `engine_unavailable`, both with Retry-After) and restarted
(`QueryEngine.restart`: kill the JVM, forget PySpark's cached state, start a fresh session
with shoal's DataSource and functions). A failed restart is logged and retried on the next
round. Queries that were running on the old JVM fail with 503 (`EngineUnavailableError`
raised by the engine).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from shoal.query.engine import QueryEngine

log = logging.getLogger("shoal.server.spark")

EngineRef = Callable[[], "QueryEngine | None"]   # the engine, or None if never created


class SparkSupervisor:
    def __init__(self, engine: EngineRef, *, interval_s: float = 5.0,
                 probe_timeout_s: float = 20.0, retry_after_s: float = 5.0) -> None:
        if not interval_s > 0 or not probe_timeout_s > 0:
            raise ValueError("interval_s and probe_timeout_s must be positive")
        self._engine = engine
        self.interval_s = interval_s
        self.probe_timeout_s = probe_timeout_s
        self.retry_after_s = retry_after_s
        self._down: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prober = _Prober()
        self.restarts = 0

    def start(self) -> SparkSupervisor:
        self._thread = threading.Thread(target=self._run, name="shoal-spark-supervisor",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._prober.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("the Spark supervisor is still busy (a restart?); leaving it")

    def wake(self) -> None:
        """Check now instead of at the next interval."""
        self._wake.set()

    def unavailable(self) -> str | None:
        """Why the Spark session cannot take queries now, or None (also None while no
        session was ever started: nothing requires Spark yet)."""
        engine = self._engine()
        if engine is None or not engine.session_started:
            return None
        if self._down is not None:
            return self._down
        if not engine.spark_alive():
            self.wake()
            return "the Spark JVM has exited; restarting it"
        return None

    # ---- the thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._check()
            except Exception:
                log.exception("the Spark supervisor's check failed")

    def _check(self) -> None:
        engine = self._engine()
        if engine is None or not engine.session_started:
            return
        problem = self._problem(engine)
        if problem is None:
            self._down = None
            return
        self._down = f"{problem}; restarting it"
        log.warning("Spark session unhealthy (%s); restarting it", problem)
        try:
            engine.restart()
        except Exception as e:  # noqa: BLE001 - retried next round
            log.error("restarting Spark failed (%s: %s); retrying in %gs",
                      type(e).__name__, e, self.interval_s)
            self._down = f"{problem}; restart failed, retrying"
            return
        self.restarts += 1
        self._down = None
        log.warning("Spark session restarted (restart #%d)", self.restarts)

    def _problem(self, engine: QueryEngine) -> str | None:
        if not engine.spark_alive():
            return "the Spark JVM has exited"
        return self._prober.probe(engine.ping, self.probe_timeout_s)


class _Prober:
    """Runs probes on one long-lived daemon thread (one py4j connection, reused), so that
    a hung call shows as a timeout instead of hanging the supervisor."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], None], threading.Event,
                                                list[str]] | None] = queue.SimpleQueue()
        self._pending: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def probe(self, ping: Callable[[], None], timeout_s: float) -> str | None:
        if self._pending is not None and not self._pending.is_set():
            return "an earlier probe of Spark is still unanswered"
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="shoal-spark-probe",
                                            daemon=True)
            self._thread.start()
        done, errors = threading.Event(), cast(list[str], [])
        self._pending = done
        self._requests.put((ping, done, errors))
        if not done.wait(timeout_s):
            return f"Spark did not answer a probe within {timeout_s:g}s"
        return errors[0] if errors else None

    def close(self) -> None:
        self._requests.put(None)

    def _serve(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            ping, done, errors = request
            try:
                ping()
            except Exception as e:  # noqa: BLE001 - reported as the probe's answer
                errors.append(f"the Spark probe failed: {type(e).__name__}: "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}")
            finally:
                done.set()
