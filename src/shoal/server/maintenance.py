"""Maintenance in the server: a background scheduler + worker, and its status endpoint.

`install_maintenance(app, db, enabled=...)` (called by `create_app`) registers
`GET /v1/maintenance` (admin scope; `?limit=N`, `?table=t`), the maintenance metrics on the
app's registry, and returns start/stop callables for the lifespan. With `enabled`, the
service starts `start_delay_s` after startup (the server is ready first) and runs the
scheduler and one worker (compaction on the server's warm Spark session); at shutdown it
stops claiming and lets the unit in progress finish. Without it the endpoint still reports
the units run by other workers (`shoal maintain`).

The answer is the document of `shoal.maintenance.status` plus
`"service": {"running", "worker"}` (null when this server runs no maintenance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, FastAPI, Query, Request

from shoal.client import Shoal
from shoal.maintenance.metrics import MaintenanceCollector
from shoal.maintenance.service import MaintenanceService
from shoal.maintenance.status import maintenance_status
from shoal.maintenance.worker import WorkerStats
from shoal.http.auth import require_scope
from shoal.http.state import server_state

SERVER_START_DELAY_S = 60.0

router = APIRouter(tags=["maintenance"])


@router.get("/v1/maintenance", dependencies=[Depends(require_scope("admin"))])
async def get_maintenance(request: Request,
                          limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                          table: str | None = None) -> dict[str, Any]:
    state = server_state(request)
    doc = await anyio.to_thread.run_sync(
        lambda: maintenance_status(state.db.catalog, limit=limit, table=table))
    service: MaintenanceService | None = request.app.state.maintenance
    doc["service"] = (None if service is None else
                      {"running": service.running, "worker": service.worker.name})
    return doc


def install_maintenance(app: FastAPI, db: Shoal, *, enabled: bool,
                        start_delay_s: float = SERVER_START_DELAY_S
                        ) -> tuple[Callable[[], None], Callable[[], None]]:
    """Wire the endpoint and metrics; return (start, stop) for the lifespan."""
    # `app.state.maintenance` is read at start, stop and scrape time: a caller may replace
    # the service (e.g. other schedule settings) before the app starts.
    app.state.maintenance = (MaintenanceService(db, start_delay_s=start_delay_s)
                             if enabled else None)
    app.include_router(router)

    def stats() -> WorkerStats | None:
        service = app.state.maintenance
        return None if service is None else service.worker.stats

    app.state.shoal.metrics.registry.register(MaintenanceCollector(db.catalog, stats))

    def start() -> None:
        if app.state.maintenance is not None:
            app.state.maintenance.start()

    def stop() -> None:
        if app.state.maintenance is not None:
            app.state.maintenance.stop()

    return start, stop
