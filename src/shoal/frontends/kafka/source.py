"""The Spark streaming source over Kafka: a Python `DataSourceStreamReader` on confluent-kafka.

Spark's own Kafka package cannot be fetched here, so `KafkaStreamSource` (format name
`shoal_kafka`) reads Kafka through librdkafka. Rows have `RECORD_SCHEMA`: topic, partition,
offset, timestamp (ms since the epoch, as Kafka gives it), key, value and the headers in order.

Offsets are dicts `{"<topic>/<partition>": next_offset}` (the next offset to read, Kafka's own
convention). The catalog, not Spark's checkpoint, decides where a run starts: the pipeline
passes `start_offsets` (catalog offset + 1 per partition) and `initialOffset()` returns them;
a partition missing from them starts at its low watermark. Every `latestOffset()` lists the
topics' partitions again, so partitions added while the query runs are picked up (from their
low watermark). A micro-batch reads at most `max_records_per_partition` records of each
partition. `read()` runs in a Spark task: for each of its ranges it assigns the partition at
the range's start offset and consumes up to its end offset, yielding Arrow record batches.

Options: `bootstrap` (required), `topics` (comma-separated, required), `group` (names the
reader's librdkafka client), `start_offsets` (JSON), `max_records_per_partition`
(default 50000), `max_tasks` (Spark tasks per micro-batch, default 4: partitions share
tasks), `kafka_config` (JSON of extra librdkafka settings), `stage` (a `staged.StageSpec`
as JSON: each task then runs the write path itself and yields one row `payload binary`, its
pickled `StagedBatch`, instead of the records).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceStreamReader, InputPartition)
from pyspark.sql.types import StructType

from shoal.errors import PipelineError

RECORD_DDL = ("topic string, partition int, offset bigint, timestamp bigint, key binary, "
              "value binary, headers array<struct<key:string,value:binary>>")
HEADER_ARROW = pa.list_(pa.struct([pa.field("key", pa.string()),
                                   pa.field("value", pa.binary())]))
RECORD_SCHEMA = pa.schema([
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()), pa.field("timestamp", pa.int64()),
    pa.field("key", pa.binary()), pa.field("value", pa.binary()),
    pa.field("headers", HEADER_ARROW)])

DEFAULT_MAX_RECORDS_PER_PARTITION = 50_000
DEFAULT_MAX_TASKS = 4
STAGED_DDL = "payload binary"   # with the `stage` option: one pickled StagedBatch per task
_READ_BATCH = 10_000
_STALL_TIMEOUT_S = 60.0
_METADATA_TIMEOUT_S = 10.0


class KafkaSourceError(PipelineError):
    """Kafka could not be reached or answered with an error the pipeline cannot skip."""

    code = "kafka_error"


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, _, part = key.rpartition("/")
    return topic, int(part)


def client_config(bootstrap: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3}
    conf.update(extra or {})
    return conf


class KafkaAdmin:
    """Metadata and watermarks through one consumer (not a group member)."""

    def __init__(self, bootstrap: str, group: str, extra: dict[str, Any] | None = None
                 ) -> None:
        from confluent_kafka import Consumer

        self.group = group
        self._config = client_config(bootstrap, extra)
        self._consumer = Consumer({**self._config, "group.id": group,
                                   "enable.auto.commit": False})
        self._probe: Any = None

    def partitions(self, topics: Sequence[str]) -> list[tuple[str, int]]:
        """Every partition of `topics` (a topic missing from the cluster has none)."""
        out: list[tuple[str, int]] = []
        for topic in topics:
            try:
                md = self._consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
            except Exception as e:  # KafkaException: broker unreachable
                raise KafkaSourceError(f"kafka metadata for topic {topic!r}: {e}") from e
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                continue  # unknown topic: no partitions yet
            out.extend((topic, p) for p in sorted(tmd.partitions))
        return out

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        try:
            return self._consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=_METADATA_TIMEOUT_S, cached=False)
        except Exception as e:  # KafkaException: broker unreachable
            raise KafkaSourceError(
                f"kafka watermarks of {topic}[{partition}]: {e}") from e

    def has_records(self, topic: str, partition: int, start: int, end: int) -> bool:
        """Whether offsets [start, end) hold any record: False when they are only control
        records (transaction markers) or compacted/aborted away. Reads at most one record."""
        from confluent_kafka import KafkaError, TopicPartition

        if self._probe is None:
            from confluent_kafka import Consumer

            self._probe = Consumer({**self._config, "group.id": f"{self.group}-probe",
                                    "enable.auto.commit": False,
                                    "enable.partition.eof": True})
        self._probe.assign([TopicPartition(topic, partition, start)])
        try:
            deadline = time.monotonic() + _METADATA_TIMEOUT_S
            while time.monotonic() < deadline:
                m = self._probe.poll(0.5)
                if m is None:
                    continue
                err = m.error()
                if err is None:
                    return m.offset() < end
                if err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= end:
                        return False
                    continue
                raise KafkaSourceError(f"kafka {topic}[{partition}]: {err.str()}")
            return True  # no answer: assume records are there (lag stays visible)
        finally:
            self._probe.unassign()

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> None:
        """Commit `next_offsets` (Kafka's convention: the next offset to read) for lag tools."""
        from confluent_kafka import TopicPartition

        if next_offsets:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o
                                           in sorted(next_offsets.items())],
                                  asynchronous=False)

    def close(self) -> None:
        self._consumer.close()
        if self._probe is not None:
            self._probe.close()


@dataclass(frozen=True)
class KafkaRange:
    """Records [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class KafkaTask(InputPartition):
    """One Spark task: some ranges, read one after the other."""

    ranges: tuple[KafkaRange, ...]


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        try:
            self.bootstrap = options["bootstrap"]
            self.topics = [t for t in options["topics"].split(",") if t]
        except KeyError as e:
            raise KafkaSourceError(f"shoal_kafka source needs option {e.args[0]!r}") from None
        self.group = options.get("group", "shoal")
        self.extra: dict[str, Any] = json.loads(options.get("kafka_config", "{}"))
        self.start_offsets: dict[str, int] = json.loads(options.get("start_offsets", "{}"))
        self.max_per_partition = int(options.get("max_records_per_partition",
                                                 DEFAULT_MAX_RECORDS_PER_PARTITION))
        self.max_tasks = max(1, int(options.get("max_tasks", DEFAULT_MAX_TASKS)))
        self.stage: str | None = options.get("stage")
        self._admin: KafkaAdmin | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None  # a librdkafka handle does not travel to tasks
        return state

    @property
    def admin(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = KafkaAdmin(self.bootstrap, f"{self.group}-planner", self.extra)
        return self._admin

    def _start_of(self, key: str, given: dict[str, int]) -> int:
        topic, part = split_key(key)
        low, _high = self.admin.watermarks(topic, part)
        return max(given.get(key, low), low)

    def initialOffset(self) -> dict[str, int]:
        return {partition_key(t, p): self._start_of(partition_key(t, p), self.start_offsets)
                for t, p in self.admin.partitions(self.topics)}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        end: dict[str, int] = {}
        for t, p in self.admin.partitions(self.topics):
            key = partition_key(t, p)
            low, high = self.admin.watermarks(t, p)
            begin = max(start.get(key, low), low)
            end[key] = max(begin, min(high, begin + self.max_per_partition))
        for key, off in start.items():  # a partition never goes backwards
            end[key] = max(end.get(key, off), off)
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[KafkaTask]:
        ranges = []
        for key, stop in sorted(end.items()):
            begin = start[key] if key in start else self._start_of(key, {})
            if stop > begin:
                topic, part = split_key(key)
                ranges.append(KafkaRange(topic, part, begin, stop))
        # Spark pays ~40 ms per task: many partitions share `max_tasks` tasks, balanced by
        # record count (largest first onto the lightest task).
        n_tasks = min(len(ranges), self.max_tasks)
        tasks: list[list[KafkaRange]] = [[] for _ in range(n_tasks)]
        load = [0] * n_tasks
        for r in sorted(ranges, key=lambda r: r.start - r.end):
            i = load.index(min(load))
            tasks[i].append(r)
            load[i] += r.end - r.start
        return [KafkaTask(tuple(t)) for t in tasks]

    def read(self, partition: KafkaTask) -> Iterator[Any]:  # type: ignore[override]
        ranges = (read_range(self.bootstrap, self.group, self.extra, r)
                  for r in partition.ranges)
        if self.stage is None:
            for batches in ranges:
                yield from batches
            return
        import pickle

        from shoal.frontends.kafka.staged import StageSpec, stage_task

        staged = stage_task(StageSpec.from_option(self.stage), ranges)
        yield (pickle.dumps(staged, protocol=pickle.HIGHEST_PROTOCOL),)

    def commit(self, end: dict[str, int]) -> None:
        pass  # progress lives in the catalog (committed by the sink with the data)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def read_range(bootstrap: str, group: str, extra: dict[str, Any], r: KafkaRange
               ) -> Iterator[pa.RecordBatch]:
    """The records of `r` in offset order, as `RECORD_SCHEMA` batches."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({**client_config(bootstrap, extra), "group.id": f"{group}-reader",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "enable.partition.eof": True, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 16 << 20})
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        cols: tuple[list[Any], ...] = ([], [], [], [], [])
        nxt = r.start
        last_progress = time.monotonic()
        while nxt < r.end:
            msgs = consumer.consume(min(_READ_BATCH, r.end - nxt), timeout=1.0)
            if not msgs:
                if time.monotonic() - last_progress > _STALL_TIMEOUT_S:
                    raise KafkaSourceError(
                        f"kafka {r.topic}[{r.partition}]: no record at offset {nxt} within "
                        f"{_STALL_TIMEOUT_S:.0f}s (range {r.start}..{r.end})")
                continue
            last_progress = time.monotonic()
            offsets, stamps, keys, values, headers = cols
            for m in msgs:
                err, off = m.error(), m.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # The fetch reached the end of the partition: offsets up to there
                        # that gave no record hold none (transaction markers, compacted or
                        # aborted records), so a range ending on them is complete.
                        if off is not None and off >= r.end:
                            nxt = r.end
                            break
                        continue
                    raise KafkaSourceError(f"kafka {r.topic}[{r.partition}]: {err.str()}")
                if off is None:   # never for a record read from an assigned partition
                    raise KafkaSourceError(f"kafka {r.topic}[{r.partition}]: a record "
                                           "without an offset")
                if off >= r.end:
                    nxt = r.end
                    break
                offsets.append(off)
                stamps.append(m.timestamp()[1])
                keys.append(m.key())
                values.append(m.value())
                headers.append(m.headers())
                nxt = off + 1
            if len(offsets) >= _READ_BATCH:
                yield _batch(r, cols)
                cols = ([], [], [], [], [])
        if cols[0]:
            yield _batch(r, cols)
    finally:
        consumer.close()


def _batch(r: KafkaRange, cols: tuple[list[Any], ...]) -> pa.RecordBatch:
    offsets, stamps, keys, values, headers = cols
    n = len(offsets)
    hdrs = [[{"key": k, "value": v} for k, v in h] if h else [] for h in headers]
    return pa.RecordBatch.from_arrays([
        pa.array([r.topic] * n, pa.string()), pa.array([r.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()), pa.array(stamps, pa.int64()),
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.array(hdrs, HEADER_ARROW)], schema=RECORD_SCHEMA)


class KafkaStreamSource(DataSource):
    """`spark.readStream.format("shoal_kafka")`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "shoal_kafka"

    def schema(self) -> StructType | str:
        return STAGED_DDL if "stage" in self.options else RECORD_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options))
