"""`shoal maintain`: run a maintenance worker, or show what maintenance did (docs/maintenance.md).

- `shoal maintain`: scheduler + worker until SIGINT/SIGTERM; start more anywhere that
  reaches the same catalog and store to add capacity (units are claimed, never shared).
- `shoal maintain --once`: enqueue everything due now (intervals ignored, duplicates not),
  run units until none is claimable, print what ran (JSON lines), exit 0 (1 if a unit failed).
- `shoal maintain --status [--format table|json]`: the status document of
  `shoal.maintenance.status` (the same as `GET /v1/maintenance`).
- `shoal maintain --expire-now TABLE` (repeatable): expire every snapshot of TABLE older
  than its current one at once, whatever its `snapshot_retention` (time travel to them ends,
  and the files only they held are deleted: the last step of an erasure after a DELETE);
  prints one JSON line per table, then exits.
- `--kind compact` (repeatable) limits what this worker claims and what `--once` enqueues;
  `--metrics-port N` serves this worker's Prometheus metrics on 127.0.0.1:N.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import typer

from shoal.cli.common import (EXIT_ERROR, ListFormat, connect, print_json, print_table,
                              stdout_console)


class UnitKind(StrEnum):
    """`--kind`: the maintenance unit kinds (`shoal.maintenance.worker.KINDS`)."""

    COMPACT = "compact"
    RETENTION = "retention"
    GC = "gc"
    LEDGER_SWEEP = "ledger_sweep"


def maintain_command(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Run what is due, then exit")] = False,
    status: Annotated[bool, typer.Option("--status", help="Show what ran, then exit")] = False,
    fmt: Annotated[ListFormat, typer.Option("--format", help="Output format (with --status)")
                   ] = ListFormat.TABLE,
    kind: Annotated[list[UnitKind] | None, typer.Option(
        "--kind", help="Unit kinds to run (repeatable; default: all)")] = None,
    schedule: Annotated[bool, typer.Option("--schedule/--no-schedule",
                                           help="Enqueue due units (default) or only run")
                        ] = True,
    lease_s: Annotated[float, typer.Option("--lease", help="Lease seconds of a unit")] = 120.0,
    poll_s: Annotated[float, typer.Option("--poll", help="Seconds between idle polls")] = 2.0,
    gc_grace_s: Annotated[float, typer.Option(
        "--gc-grace", help="Orphans younger than this many seconds are kept")] = 3600.0,
    limit: Annotated[int, typer.Option("--limit", help="Units shown by --status")] = 20,
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", help="Serve Prometheus metrics on 127.0.0.1:PORT")] = None,
    expire_now: Annotated[list[str] | None, typer.Option(
        "--expire-now", help="Expire all snapshots of this table but the current one, "
                             "deleting the files only they hold (repeatable); then exit")
                          ] = None,
) -> None:
    """Run maintenance: compaction, retention, orphan GC, ledger sweep."""
    from shoal.maintenance.scheduler import Scheduler
    from shoal.maintenance.service import MaintenanceService, build_worker
    from shoal.maintenance.status import maintenance_status
    from shoal.maintenance.worker import KINDS, WorkerSettings

    db = connect(ctx)
    try:
        if expire_now:
            from shoal.maintenance.retention import expire_snapshots

            for table in expire_now:
                report = expire_snapshots(db.catalog, db.store, table, older_than_s=0)
                typer.echo(json.dumps({"table": table, **report.to_json()}))
            return
        if status:
            _print_status(maintenance_status(db.catalog, limit=limit), fmt)
            return
        settings = WorkerSettings(lease_s=lease_s, poll_s=poll_s, gc_grace_s=gc_grace_s,
                                  kinds=tuple(k.value for k in kind or ()) or KINDS)
        worker = build_worker(db, settings=settings)
        if metrics_port is not None:
            _serve_metrics(worker, metrics_port)
        if once:
            if schedule:
                Scheduler(db.catalog).tick(force=True, kinds=settings.kinds)
            failed = False
            for outcome in worker.run_until_idle():
                failed |= not outcome.ok
                typer.echo(json.dumps({"unit": outcome.unit.id, "kind": outcome.unit.kind,
                                       "table": outcome.unit.payload.get("table"),
                                       "ok": outcome.ok, "result": outcome.result}))
            if failed:
                raise typer.Exit(EXIT_ERROR)
            return
        service = MaintenanceService(db, worker=worker) if schedule else None
        stop = threading.Event()
        _on_signals(stop.set)
        typer.echo(f"shoal maintain: worker {worker.name} running "
                   f"({', '.join(settings.kinds)}); Ctrl-C stops", err=True)
        if service is not None:
            service.start()
            stop.wait()
            service.stop()
        else:
            worker.run_forever(stop)
    finally:
        db.close()


def _on_signals(handler: Callable[[], None]) -> None:
    def _handle(_signum: int, _frame: Any) -> None:
        handler()

    signal.signal(signal.SIGINT, _handle)
    signal.signal(signal.SIGTERM, _handle)


def _serve_metrics(worker: Any, port: int) -> None:
    from prometheus_client import CollectorRegistry, start_http_server

    from shoal.maintenance.metrics import MaintenanceCollector

    registry = CollectorRegistry(auto_describe=True)
    registry.register(MaintenanceCollector(worker.catalog, lambda: worker.stats))
    start_http_server(port, addr="127.0.0.1", registry=registry)


def _print_status(doc: dict[str, Any], fmt: ListFormat) -> None:
    if fmt is ListFormat.JSON:
        print_json(doc)
        return
    stdout_console().print("units: " + ", ".join(f"{k} {v}" for k, v in doc["counts"].items()))
    print_table(("id", "kind", "table", "state", "attempts", "finished", "changed"),
                ((str(u["id"]), u["kind"], u["table"] or "", u["state"], str(u["attempts"]),
                  _finished(u), _changed(u)) for u in doc["units"]))


def _finished(u: dict[str, Any]) -> str:
    if not u["updated_at"]:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(u["updated_at"]))


def _changed(u: dict[str, Any]) -> str:
    r = u.get("result") or {}
    if "error" in r:
        return f"error: {r['error']}"[:120]
    if u["kind"] == "compact":
        return (f"{r.get('extents_removed', 0)} -> {r.get('extents_added', 0)} extents, "
                f"{r.get('rows', 0)} rows, {r.get('mb_per_s', 0)} MB/s")
    if u["kind"] == "retention":
        return (f"{r.get('extents_removed', 0)} extents / {r.get('rows_removed', 0)} rows "
                f"expired, {r.get('snapshots_expired', 0)} snapshots, "
                f"{r.get('files_deleted', 0)} files deleted")
    if u["kind"] == "gc":
        return f"{r.get('deleted', 0)} of {r.get('orphans', 0)} orphans deleted"
    if u["kind"] == "ledger_sweep":
        return f"{r.get('swept', 0)} ledger keys swept"
    return ""

