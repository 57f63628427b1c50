"""PromQL over shoal's Prometheus-layout tables (issue #16): parse with promql-parser,
evaluate with Prometheus 2.x semantics, vectorised over all steps with numpy.

`PromQL(storage)` answers instant and range queries (`engine.py`); `PromStorage` reads series
through the query lane's pruning cascade (`storage.py`); `promql_for(engine, config)` builds
both over a `QueryEngine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.query.promql.engine import PromQL, PromResult, parse
from shoal.query.promql.errors import (PromQLBadDataError, PromQLExecutionError,
                                       PromQLParseError, PromQLTooManySamplesError)
from shoal.query.promql.storage import LabelMatcher, PromStorage, Reader

if TYPE_CHECKING:
    from shoal.config import Config
    from shoal.query.engine import QueryEngine

__all__ = ["LabelMatcher", "PromQL", "PromQLBadDataError", "PromQLExecutionError",
           "PromQLParseError", "PromQLTooManySamplesError", "PromResult", "PromStorage",
           "Reader", "parse", "promql_for"]


def promql_for(engine: QueryEngine, config: Config, *, lookback_ms: int = 300_000,
               max_samples: int = 50_000_000) -> PromQL:
    """A PromQL evaluator over the tables of `engine`'s database."""
    reader = Reader(engine.db.catalog.list_tables, engine.read)
    storage = PromStorage(reader, prometheus_table=config.prometheus_table,
                          otlp_table=config.otlp_metrics_table, max_samples=max_samples)
    return PromQL(storage, lookback_ms=lookback_ms, max_samples=max_samples)
