"""The Kafka pipeline: a Spark Structured Streaming query from Kafka into one shoal table.

`KafkaPipeline(db, binding).run(until_idle_s=...)` starts
`spark.readStream.format("shoal_kafka")` (`source.py`) with a `foreachBatch` sink on the
driver (`sink.KafkaSink`: coerce, header and pseudo-columns, rejects, data + offsets in one
catalog transaction) and watches it: progress (records/s, MB/s, lag) goes to `on_progress`
about once a second; with `until_idle_s` the query stops once every partition is caught up
and nothing new arrived for that long; `stop()` (another thread, a signal) or setting the
`stop` event given to the constructor (a supervisor's) stops it too.
By default the write path runs inside the Spark tasks (`staged.py`: each task coerces
its records and writes one extent; `foreachBatch` collects only the small staged results);
in mode `evolve` (the schema may change mid-batch) `foreachBatch` collects the records
(Arrow) and the driver coerces them. Either way `foreachBatch` queues the batch for one
committer thread, so Spark reads batch n+1 while batch n is coerced and committed; batches commit in
order, and after a failed commit none later does (no offset can be skipped).

Where a run starts is the catalog's business, not Spark's: each run gets a fresh, throw-away
checkpoint directory and the source starts every partition at catalog offset + 1 (low
watermark when the catalog has none). So a crash at any point (SIGKILL included) loses
nothing and repeats nothing: what the catalog committed is exactly what is visible.

A partition whose low watermark passed catalog offset + 1 lost records to Kafka's retention
before they were read: the run starts at the low watermark, logs a warning and reports the
count in its summary (`PipelineProgress.lost`).

The binding (`resolve_binding`): topics, bootstrap, group and mode come from the arguments,
else from the table's properties `kafka_topic` (comma-separated), `kafka_bootstrap`,
`kafka_group`, `kafka_mode`, else (bootstrap) the configuration `SHOAL_KAFKA_BOOTSTRAP`.
The default group is `shoal-<table>`, the default mode `drop` (docs/ingest.md).
"""

from __future__ import annotations

import logging
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from shoal.errors import InvalidPropertyError, PipelineError
from shoal.locations import LocationPolicy
from shoal.frontends.kafka.sink import BatchResult, KafkaSink, StagedBatch
from shoal.frontends.kafka.staged import StageSpec
from shoal.frontends.kafka.source import (DEFAULT_MAX_RECORDS_PER_PARTITION, KafkaAdmin,
                                          KafkaStreamSource, partition_key)
from shoal.types.conventions import IngestConventions
from shoal.types.schema import SchemaMode
from shoal.types.sortkey import sort_key_of

if TYPE_CHECKING:
    from shoal.catalog.base import Catalog
    from shoal.client import Shoal

MODES: tuple[SchemaMode, ...] = ("drop", "evolve", "reject")
log = logging.getLogger("shoal.kafka")
# A partition this few offsets behind the catalog is probed for records before its gap counts
# as lag: a transactional producer leaves a commit marker (no record) after each transaction.
_PROBE_GAP = 64


@dataclass(frozen=True)
class KafkaBinding:
    table: str
    bootstrap: str
    topics: tuple[str, ...]
    group: str
    mode: SchemaMode = "drop"


def resolve_binding(catalog: Catalog, table: str, *, bootstrap: str | None = None,
                    topics: Sequence[str] = (), group: str | None = None,
                    mode: str | None = None, default_bootstrap: str | None = None,
                    locations: LocationPolicy | None = None) -> KafkaBinding:
    """Arguments first, then the table's `kafka_*` properties, then the configuration.

    A bootstrap taken from the table's properties must be allowed by `locations` (when
    given); the arguments and the configuration are the operator's own."""
    props = catalog.load_table(table).properties
    topic_list = [t.strip() for t in topics if t.strip()]
    if not topic_list:
        bound = props.get("kafka_topic")
        topic_list = [t.strip() for t in str(bound or "").split(",") if t.strip()]
    if not topic_list:
        raise InvalidPropertyError(
            f'no Kafka topic for table "{table}": pass --topic or bind one with '
            "CREATE TABLE ... WITH (kafka_topic='...')")
    server = bootstrap or props.get("kafka_bootstrap") or default_bootstrap
    if not bootstrap and props.get("kafka_bootstrap") and locations is not None:
        locations.check_hosts(str(props["kafka_bootstrap"]), what="kafka_bootstrap")
    if not server:
        raise InvalidPropertyError(
            f'no Kafka bootstrap servers for table "{table}": pass --bootstrap, '
            "set SHOAL_KAFKA_BOOTSTRAP or the table property kafka_bootstrap")
    chosen = mode or props.get("kafka_mode") or "drop"
    if chosen not in MODES:
        raise InvalidPropertyError(f"Kafka mode must be one of {', '.join(MODES)}, got {chosen!r}")
    return KafkaBinding(table=table, bootstrap=str(server), topics=tuple(topic_list),
                        group=str(group or props.get("kafka_group") or f"shoal-{table}"),
                        mode=cast(SchemaMode, chosen))


@dataclass
class PipelineProgress:
    records: int = 0            # new records applied (rows + rejects)
    rows: int = 0
    rejects: int = 0
    value_bytes: int = 0
    batches: int = 0
    lag: int | None = None      # records in Kafka not yet in the catalog
    started: float = field(default_factory=time.monotonic)
    last_record: float = field(default_factory=time.monotonic)
    rate: float = 0.0           # records/s over the last progress interval
    first_commit: float | None = None   # when the first records were committed, and
    first_records: int = 0              # how many (the rate after it is the steady rate)
    first_bytes: int = 0
    lost: int = 0               # records deleted by retention before they were read

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def active_s(self) -> float:
        """From the query's start to the last commit that applied records."""
        return max(self.last_record - self.started, 1e-9) if self.records else 0.0

    def summary(self, table: str) -> str:
        s = max(self.active_s, 1e-9)
        steady = ""
        if self.first_commit is not None and self.records > self.first_records:
            t = max(self.last_record - self.first_commit, 1e-9)
            steady = (f" (after the first batch {(self.records - self.first_records) / t:,.0f}"
                      f" records/s, {(self.value_bytes - self.first_bytes) / t / 1e6:.2f} "
                      "MB/s)")
        return (f"kafka -> {table}: {self.records} records ({self.rows} rows, "
                f"{self.rejects} rejected), {self.value_bytes / 1e6:.1f} MB in {s:.1f}s: "
                f"{self.records / s:,.0f} records/s, {self.value_bytes / s / 1e6:.2f} MB/s"
                f"{steady}; lag {self.lag}"
                + (f"; {self.lost} records lost to retention before shoal read them"
                   if self.lost else ""))


class KafkaPipeline:
    def __init__(self, db: Shoal, binding: KafkaBinding, *, trigger_s: float = 0.5,
                 max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION,
                 kafka_config: dict[str, Any] | None = None,
                 on_progress: Callable[[PipelineProgress], None] | None = None,
                 on_batch: Callable[[BatchResult], None] | None = None,
                 stage_in_tasks: bool = True, stop: threading.Event | None = None) -> None:
        self.db = db
        self.binding = binding
        self.trigger_s = trigger_s
        self.max_records_per_partition = max_records_per_partition
        self.kafka_config = dict(kafka_config or {})
        self.on_progress = on_progress
        self.on_batch = on_batch
        # The write path runs in the Spark tasks unless the schema may change (evolve).
        self._staged = stage_in_tasks and binding.mode != "evolve"
        self.progress = PipelineProgress()
        self._stop = stop if stop is not None else threading.Event()   # set: `run` ends
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._admin = KafkaAdmin(binding.bootstrap, binding.group, self.kafka_config)
        # Per partition, the last small gap probed for records: (start, end, has records).
        self._gaps: dict[tuple[str, int], tuple[int, int, bool]] = {}
        self.sink = KafkaSink(db.catalog, db.coordinator, table=binding.table,
                              group=binding.group, topics=binding.topics, mode=binding.mode,
                              on_kafka_commit=self._admin.commit)

    def stop(self) -> None:
        self._stop.set()

    def lag(self) -> int:
        """Records in the bound partitions that the catalog does not hold yet."""
        done = self.sink.committed()
        total = 0
        for t, p in self._admin.partitions(self.binding.topics):
            low, high = self._admin.watermarks(t, p)
            nxt = max(done.get((t, p), low - 1) + 1, low)
            gap = max(0, high - nxt)
            if 0 < gap <= _PROBE_GAP and not self._gap_has_records(t, p, nxt, high):
                gap = 0   # only transaction markers (or compacted records) are left
            total += gap
        return total

    def _gap_has_records(self, topic: str, part: int, start: int, end: int) -> bool:
        cached = self._gaps.get((topic, part))
        if cached is None or cached[:2] != (start, end):
            cached = (start, end, self._admin.has_records(topic, part, start, end))
            self._gaps[(topic, part)] = cached
        return cached[2]

    def retention_gaps(self) -> dict[tuple[str, int], int]:
        """Per partition the catalog knows, records Kafka deleted before they were read
        (its low watermark passed catalog offset + 1): they cannot be ingested any more."""
        gaps: dict[tuple[str, int], int] = {}
        for (t, p), off in self.sink.committed().items():
            low, _high = self._admin.watermarks(t, p)
            if low > off + 1:
                gaps[(t, p)] = low - off - 1
        return gaps

    def _batch(self, df: Any, batch_id: int) -> None:
        """foreachBatch: hand the batch's records to the committer, then let Spark go on."""
        if self._error is not None:
            raise self._error
        try:
            if self._staged:
                import pickle

                records: Any = [pickle.loads(r.payload) for r in df.collect()]
            else:
                records = df.toArrow()
        except BaseException as e:
            self._error = e
            raise
        while True:  # at most one batch waits: reading overlaps committing, memory stays bounded
            if self._error is not None:
                raise self._error
            try:
                self._queue.put(records, timeout=0.2)
                return
            except queue.Full:
                continue

    def _commit_loop(self) -> None:
        """Commit batches in order; after a failure nothing later commits (no offset gaps)."""
        while True:
            records = self._queue.get()
            try:
                if records is None or self._error is not None:
                    return
                self._commit(records)
            except BaseException as e:  # noqa: BLE001 - kept: `_batch` and `run` raise it
                self._error = e
            finally:
                self._queue.task_done()

    def _commit(self, records: pa.Table | list[StagedBatch]) -> None:
        if isinstance(records, list):
            result = self.sink.commit_staged(records)
        else:
            result = self.sink.write(records)
        with self._lock:
            p = self.progress
            p.batches += 1
            p.records += result.records
            p.rows += result.rows
            p.rejects += result.rejects
            p.value_bytes += result.value_bytes
            if result.records:
                p.last_record = time.monotonic()
                if p.first_commit is None:
                    p.first_commit = p.last_record
                    p.first_records, p.first_bytes = p.records, p.value_bytes
        if self.on_batch is not None:
            self.on_batch(result)

    def run(self, *, until_idle_s: float | None = None) -> PipelineProgress:
        """Run until stopped, idle for `until_idle_s`, or failed (the error is raised)."""
        import json

        from shoal.query.spark.session import register_data_source

        b = self.binding
        spark = self.db.query_engine.spark
        register_data_source(spark, KafkaStreamSource)   # its offsets are planned here
        start = {partition_key(t, p): o + 1 for (t, p), o in self.sink.committed().items()}
        self.progress = PipelineProgress()
        gaps = self.retention_gaps()
        self.progress.lost = sum(gaps.values())
        for (t, p), n in sorted(gaps.items()):
            log.warning("kafka %s[%d]: %d records were deleted by retention before shoal "
                        "read them", t, p, n)
        checkpoint = tempfile.mkdtemp(prefix="shoal-kafka-checkpoint-")
        max_tasks = max(1, spark.sparkContext.defaultParallelism)  # one task per core
        df = (spark.readStream.format("shoal_kafka")
              .option("bootstrap", b.bootstrap).option("topics", ",".join(b.topics))
              .option("group", b.group).option("start_offsets", json.dumps(start))
              .option("max_records_per_partition", str(self.max_records_per_partition))
              .option("max_tasks", str(max_tasks))
              .option("kafka_config", json.dumps(self.kafka_config)))
        if self._staged:
            info = self.db.catalog.load_table(b.table)
            spec = StageSpec(table=b.table, table_id=info.id, schema=info.schema.to_json(),
                             mode=b.mode, group=b.group,
                             storage_url=self.db.config.resolved_storage_url,
                             s3_endpoint=self.db.config.s3_endpoint,
                             sort_by=sort_key_of(info.properties, info.schema),
                             conventions=IngestConventions.of(info.properties).to_json())
            df = df.option("stage", spec.to_option())
        df = df.load()
        query = (df.writeStream.foreachBatch(self._batch)
                 .trigger(processingTime=f"{int(self.trigger_s * 1000)} milliseconds")
                 .option("checkpointLocation", checkpoint)
                 .queryName(f"shoal-kafka-{b.table}").start())
        committer = threading.Thread(target=self._commit_loop, name="shoal-kafka-commit",
                                     daemon=True)
        committer.start()
        last_tick, last_records = time.monotonic(), 0
        try:
            while True:
                if self._error is not None:
                    raise self._error
                if not query.isActive:
                    exc = query.exception()
                    if self._error is not None:
                        raise self._error
                    if exc is not None:
                        raise PipelineError(f"kafka pipeline failed: {exc}")
                    break
                if self._stop.wait(min(0.5, self.trigger_s)):
                    break
                now = time.monotonic()
                if now - last_tick >= 1.0:
                    with self._lock:
                        prog = self.progress
                        prog.rate = (prog.records - last_records) / (now - last_tick)
                        last_tick, last_records = now, prog.records
                    prog.lag = self.lag()
                    if self.on_progress is not None:
                        self.on_progress(prog)
                    if (until_idle_s is not None and prog.lag == 0
                            and now - prog.last_record >= until_idle_s):
                        break
        finally:
            try:
                query.stop()
            finally:
                self._queue.put(None)   # batches already read are still committed
                committer.join()
                shutil.rmtree(checkpoint, ignore_errors=True)
        if self._error is not None:
            raise self._error
        self.progress.lag = self.lag()
        return self.progress

    def close(self) -> None:
        self._admin.close()
