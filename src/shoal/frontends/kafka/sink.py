"""The Kafka pipeline's sink: one micro-batch of Kafka records -> the shared write path.

Two entry points share every rule below. `prepare_records()` (pure: runs on the driver or
inside a Spark task, see `staged.py`) does steps 2-3; `KafkaSink.commit_staged()` does
steps 4-5 for extents already written (one per task). `KafkaSink.write(records)` does it all
on the driver for the records of one micro-batch (`RECORD_SCHEMA` of `source.py`, any order,
possibly with records the catalog already holds); it is the path of mode `evolve`. Together
they commit each record exactly once:

1. Records at or below the catalog's offset of their partition are dropped (already applied:
   a replayed batch after a crash or a Spark retry); a staged extent wholly below it is
   deleted, one that straddles it fails the batch (`OffsetMismatchError`). Steps 1 (for
   staged extents), 4 and the deletes are the commit layer's `append_ranges`.
2. Each value is one JSON object coerced against the table schema by `coerce_ndjson` in
   partial mode; unknown fields follow the pipeline's mode (`drop` by default for Kafka;
   `evolve` adds columns like the REST path; `reject` refuses the record). An empty value
   (tombstone) or a value that is not one JSON object is refused too.
3. Accepted rows get the header columns (docs/kafka.md: `HEADERS` = every header in order,
   `HEADER('k')` = the last header with key k, null if absent) and the pseudo-columns the
   table declares (`PSEUDO_COLUMNS`: `_kafka_topic`, `_kafka_partition`, `_kafka_offset`,
   `_kafka_timestamp`, `_kafka_key`); a pseudo-column overrides a same-named JSON field.
4. Refused records go to `<table>__rejects` first (`commit_rejects`; ledger key
   `kafka-reject:<group>:<topic>:<partition>:<offset>` makes a replay a no-op), then the data
   extent is committed with the per-partition offsets (`SourceOffset("kafka:<group>:<topic>",
   "<partition>", last offset)`) in ONE catalog transaction. The offsets are re-read inside
   every commit attempt: since they only change with a snapshot of this table, the CAS on the
   snapshot id makes "nobody else moved them" part of the same transaction. If they did move
   (a second pipeline on the same group and table), the batch fails with
   `ConcurrentPipelineError` and nothing of it is committed.
5. The new offsets are committed back to the Kafka consumer group (best effort) for lag tools.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.catalog.base import Catalog, ManifestEntry
from shoal.commit import (CommitCoordinator, OffsetsMovedError, Position, RejectRecord,
                          StagedOverlapError, StagedRange, append_ranges)
from shoal.errors import InvalidSchemaError, PipelineError
from shoal.ingest.coerce import UNKNOWN_POLICY, coerce_ndjson
from shoal.ingest.evolve import plan_evolution
from shoal.types.conventions import DEFAULT_CONVENTIONS, IngestConventions
from shoal.types.schema import Column, Schema, SchemaMode

PSEUDO_COLUMNS: dict[str, tuple[str, ...]] = {
    # name -> accepted column kinds
    "_kafka_topic": ("string",),
    "_kafka_partition": ("int", "long"),
    "_kafka_offset": ("long",),
    "_kafka_timestamp": ("timestamp", "long"),
    "_kafka_key": ("bytes", "string"),
}
EMPTY_VALUE_ERROR = "record value is empty (a tombstone or blank record)"

log = logging.getLogger(__name__)


class ConcurrentPipelineError(PipelineError):
    """Another pipeline committed offsets of the same source and table meanwhile."""

    code = "concurrent_pipeline"

    def __init__(self, table: str, source: str) -> None:
        super().__init__(f'table "{table}": offsets of source "{source}" moved while this '
                         "batch was being committed; is another pipeline consuming the same "
                         "group into the same table?")


class OffsetMismatchError(PipelineError):
    """A staged batch does not continue the catalog's offsets (it overlaps applied records)."""

    code = "kafka_offset_mismatch"

    def __init__(self, table: str, topic: str, partition: int, first: int,
                 committed: int) -> None:
        super().__init__(f'table "{table}": staged records of {topic}[{partition}] start at '
                         f"offset {first} but the catalog already holds up to {committed}; "
                         "restart the pipeline (it resumes at the catalog's offsets)")


def source_name(group: str, topic: str) -> str:
    return f"kafka:{group}:{topic}"


def check_pseudo_columns(schema: Schema, table: str) -> None:
    """A declared pseudo-column must have a type the pipeline can fill (clear error first)."""
    for name, kinds in PSEUDO_COLUMNS.items():
        col = schema.get(name)
        if col is not None and col.type.kind not in kinds:
            raise InvalidSchemaError(
                f'table "{table}": Kafka pseudo-column "{name}" must have type '
                f"{' or '.join(kinds)}, got {col.type}", column=name)


@dataclass(frozen=True)
class BatchResult:
    records: int           # records of the batch that were new to the catalog
    rows: int              # rows committed to the table
    rejects: int           # records committed to the reject table
    value_bytes: int       # bytes of the new records' values
    skipped: int           # records the catalog already held
    snapshot_id: int | None
    offsets: dict[tuple[str, int], int]   # last offset committed per (topic, partition)


class KafkaSink:
    def __init__(self, catalog: Catalog, coordinator: CommitCoordinator, *, table: str,
                 group: str, topics: Sequence[str], mode: SchemaMode = "drop",
                 on_kafka_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
                 evolution_cap: int = 32) -> None:
        self.catalog = catalog
        self.coordinator = coordinator
        self.table = table
        self.group = group
        self.topics = list(topics)
        self.mode = mode
        self.on_kafka_commit = on_kafka_commit
        self.evolution_cap = evolution_cap
        check_pseudo_columns(catalog.load_table(table).schema, table)

    # ---- progress ---------------------------------------------------------------------------
    def committed(self) -> dict[tuple[str, int], int]:
        """The catalog's last applied offset per (topic, partition)."""
        out: dict[tuple[str, int], int] = {}
        for topic in self.topics:
            for part, off in self.catalog.source_offsets(source_name(self.group, topic)).items():
                out[(topic, int(part))] = off
        return out

    # ---- one micro-batch, staged on the driver ---------------------------------------------
    def write(self, records: pa.Table) -> BatchResult:
        """Coerce and commit `records` (the driver path; every mode, `evolve` included)."""
        base = self.committed()
        total = records.num_rows
        records = _new_records(records, base)
        if records.num_rows == 0:
            return BatchResult(0, 0, 0, 0, total, None, {})
        info = self.catalog.load_table(self.table)
        evolve = self._evolve if self.mode == "evolve" else None
        prep = prepare_records(records, info.schema, group=self.group, mode=self.mode,
                               evolve=evolve, conventions=IngestConventions.of(info.properties))
        written = []
        if prep.rows is not None:
            written = [self.coordinator.write_extent(info, prep.rows.to_batches(),
                                                     schema=prep.schema)]
        staged = StagedBatch(written[0] if written else None, prep.rejects, prep.first,
                             prep.last, prep.records, prep.n_rows, prep.value_bytes)
        result = self.commit_staged([staged], base=base)
        return replace(result, skipped=total - records.num_rows)

    def _evolve(self, unknown: list[str], schema: Schema) -> Schema:
        plan = plan_evolution(unknown, schema, cap=self.evolution_cap)
        if not plan.new_columns:
            return schema
        self.coordinator.evolve_schema(self.table, plan.new_columns, base=schema)
        return self.catalog.load_table(self.table).schema

    # ---- commit what tasks (or `write`) staged ----------------------------------------------
    def commit_staged(self, staged: Sequence[StagedBatch], *,
                      base: dict[tuple[str, int], int] | None = None) -> BatchResult:
        """Commit staged extents: rejects first (by key), then data + offsets in one CAS.

        A staged range entirely at or below the catalog's offset was applied before: its
        extent is dropped. One that overlaps the catalog's offset cannot be split (its rows
        are in one extent): the batch fails with `OffsetMismatchError`, nothing commits, and
        a restart resumes at the catalog's offsets.
        """
        base = self.committed() if base is None else base

        def position(key: tuple[str, int]) -> Position:
            return (source_name(self.group, key[0]), str(key[1]))

        keys = {position(k): k for sb in staged for k in sb.last}   # back to (topic, partition)
        ranges = [StagedRange(sb.entry, {position(k): o for k, o in sb.first.items()},
                              {position(k): o for k, o in sb.last.items()}, sb.rejects)
                  for sb in staged]
        try:
            outcome = append_ranges(
                self.coordinator, self.table, ranges,
                base={position(k): o for k, o in base.items()},
                summary={"source": "kafka", "group": self.group})
        except StagedOverlapError as e:
            topic, part = keys[e.position]
            raise OffsetMismatchError(self.table, topic, part, e.first, e.committed) from None
        except OffsetsMovedError as e:
            raise ConcurrentPipelineError(self.table, e.source) from None
        last = {keys[pos]: o for pos, o in outcome.last.items()}
        if self.on_kafka_commit is not None and last:
            try:
                self.on_kafka_commit({k: o + 1 for k, o in last.items()})
            except Exception:  # noqa: BLE001 - lag tools only; the catalog holds the truth
                log.warning("committing offsets of group %s back to Kafka failed", self.group,
                            exc_info=True)
        keep = [staged[i] for i in outcome.kept]
        return BatchResult(sum(sb.records for sb in keep), sum(sb.rows for sb in keep),
                           outcome.rejected, sum(sb.value_bytes for sb in keep),
                           sum(sb.records for sb in staged) - sum(sb.records for sb in keep),
                           outcome.snapshot_id, last)


@dataclass(frozen=True)
class StagedBatch:
    """Records of some partitions made ready to commit: an extent already in the store."""

    entry: ManifestEntry | None          # None when every record was refused
    rejects: list[RejectRecord]
    first: dict[tuple[str, int], int]    # first and last offset read per (topic, partition)
    last: dict[tuple[str, int], int]
    records: int
    rows: int
    value_bytes: int


@dataclass(frozen=True)
class Prepared:
    rows: pa.Table | None                # shaped as `schema.arrow()`
    schema: Schema
    rejects: list[RejectRecord]
    first: dict[tuple[str, int], int]
    last: dict[tuple[str, int], int]
    records: int
    value_bytes: int

    @property
    def n_rows(self) -> int:
        return 0 if self.rows is None else self.rows.num_rows


def reject_record(group: str, topic: str, part: int, offset: int, raw: bytes | None,
                  error: str, field: str | None) -> RejectRecord:
    return RejectRecord(
        key=f"kafka-reject:{group}:{topic}:{part}:{offset}", raw=raw or b"",
        error=f"{topic}[{part}]@{offset}: {error}", source="kafka", field=field,
        topic=topic, partition=part, offset=offset)


def prepare_records(records: pa.Table, schema: Schema, *, group: str, mode: SchemaMode,
                    evolve: Callable[[list[str], Schema], Schema] | None = None,
                    conventions: IngestConventions = DEFAULT_CONVENTIONS) -> Prepared:
    """Kafka records -> rows shaped to `schema` (+ header and pseudo-columns) and rejects.

    Pure apart from `evolve` (mode `evolve` only: adds columns, returns the new schema), so
    it runs on the driver or inside a Spark task alike.
    """
    records = records.combine_chunks()
    topics = records.column("topic").to_pylist()
    parts = records.column("partition").to_pylist()
    offsets = records.column("offset").to_pylist()
    values = records.column("value").to_pylist()
    value_bytes = sum(len(v) for v in values if v)
    first: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    for t, p, o in zip(topics, parts, offsets, strict=True):
        k = (t, p)
        if o > last.get(k, -1):
            last[k] = o
        if o < first.get(k, 1 << 62):
            first[k] = o

    rejects: list[RejectRecord] = []
    lines: list[bytes] = []
    line_rec: list[int] = []    # record index of each NDJSON line
    for i, v in enumerate(values):
        problem = None
        if not v or not v.strip():
            problem = EMPTY_VALUE_ERROR
        elif b"\n" in v:  # one line per record: a pretty-printed object is re-encoded
            try:
                v = msgspec.json.encode(msgspec.json.decode(v))
            except msgspec.DecodeError as e:
                problem = f"invalid JSON: {e}"
        if problem is not None:
            rejects.append(reject_record(group, topics[i], parts[i], offsets[i], values[i],
                                         problem, None))
        else:
            lines.append(v)
            line_rec.append(i)

    batch, schema, accepted, line_errors = _coerce(lines, schema, mode, evolve, conventions)
    for line_no, (field, message) in line_errors.items():
        i = line_rec[line_no - 1]
        rejects.append(reject_record(group, topics[i], parts[i], offsets[i], values[i],
                                     message, field))
    rows = None
    if batch.num_rows:
        take = pa.array(np.asarray(line_rec, dtype=np.int64)[accepted])
        rows = _fill_kafka_columns(schema, pa.Table.from_batches([batch]), records.take(take))
    return Prepared(rows, schema, rejects, first, last, records.num_rows, value_bytes)


def _coerce(lines: list[bytes], schema: Schema, mode: SchemaMode,
            evolve: Callable[[list[str], Schema], Schema] | None,
            conventions: IngestConventions = DEFAULT_CONVENTIONS
            ) -> tuple[pa.RecordBatch, Schema, np.ndarray, dict[int, tuple[str | None, str]]]:
    """(rows, their schema, accepted line mask, {line: (field, message)}) of the lines."""
    n = len(lines)
    body = b"\n".join(lines)
    coerced = coerce_ndjson(body, schema, unknown=UNKNOWN_POLICY[mode],
                            ingest_time_ns=time.time_ns(), max_errors=max(n, 1),
                            conventions=conventions)
    if evolve is not None and coerced.unknown_fields:
        fresh = evolve(coerced.unknown_fields, schema)
        if fresh.version != schema.version:
            schema = fresh
            coerced = coerce_ndjson(body, schema, unknown="props",
                                    ingest_time_ns=time.time_ns(), max_errors=max(n, 1),
                                    conventions=conventions)
    accepted = np.ones(n, dtype=bool)
    if coerced.rejected_lines:
        accepted[np.asarray(coerced.rejected_lines, dtype=np.int64) - 1] = False
    errors: dict[int, tuple[str | None, str]] = {}
    for e in coerced.errors:
        prefix = f"line {e.line}: "
        msg = e.message[len(prefix):] if e.message.startswith(prefix) else e.message
        if e.line in errors:  # several problems on one record: one reject, every message
            field, before = errors[e.line]
            errors[e.line] = (field, f"{before}; {msg}")
        else:
            errors[e.line] = (e.field, msg)
    for line in coerced.rejected_lines:
        errors.setdefault(line, (None, "rejected"))
    return coerced.batch, schema, accepted, errors


def _fill_kafka_columns(schema: Schema, rows: pa.Table, recs: pa.Table) -> pa.Table:
    for i, col in enumerate(schema.columns):
        arr = _kafka_column(col, recs)
        if arr is not None:
            rows = rows.set_column(i, rows.schema.field(i), arr)
    return rows


def _new_records(records: pa.Table, base: dict[tuple[str, int], int]) -> pa.Table:
    """The records above the catalog's offset of their partition."""
    if not base or records.num_rows == 0:
        return records
    keep = np.ones(records.num_rows, dtype=bool)
    topics = records.column("topic").to_numpy(zero_copy_only=False)
    parts = records.column("partition").to_numpy()
    offs = records.column("offset").to_numpy()
    for (t, p), o in base.items():
        keep &= ~((topics == t) & (parts == p) & (offs <= o))
    return records.filter(pa.array(keep))


def _kafka_column(col: Column, recs: pa.Table) -> pa.Array | None:
    """The values of a header or pseudo-column for `recs`, or None for an ordinary column."""
    target = col.type.arrow()
    if col.header == "*":
        return recs.column("headers").combine_chunks().cast(target)
    if col.header is not None:
        return last_header(recs.column("headers").combine_chunks(), col.header)
    if col.name not in PSEUDO_COLUMNS:
        return None
    if col.name == "_kafka_topic":
        return recs.column("topic").combine_chunks().cast(target)
    if col.name == "_kafka_partition":
        return recs.column("partition").combine_chunks().cast(target)
    if col.name == "_kafka_offset":
        return recs.column("offset").combine_chunks().cast(target)
    if col.name == "_kafka_timestamp":
        ms = recs.column("timestamp").combine_chunks()
        ms = pc.if_else(pc.less(ms, 0), pa.scalar(None, pa.int64()), ms)
        if col.type.kind == "long":
            return ms
        return pc.multiply(ms, 1_000_000).cast(pa.timestamp("ns", tz="UTC"))
    key = recs.column("key").combine_chunks()
    if col.type.kind == "string":
        try:
            return key.cast(pa.string())
        except pa.ArrowInvalid:  # not UTF-8: keep the valid ones
            return pa.array([_utf8_or_none(k) for k in key.to_pylist()], pa.string())
    return key


def _utf8_or_none(b: bytes | None) -> str | None:
    try:
        return None if b is None else b.decode()
    except UnicodeDecodeError:
        return None


def last_header(headers: pa.ListArray, key: str) -> pa.Array:
    """Per record, the value of the last header named `key` (null if absent)."""
    n = len(headers)
    flat = headers.flatten()
    if len(flat) == 0:
        return pa.nulls(n, pa.binary())
    parents = pc.list_parent_indices(headers).to_numpy()
    match = pc.equal(flat.field("key"), key).fill_null(False).to_numpy(zero_copy_only=False)
    pos = np.full(n, -1, dtype=np.int64)
    np.maximum.at(pos, parents[match], np.nonzero(match)[0])
    take = pa.array(pos, mask=pos < 0)
    return flat.field("value").take(take)
