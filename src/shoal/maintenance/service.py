"""Wiring maintenance onto an open client: a worker, and a background service.

`build_worker(db)` makes a `MaintenanceWorker` over the client's catalog, store, formats and
commit coordinator, with compaction tasks on the client's Spark session (started only when
the first compaction needs it). `MaintenanceService` runs a scheduler and one worker on a
daemon thread (`shoal maintain` without `--once`, and the server): adding capacity means
starting another `shoal maintain` anywhere that reaches the same catalog and store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from shoal.commit import CommitCoordinator
from shoal.catalog.workspace import Workspace
from shoal.maintenance.runner import SparkTaskRunner
from shoal.maintenance.scheduler import ScheduleSettings, Scheduler
from shoal.maintenance.worker import MaintenanceWorker, WorkerSettings

log = logging.getLogger(__name__)


class _SparkHolder(Protocol):
    @property
    def spark(self) -> Any: ...


class MaintenanceHost(Workspace, Protocol):
    """A workspace with its commit coordinator and a Spark session for compaction tasks."""

    @property
    def coordinator(self) -> CommitCoordinator: ...

    @property
    def query_engine(self) -> _SparkHolder: ...


def build_worker(db: MaintenanceHost, *, name: str | None = None,
                 settings: WorkerSettings | None = None,
                 on_stage: Callable[..., None] | None = None) -> MaintenanceWorker:
    return MaintenanceWorker(
        db.catalog, db.store, db.coordinator, db.formats,
        lambda: SparkTaskRunner(db.query_engine.spark),
        storage_url=db.config.resolved_storage_url, s3_endpoint=db.config.s3_endpoint,
        name=name, settings=settings, on_stage=on_stage)


class MaintenanceService:
    """Scheduler + worker on one daemon thread; `start()` / `stop()`."""

    def __init__(self, db: MaintenanceHost, *, worker: MaintenanceWorker | None = None,
                 schedule: ScheduleSettings | None = None, run_worker: bool = True,
                 start_delay_s: float = 0.0) -> None:
        self.db = db
        self.worker = worker or build_worker(db)
        self.scheduler = Scheduler(db.catalog, schedule)
        self.run_worker = run_worker
        self.start_delay_s = start_delay_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shoal-maintenance",
                                        daemon=True)

    def start(self) -> MaintenanceService:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        if self._stop.wait(self.start_delay_s):
            return
        if self.run_worker:
            self.worker.run_forever(self._stop, before_poll=self._tick)
        else:
            while not self._stop.is_set():
                try:
                    self.scheduler.tick()
                except Exception:  # retried next poll
                    log.exception("maintenance scheduler tick failed; retrying next poll")
                self._stop.wait(self.worker.settings.poll_s)

    def _tick(self) -> None:
        self.scheduler.tick()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop claiming; a unit in progress finishes (or its lease lapses for another)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
