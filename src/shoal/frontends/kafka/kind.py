"""Kafka as a kind of bound pipeline (`shoal.frontends.supervisor`): every table whose
properties bind a topic (`WITH (kafka_topic='...')`, see `pipeline.resolve_binding`) runs a
`KafkaPipeline` on the client's Spark session.

Bootstrap servers come from the table's `kafka_bootstrap` (which must be an allowed host,
`SHOAL_ALLOWED_HOSTS`) or else `default_bootstrap` (the configuration's). Exactly-once holds
across restarts: each run resumes at the catalog's offsets.

Per binding, counters `records` (rows + rejects), `rows`, `rejects`, `value_bytes` (since
the runner started) and the gauge `lag` (records not yet in the catalog, as of the last
progress tick).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import TableNotFoundError
from shoal.frontends.kafka.pipeline import (KafkaBinding, KafkaPipeline, PipelineProgress,
                                            resolve_binding)
from shoal.frontends.kafka.sink import BatchResult
from shoal.frontends.supervisor import BindingState, MetricNames
from shoal.locations import LocationPolicy

if TYPE_CHECKING:
    from shoal.client import Shoal

TOPIC_PROPERTY = "kafka_topic"


class KafkaKind:
    """Kafka bindings of the tables of `db` (a `BindingKind`)."""

    name = "kafka"
    counters: MetricNames = (
        ("records", "Kafka records applied (rows + rejects)"),
        ("rows", "Rows committed from Kafka"),
        ("rejects", "Kafka records sent to the reject table"),
        ("value_bytes", "Bytes of the Kafka record values applied"))
    gauges: MetricNames = (("lag", "Kafka records not yet in the catalog"),)

    def __init__(self, db: Shoal, *, default_bootstrap: str | None,
                 trigger_s: float = 1.0) -> None:
        self.db = db
        self.default_bootstrap = default_bootstrap
        self.trigger_s = trigger_s

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return bool(properties.get(TOPIC_PROPERTY))

    def resolve(self, table: str) -> KafkaBinding | None:
        try:
            if not self.is_bound(self.db.catalog.load_table(table).properties):
                return None
        except TableNotFoundError:
            return None
        return resolve_binding(self.db.catalog, table, default_bootstrap=self.default_bootstrap,
                               locations=LocationPolicy.from_config(self.db.config))

    def run(self, binding: KafkaBinding, stop: threading.Event, state: BindingState) -> None:
        def on_batch(r: BatchResult) -> None:
            state.count(records=r.records, rows=r.rows, rejects=r.rejects,
                        value_bytes=r.value_bytes)

        def on_progress(p: PipelineProgress) -> None:
            state.gauge("lag", p.lag)

        pipeline = KafkaPipeline(self.db, binding, trigger_s=self.trigger_s, on_batch=on_batch,
                                 on_progress=on_progress, stop=stop)
        try:
            pipeline.run()
        finally:
            pipeline.close()
