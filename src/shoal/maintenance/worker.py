"""The maintenance worker: claim a work unit, run it, record what it changed (docs/maintenance.md).

Unit kinds and payloads (`payload["table"]` names the table where there is one):

| kind | does | result (besides `worker`, `seconds`, `attempt`) |
|---|---|---|
| `compact` | `compact_table` (Spark job) | groups, extents removed/added, rows, MB/s |
| `retention` | `apply_retention` | extents/rows removed, snapshots expired, files |
| `gc` | purge dropped tables past retention, `collect_garbage` | orphans, deleted, purged |
| `ledger_sweep` | ledger rows older than 25 h deleted | swept |

Claiming is the catalog's: `FOR UPDATE SKIP LOCKED` on Postgres, the IMMEDIATE write lock
plus the lease fields on SQLite; a unit whose lease expired (its worker died) is claimable
again. While a unit runs, a heartbeat renews its lease every `lease_s / 3`; if a renewal
finds the lease taken, the worker stops before committing (compaction's `should_continue`),
so a live worker's unit is never run by two workers. A unit claimed for the
`max_attempts + 1`-th time is failed without running (a unit that kills its worker must not
loop forever). Errors fail the unit with the message in its result; the worker goes on.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.catalog.base import Catalog, WorkUnit
from shoal.commit import SWEEP_AGE_S, CommitCoordinator
from shoal.format.base import SegmentFormat
from shoal.maintenance.compaction import compact_table
from shoal.maintenance.gc import DEFAULT_GRACE_S, collect_garbage
from shoal.maintenance.retention import apply_retention, purge_dropped_tables
from shoal.maintenance.runner import TaskRunner
from shoal.storage.base import ObjectStore

KINDS = ("compact", "retention", "gc", "ledger_sweep")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSettings:
    lease_s: float = 120.0
    poll_s: float = 2.0
    gc_grace_s: float = DEFAULT_GRACE_S
    ledger_max_age_s: float = SWEEP_AGE_S
    max_attempts: int = 5
    kinds: tuple[str, ...] = KINDS


@dataclass(frozen=True)
class UnitOutcome:
    unit: WorkUnit
    ok: bool
    result: dict[str, Any]
    recorded: bool          # False: the lease was lost, another worker owns the unit now


@dataclass
class WorkerStats:
    """Counters since the worker started (exported as metrics)."""

    units: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, ok|failed) -> n
    seconds: dict[str, float] = field(default_factory=dict)
    extents_compacted: int = 0
    extents_written: int = 0
    bytes_compacted: int = 0
    extents_expired: int = 0
    rows_expired: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    orphans_deleted: int = 0
    ledger_swept: int = 0
    last_finished_at: float | None = None

    def record(self, kind: str, ok: bool, seconds: float, result: dict[str, Any]) -> None:
        key = (kind, "ok" if ok else "failed")
        self.units[key] = self.units.get(key, 0) + 1
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
        self.last_finished_at = time.time()
        if not ok:
            return
        self.extents_compacted += result.get("extents_removed", 0) if kind == "compact" else 0
        self.extents_written += result.get("extents_added", 0)
        self.bytes_compacted += result.get("bytes_in", 0)
        if kind == "retention":
            self.extents_expired += result.get("extents_removed", 0)
            self.rows_expired += result.get("rows_removed", 0)
            self.snapshots_expired += result.get("snapshots_expired", 0)
            self.files_deleted += result.get("files_deleted", 0)
        self.orphans_deleted += result.get("deleted", 0) if kind == "gc" else 0
        self.ledger_swept += result.get("swept", 0)


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class _Lease:
    """Renews a unit's lease in the background; `held` turns False once it is lost."""

    def __init__(self, catalog: Catalog, unit: WorkUnit, worker: str, lease_s: float) -> None:
        self.held = True
        self._stop = threading.Event()
        self._catalog, self._unit, self._worker, self._lease_s = catalog, unit, worker, lease_s
        self._thread = threading.Thread(target=self._run, name=f"shoal-lease-{unit.id}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._lease_s / 3):
            try:
                if not self._catalog.renew_work(self._unit.id, self._worker,
                                                lease_s=self._lease_s):
                    self.held = False
                    return
            except Exception:  # noqa: BLE001 - a failed renewal is retried; the lease may lapse
                log.warning("lease renewal of unit %d failed", self._unit.id, exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class MaintenanceWorker:
    """Claims and runs units. `runner` builds the Spark task runner on first need."""

    def __init__(self, catalog: Catalog, store: ObjectStore, coordinator: CommitCoordinator,
                 formats: dict[str, SegmentFormat], runner: Callable[[], TaskRunner], *,
                 storage_url: str, s3_endpoint: str | None = None, name: str | None = None,
                 settings: WorkerSettings | None = None,
                 on_stage: Callable[..., None] | None = None) -> None:
        self.catalog = catalog
        self.store = store
        self.coordinator = coordinator
        self.formats = formats
        self._runner_factory = runner
        self._runner: TaskRunner | None = None
        self.storage_url = storage_url
        self.s3_endpoint = s3_endpoint
        self.name = name or default_worker_name()
        self.settings = settings or WorkerSettings()
        self.on_stage = on_stage
        self.stats = WorkerStats()
        # What decides whether a dropped table's retention has passed (tests move it).
        self.clock: Callable[[], float] = time.time

    @property
    def runner(self) -> TaskRunner:
        if self._runner is None:
            self._runner = self._runner_factory()
        return self._runner

    # ---- one unit -------------------------------------------------------------------------
    def run_one(self) -> UnitOutcome | None:
        """Claim and run one unit; None when nothing is claimable."""
        s = self.settings
        unit = self.catalog.claim_work(self.name, kinds=list(s.kinds), lease_s=s.lease_s)
        if unit is None:
            return None
        if unit.attempts > s.max_attempts:
            result = {"error": f"gave up after {unit.attempts - 1} attempts",
                      "worker": self.name, "attempt": unit.attempts}
            recorded = self.catalog.finish_work(unit.id, self.name, ok=False, result=result)
            self.stats.record(unit.kind, False, 0.0, result)
            return UnitOutcome(unit, False, result, recorded)
        lease = _Lease(self.catalog, unit, self.name, s.lease_s)
        started = time.time()
        t0 = time.perf_counter()
        try:
            doc = self._dispatch(unit, lambda: lease.held)
            ok = True
        except Exception as e:  # noqa: BLE001 - the unit fails, the worker goes on
            log.warning("maintenance unit %d (%s) failed", unit.id, unit.kind, exc_info=True)
            doc, ok = {"error": f"{type(e).__name__}: {e}"}, False
        finally:
            lease.stop()
        seconds = time.perf_counter() - t0
        result = {**doc, "worker": self.name, "attempt": unit.attempts,
                  "started_at": started, "seconds": round(seconds, 3)}
        recorded = self.catalog.finish_work(unit.id, self.name, ok=ok, result=result)
        self.stats.record(unit.kind, ok, seconds, result)
        return UnitOutcome(unit, ok, result, recorded)

    def run_until_idle(self, *, max_units: int | None = None) -> list[UnitOutcome]:
        done: list[UnitOutcome] = []
        while max_units is None or len(done) < max_units:
            outcome = self.run_one()
            if outcome is None:
                break
            done.append(outcome)
        return done

    def run_forever(self, stop: threading.Event, *,
                    before_poll: Callable[[], None] | None = None) -> None:
        """Run units until `stop` is set; `before_poll` (e.g. a scheduler tick) runs
        before every claim attempt that follows an idle wait."""
        while not stop.is_set():
            if before_poll is not None:
                try:
                    before_poll()
                except Exception:  # noqa: BLE001 - scheduling retries next poll
                    log.warning("maintenance scheduling failed", exc_info=True)
            try:
                while not stop.is_set() and self.run_one() is not None:
                    pass
            except Exception:  # noqa: BLE001 - catalog unavailable: try again later
                log.warning("claiming maintenance work failed", exc_info=True)
            stop.wait(self.settings.poll_s)

    # ---- dispatch -------------------------------------------------------------------------
    def _dispatch(self, unit: WorkUnit, held: Callable[[], bool]) -> dict[str, Any]:
        table = unit.payload.get("table")
        if unit.kind == "compact":
            report = compact_table(
                self.catalog, self.coordinator, self.runner, _need(unit, table),
                storage_url=self.storage_url, s3_endpoint=self.s3_endpoint,
                formats=self.formats, max_groups=unit.payload.get("max_groups"),
                should_continue=held, max_commit_delay_s=self.settings.gc_grace_s / 2,
                on_stage=self.on_stage)
            return report.to_json()
        if unit.kind == "retention":
            return apply_retention(self.catalog, self.coordinator, self.store,
                                   _need(unit, table)).to_json()
        if unit.kind == "gc":
            grace = float(unit.payload.get("grace_s", self.settings.gc_grace_s))
            purged = purge_dropped_tables(self.catalog, self.store, now=self.clock())
            return {**collect_garbage(self.catalog, self.store, grace_s=grace).to_json(),
                    **purged.to_json()}
        if unit.kind == "ledger_sweep":
            return {"swept": self.catalog.sweep_ledger(self.settings.ledger_max_age_s)}
        raise ValueError(f"unknown maintenance unit kind {unit.kind!r} "
                         f"(expected one of {', '.join(KINDS)})")


def _need(unit: WorkUnit, table: str | None) -> str:
    if not table:
        raise ValueError(f"{unit.kind} unit {unit.id} names no table")
    return table
