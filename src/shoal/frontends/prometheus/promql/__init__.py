"""PromQL over shoal's Prometheus-layout tables: parse with promql-parser,
evaluate with Prometheus 2.x semantics, vectorised over all steps with numpy.

`PromQL(storage)` answers instant and range queries (`engine.py`); `PromStorage` reads series
through the query lane's pruning cascade (`storage.py`); `promql_for(engine, config)` builds
both over a `QueryEngine`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from shoal.frontends.prometheus.promql.engine import PromQL, PromResult, parse
from shoal.frontends.prometheus.promql.errors import (PromQLBadDataError, PromQLExecutionError,
                                                      PromQLParseError, PromQLTooManySamplesError)
from shoal.frontends.prometheus.promql.otlp import OTLP_PREFIX
from shoal.frontends.prometheus.promql.storage import LabelMatcher, PromStorage, Reader

if TYPE_CHECKING:
    from shoal.config import Config
    from shoal.format.base import BlockPredicate
    from shoal.query.engine import QueryEngine

__all__ = ["LabelMatcher", "PromQL", "PromQLBadDataError", "PromQLExecutionError",
           "PromQLParseError", "PromQLTooManySamplesError", "PromResult", "PromStorage",
           "Reader", "parse", "promql_for"]


def parallel_read(engine: QueryEngine, threads: int) -> Callable[..., tuple[pa.Table, Any]]:
    """`engine.read` (stages 1-2 of the pruning cascade, the engine's footer cache), with
    the surviving extents read by `threads` threads (decoding releases the GIL)."""
    from shoal.query.scan_plan import build_scan_spec
    from shoal.query.scan_read import read_native

    db = engine.db

    def read(table: str, predicate: BlockPredicate | None = None, *,
             snapshot_id: int | None = None, columns: Sequence[str] | None = None
             ) -> tuple[pa.Table, Any]:
        spec, stats = build_scan_spec(
            db.catalog, db.store, db.formats, engine.footers, table, predicate=predicate,
            columns=columns, snapshot_id=snapshot_id, storage_url="", s3_endpoint=None,
            parallelism=1)
        schema = spec.read_schema().arrow()
        schema = pa.schema([schema.field(c) for c in spec.columns])
        tasks = spec.tasks()

        def one(task: Any) -> list[pa.RecordBatch]:
            return list(read_native(spec, [task], db.store, db.formats))

        if len(tasks) <= 1 or threads <= 1:
            batches = [b for t in tasks for b in one(t)]
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="shoal-promql") as pool:
                batches = [b for part in pool.map(one, tasks) for b in part]
        return pa.Table.from_batches(batches, schema=schema), stats

    return read


def promql_for(engine: QueryEngine, config: Config, *, lookback_ms: int = 300_000,
               max_samples: int = 50_000_000) -> PromQL:
    """A PromQL evaluator over the tables of `engine`'s database."""
    reader = Reader(engine.db.catalog.list_tables,
                    parallel_read(engine, max(1, min(4, os.cpu_count() or 1))))
    mode = config.promql_otlp_metrics
    storage = PromStorage(reader, prometheus_table=config.prometheus_table,
                          otlp_table=None if mode == "off" else config.otlp_metrics_table,
                          otlp_prefix=OTLP_PREFIX if mode == "prefixed" else "",
                          max_samples=max_samples)
    return PromQL(storage, lookback_ms=lookback_ms, max_samples=max_samples)
