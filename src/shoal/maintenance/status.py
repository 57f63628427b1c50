"""The maintenance status document: what ran, when, and what it changed.

The same JSON answers `shoal maintain --status --format json` and `GET /v1/maintenance`:

    {"counts": {"pending": n, "running": n, "done": n, "failed": n},
     "last": {"compact": unit, "retention": unit, "gc": unit, "ledger_sweep": unit},
     "units": [unit, ...]}          # newest first, at most `limit`

where a unit is `{"id", "kind", "table", "state", "attempts", "worker", "lease_expires_at",
"created_at", "updated_at", "result"}` (times in seconds since the epoch; `result` is the
worker's report, e.g. a compaction's extents removed/added and MB/s, or `{"error": ...}`).
"""

from __future__ import annotations

from typing import Any

from shoal.catalog.base import Catalog, WorkUnit
from shoal.maintenance.worker import KINDS


def unit_json(u: WorkUnit, names: dict[int, str]) -> dict[str, Any]:
    return {"id": u.id, "kind": u.kind,
            "table": names.get(u.table_id) if u.table_id is not None else None,
            "state": u.state, "attempts": u.attempts, "worker": u.lease_owner,
            "lease_expires_at": u.lease_expires_at, "created_at": u.created_at,
            "updated_at": u.updated_at, "result": u.result}


def maintenance_status(catalog: Catalog, *, limit: int = 50,
                       table: str | None = None) -> dict[str, Any]:
    names = {t.id: t.name for t in catalog.list_tables()}
    units = catalog.list_work(table=table, limit=max(limit, 1000))
    counts = {s: 0 for s in ("pending", "running", "done", "failed")}
    last: dict[str, Any] = {}
    for u in units:
        counts[u.state] = counts.get(u.state, 0) + 1
        if u.kind in KINDS and u.kind not in last and u.state in ("done", "failed"):
            last[u.kind] = unit_json(u, names)
    return {"counts": counts, "last": last,
            "units": [unit_json(u, names) for u in units[:limit]]}
