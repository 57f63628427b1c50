"""File-drop as a kind of bound pipeline (`shoal.frontends.supervisor`): every table whose
properties bind a path (`WITH (filedrop_path='...')`, see `binding.py`) runs the poll loop
of a `FileDropPipeline` on the client's Spark session, one scan every `filedrop_interval`.

A path from the table's properties must be allowed (`SHOAL_ALLOWED_PATHS`). A scan that
fails is counted and reported (`up` 0 until a scan succeeds) and the loop goes on: the next
scan retries what did not land (exactly-once holds through the ledger). Asked to stop, the
loop ends after the scan in progress has committed.

Per binding, counters `files` (new files committed), `rows`, `rejects` (lines sent to the
reject table), `bytes` (of the objects read, as stored), `duplicates`, `scans` and
`scan_errors`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import ShoalError, TableNotFoundError
from shoal.frontends.filedrop.binding import FileDropBinding, is_bound, resolve_binding
from shoal.frontends.filedrop.pipeline import FileDropPipeline, ScanSummary
from shoal.frontends.supervisor import BindingState, MetricNames
from shoal.locations import LocationPolicy

if TYPE_CHECKING:
    from shoal.client import Shoal

log = logging.getLogger("shoal.filedrop")


class FileDropKind:
    """File-drop bindings of the tables of `db` (a `BindingKind`)."""

    name = "filedrop"
    counters: MetricNames = (
        ("files", "New files committed by the file-drop pipeline"),
        ("rows", "Rows committed from dropped files"),
        ("rejects", "Lines of dropped files sent to the reject table"),
        ("bytes", "Bytes of dropped files read (as stored)"),
        ("duplicates", "Dropped files identical to one already ingested"),
        ("scans", "File-drop scans completed"),
        ("scan_errors", "File-drop scans that failed"))
    gauges: MetricNames = ()

    def __init__(self, db: Shoal) -> None:
        self.db = db

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return is_bound(properties)

    def resolve(self, table: str) -> FileDropBinding | None:
        try:
            if not is_bound(self.db.catalog.load_table(table).properties):
                return None
        except TableNotFoundError:
            return None
        return resolve_binding(self.db.catalog, table, s3_endpoint=self.db.config.s3_endpoint,
                               locations=LocationPolicy.from_config(self.db.config))

    def run(self, binding: FileDropBinding, stop: threading.Event,
            state: BindingState) -> None:
        pipeline = FileDropPipeline.from_client(self.db, self.db.query_engine.spark,
                                                binding.source, binding.table,
                                                mode=binding.mode)

        def on_summary(s: ScanSummary) -> None:
            state.count(files=s.ingested, rows=s.rows, rejects=s.rejected, bytes=s.bytes,
                        duplicates=s.duplicates, scans=1)
            state.report(up=True)

        def on_error(e: ShoalError) -> None:
            state.count(scan_errors=1)
            state.report(up=False, error=f"{type(e).__name__}: {e}")
            log.error("file-drop scan of table %s failed: %s", binding.table, state.error)

        pipeline.run(interval_s=binding.interval_s, on_summary=on_summary, on_error=on_error,
                     should_stop=stop.is_set)
