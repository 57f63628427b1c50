"""One supervisor for every pipeline bound to a table: Kafka topics,
file-drop paths and any later kind (scrape jobs), all under the same rules.

A kind plugs in through `BindingKind`: its `name` (`kafka`: thread names, the logger
`shoal.<name>`, the metric prefix), `is_bound(properties)` (do a table's properties bind
it), `resolve(table)` (the binding to run now, a comparable value; None when the table is
unbound or gone; an error when the binding is invalid) and `run(binding, stop, state)` (run
until `stop` is set, then return; raise on failure), plus the names of the per-binding
counters and gauges that `run` reports into its `BindingState`.

The rules, the same for every kind:

- Discovery: `rescan()` (every `rescan_s` once `start()`ed, at once after `poke()`) lists
  the catalog's tables; each (kind, table) the table's properties bind that has no runner
  gets one: a thread `shoal-<kind>-<table>` that resolves the binding and runs it.
- Change and retirement: each rescan also resolves every runner's binding again. A table
  no longer bound (property removed, table dropped or renamed) retires its runner with a
  warning saying why: the run is stopped, the runner ends and its state (its metrics)
  goes. A binding that differs from the one the runner last started with stops the run,
  and the runner starts again at once with the new one (a runner waiting to retry wakes
  up). A binding that no longer resolves (a bad new
  value) leaves the run going as it is, with one warning per distinct error; the runner
  meets the error when it next starts.
- Failure and back-off: a run that raises or ends without being asked to, and a binding the
  runner cannot resolve, are failures: `up` drops to 0, the error is kept, and the runner
  starts again after `restart_delay_s`, doubled with each consecutive failure up to
  `max_restart_delay_s`. A run that lasted at least `reset_after_s` starts the count anew
  (a pipeline that ran for a day and failed once restarts after `restart_delay_s`). A
  retirement, a changed binding or `stop()` cuts the wait short.
- Shutdown: `stop()` asks every run to stop (a run finishes its unit of work first: a
  file-drop scan commits, a Kafka batch read is committed), then waits for the runners.

Per binding, a `BindingState` holds `up`, the last `error`, `restarts` and `failures`, and
the kind's counters and gauges; the server exports them as Prometheus metrics
(`shoal.server.pipelines`). Time is read from `clock` and every wait goes through `sleep`
(both injected), so tests drive the rules without sleeping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from shoal.errors import ShoalError

if TYPE_CHECKING:
    from shoal.catalog.base import Catalog

log = logging.getLogger("shoal.pipelines")

Clock = Callable[[], float]
# Wait up to `seconds` unless the event is set first; True when it was set.
Sleep = Callable[[threading.Event, float], bool]
MetricNames = Sequence[tuple[str, str]]    # (name, help text)
Outcome = Literal["retired", "stopped", "failed"]   # of one attempt to run a binding


def wait_event(event: threading.Event, seconds: float) -> bool:
    """The real `Sleep`: block on the event for at most `seconds`."""
    return event.wait(seconds)


@dataclass
class BindingState:
    """What is known about one (kind, table) binding; read by the metrics scrape.

    `counters` and `gauges` hold exactly the names the kind declares (`count` refuses
    another), so every binding of a kind exports the same metric families."""

    kind: str
    table: str
    up: bool = False
    error: str | None = None
    restarts: int = 0           # runs started after the first (after a failure or a change)
    failures: int = 0           # runs that failed or could not start
    counters: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, float | None] = field(default_factory=dict)

    def count(self, **amounts: int) -> None:
        """Add to the kind's counters (names as declared by the kind)."""
        for name, amount in amounts.items():
            if name not in self.counters:
                raise ValueError(f"{self.kind} declares no counter {name!r}")
            self.counters[name] += amount

    def gauge(self, name: str, value: float | None) -> None:
        """Set one of the kind's gauges (None: no value, left out of the metrics)."""
        if name not in self.gauges:
            raise ValueError(f"{self.kind} declares no gauge {name!r}")
        self.gauges[name] = value

    def report(self, *, up: bool, error: str | None = None) -> None:
        """The run's own view of its health (e.g. a file-drop scan failed but the loop goes on)."""
        self.up, self.error = up, error


class BindingKind(Protocol):
    """One kind of bound pipeline (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def counters(self) -> MetricNames: ...

    @property
    def gauges(self) -> MetricNames: ...

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        """True when a table's properties bind this kind."""
        ...

    def resolve(self, table: str) -> Any | None:
        """The table's binding now (compared with `==` to notice a change); None when the
        table is unbound or gone. Raises (a `ShoalError`) when the binding is invalid."""
        ...

    def run(self, binding: Any, stop: threading.Event, state: BindingState) -> None:
        """Run `binding` until `stop` is set, then return; raise on failure."""
        ...


class _Runner:
    """The thread that runs one (kind, table) binding, restart after restart."""

    def __init__(self, kind: BindingKind, table: str, state: BindingState) -> None:
        self.kind = kind
        self.table = table
        self.state = state
        self.binding: Any | None = None     # of the last run started (None: did not resolve)
        self.wake = threading.Event()       # set: end the current run, or the wait, now
        self.retired = False
        self.attempts = 0
        self.warned: str | None = None      # the last resolve error the rescan warned about
        self.thread: threading.Thread | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.kind.name, self.table


class BindingSupervisor:
    """Runs every binding of `kinds` found in `catalog` (see the module docstring)."""

    def __init__(self, catalog: Catalog, kinds: Sequence[BindingKind], *,
                 rescan_s: float = 10.0, restart_delay_s: float = 5.0,
                 max_restart_delay_s: float = 300.0, reset_after_s: float = 60.0,
                 clock: Clock = time.monotonic, sleep: Sleep = wait_event) -> None:
        names = [k.name for k in kinds]
        if len(set(names)) != len(names):
            raise ValueError(f"binding kinds must have distinct names, got {names}")
        if not 0 < restart_delay_s <= max_restart_delay_s:
            raise ValueError("need 0 < restart_delay_s <= max_restart_delay_s, got "
                             f"{restart_delay_s} and {max_restart_delay_s}")
        self.catalog = catalog
        self.kinds = tuple(kinds)
        self.rescan_s = rescan_s
        self.restart_delay_s = restart_delay_s
        self.max_restart_delay_s = max_restart_delay_s
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._sleep = sleep
        self.states: dict[tuple[str, str], BindingState] = {}
        self._runners: dict[tuple[str, str], _Runner] = {}
        self._stopping = threading.Event()
        self._poked = threading.Event()
        self._lock = threading.Lock()
        self._scanner: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Rescan now and every `rescan_s` in the background, until `stop()`."""
        self._scanner = threading.Thread(target=self._scan_loop, name="shoal-pipelines-scan",
                                         daemon=True)
        self._scanner.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop every run and wait (up to `timeout_s` per thread) for the runners to end."""
        self._stopping.set()
        self._poked.set()
        with self._lock:   # a rescan starts runners under the lock: none starts after this
            runners = list(self._runners.values())
            for r in runners:
                r.wake.set()
        if self._scanner is not None:
            self._scanner.join(timeout_s)
        for r in runners:
            if r.thread is not None:
                r.thread.join(timeout_s)
                if r.thread.is_alive():
                    log.warning("%s pipeline of table %s did not stop within %gs",
                                r.kind.name, r.table, timeout_s)

    def poke(self) -> None:
        """Rescan now instead of at the end of the current wait (a table was dropped,
        renamed or had its properties changed)."""
        self._poked.set()

    def running(self, kind: str | None = None) -> list[str]:
        """Tables that have a runner (of `kind`, or of any kind), sorted."""
        with self._lock:
            return sorted(t for k, t in self._runners if kind is None or k == kind)

    def thread(self, kind: str, table: str) -> threading.Thread | None:
        """The runner thread of one binding (for tests and diagnostics)."""
        with self._lock:
            r = self._runners.get((kind, table))
            return None if r is None else r.thread

    def snapshot(self) -> list[BindingState]:
        """The states of every binding (the objects themselves, read at scrape time)."""
        with self._lock:
            return list(self.states.values())

    # ---- discovery, change, retirement ----------------------------------------------------
    def rescan(self) -> None:
        """One pass: start runners for new bindings, restart changed ones, retire the gone.

        Raises what listing the catalog raises (the background loop logs it and retries)."""
        tables = self.catalog.list_tables()
        names = {t.name for t in tables}
        bound = {(k.name, t.name) for t in tables for k in self.kinds
                 if k.is_bound(t.properties)}
        with self._lock:
            if self._stopping.is_set():
                return
            existing = list(self._runners.values())
            for kind in self.kinds:
                for table in sorted(t for k, t in bound if k == kind.name):
                    if (kind.name, table) not in self._runners:
                        self._start_runner(kind, table)
        for r in existing:
            if r.key not in bound:
                logging.getLogger(f"shoal.{r.kind.name}").warning(
                    "%s pipeline of table %s stops: %s", r.kind.name, r.table,
                    "the table no longer binds it" if r.table in names else
                    "the table is gone (dropped or renamed)")
                self._retire(r)
            else:
                self._recheck(r)

    def _start_runner(self, kind: BindingKind, table: str) -> None:
        # Called with the lock held.
        state = BindingState(kind.name, table, counters={n: 0 for n, _ in kind.counters},
                             gauges={n: None for n, _ in kind.gauges})
        r = _Runner(kind, table, state)
        r.thread = threading.Thread(target=self._run, args=(r,),
                                    name=f"shoal-{kind.name}-{table}", daemon=True)
        self.states[r.key] = state
        self._runners[r.key] = r
        r.thread.start()

    def _retire(self, r: _Runner) -> None:
        with self._lock:
            r.retired = True
            r.wake.set()

    def _recheck(self, r: _Runner) -> None:
        """Restart `r` when its binding changed; retire it when the binding is gone."""
        try:
            current = r.kind.resolve(r.table)
        except ShoalError as e:
            message = f"{type(e).__name__}: {e}"
            if message != r.warned:
                r.warned = message
                logging.getLogger(f"shoal.{r.kind.name}").warning(
                    "%s binding of table %s does not resolve (%s); the running pipeline "
                    "goes on until it restarts", r.kind.name, r.table, message)
            return
        r.warned = None
        if current is None:
            self._retire(r)
        elif current != r.binding:
            with self._lock:
                r.wake.set()

    def _scan_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.rescan()
            except Exception:   # the catalog is briefly unavailable: try again later
                log.exception("scanning tables for bound pipelines failed")
            self._sleep(self._poked, self.rescan_s)
            self._poked.clear()

    # ---- one runner -----------------------------------------------------------------------
    def _run(self, r: _Runner) -> None:
        failures = 0    # consecutive
        try:
            while True:
                with self._lock:
                    if self._stopping.is_set() or r.retired:
                        return
                    wake = r.wake = threading.Event()
                started = self._clock()
                outcome = self._attempt(r, wake)
                if outcome == "retired":
                    with self._lock:
                        r.retired = True
                    return
                if outcome == "stopped":
                    failures = 0
                    continue    # stop, retirement or a changed binding: the loop decides
                if self._clock() - started >= self.reset_after_s:
                    failures = 0
                failures += 1
                delay = min(self.restart_delay_s * 2.0 ** min(failures - 1, 64),
                            self.max_restart_delay_s)
                logging.getLogger(f"shoal.{r.kind.name}").info(
                    "%s pipeline of table %s restarts in %gs", r.kind.name, r.table, delay)
                self._sleep(wake, delay)
        finally:
            r.state.up = False
            with self._lock:
                self._runners.pop(r.key, None)
                if r.retired:
                    self.states.pop(r.key, None)

    def _attempt(self, r: _Runner, wake: threading.Event) -> Outcome:
        """Resolve and run once: "retired" (no binding), "stopped" (asked to) or "failed"."""
        logger = logging.getLogger(f"shoal.{r.kind.name}")
        state = r.state
        if r.attempts:
            state.restarts += 1
        r.attempts += 1
        what = "cannot start"
        try:
            binding = r.kind.resolve(r.table)
            r.binding = binding
            if binding is None:
                return "retired"
            state.up, state.error = True, None
            what = "failed"
            r.kind.run(binding, wake, state)
        except ShoalError as e:
            self._failed(state, e)
            logger.error("%s pipeline of table %s %s: %s", r.kind.name, r.table, what,
                         state.error)
            return "failed"
        except Exception as e:
            self._failed(state, e)
            logger.exception("%s pipeline of table %s %s", r.kind.name, r.table, what)
            return "failed"
        finally:
            state.up = False
        if wake.is_set():
            return "stopped"
        state.failures += 1
        state.error = "the pipeline ended without being asked to stop"
        logger.error("%s pipeline of table %s: %s", r.kind.name, r.table, state.error)
        return "failed"

    @staticmethod
    def _failed(state: BindingState, e: BaseException) -> None:
        state.failures += 1
        state.up, state.error = False, f"{type(e).__name__}: {e}"
