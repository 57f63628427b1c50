"""Sync bindings as a kind of bound pipeline (`shoal.frontends.supervisor`): every table whose
properties set `sync_source` runs a `SyncPipeline` in its own thread, in process (the stream
of changes is small per batch; the snapshot is read as Arrow).

The source's host must be allowed (`SHOAL_ALLOWED_HOSTS`), checked again each time the
binding starts. Exactly-once holds across restarts: each run resumes at the catalog's
position.

Per binding, counters `changes` (row changes read from the source), `rows` (rows committed,
snapshot included) and `commits`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import TableNotFoundError
from shoal.frontends.supervisor import BindingState, MetricNames
from shoal.frontends.sync.binding import SyncBinding, check_hosts, is_bound, parse_binding
from shoal.locations import LocationPolicy

if TYPE_CHECKING:
    from shoal.client import Shoal
    from shoal.frontends.sync.pipeline import SyncProgress


def resolve_sync_binding(db: Shoal, table: str) -> SyncBinding | None:
    """The table's sync binding now; None when the table is unbound or gone."""
    try:
        props = db.catalog.load_table(table).properties
    except TableNotFoundError:
        return None
    if not is_bound(props):
        return None
    binding = parse_binding(table, props)
    check_hosts(binding, LocationPolicy.from_config(db.config))
    return binding


class SyncKind:
    """Sync bindings of the tables of `db` (a `BindingKind`)."""

    name = "sync"
    counters: MetricNames = (
        ("changes", "Row changes read from the source"),
        ("rows", "Rows committed by the sync (initial snapshot included)"),
        ("commits", "Catalog commits of the sync"))
    gauges: MetricNames = ()

    def __init__(self, db: Shoal, *,
                 on_commit: Callable[[str, SyncProgress], None] | None = None) -> None:
        self.db = db
        self.on_commit = on_commit      # (table, progress) after each commit of a run

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return is_bound(properties)

    def resolve(self, table: str) -> SyncBinding | None:
        return resolve_sync_binding(self.db, table)

    def run(self, binding: SyncBinding, stop: threading.Event, state: BindingState) -> None:
        from shoal.frontends.sync.pipeline import SyncPipeline, SyncProgress

        seen = SyncProgress()

        def on_commit(p: SyncProgress) -> None:
            state.count(changes=p.changes - seen.changes, rows=p.rows - seen.rows,
                        commits=p.commits - seen.commits)
            seen.changes, seen.rows, seen.commits = p.changes, p.rows, p.commits
            if self.on_commit is not None:
                self.on_commit(binding.table, p)

        pipeline = SyncPipeline(self.db, binding, stop=stop, on_commit=on_commit)
        state.report(up=True)
        try:
            pipeline.run()
        finally:
            pipeline.close()
