"""The Kafka pipeline's sink: one micro-batch of Kafka records -> the shared write path.

`KafkaSink.write(records)` takes the records of one Spark micro-batch (`RECORD_SCHEMA` of
`source.py`, any order, possibly with records the catalog already holds) and commits them
exactly once:

1. Records at or below the catalog's offset of their partition are dropped (already applied:
   a replayed batch after a crash or a Spark retry).
2. Each value is one JSON object coerced against the table schema by `coerce_ndjson` in
   partial mode; unknown fields follow the pipeline's mode (`drop` by default for Kafka;
   `evolve` adds columns like the REST path; `reject` refuses the record). An empty value
   (tombstone) or a value that is not one JSON object is refused too.
3. Accepted rows get the header columns (SPEC §7.3: `HEADERS` = every header in order,
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

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.catalog.base import Catalog, SourceOffset, TableInfo
from shoal.errors import InvalidSchemaError, ShoalError
from shoal.ingest.coerce import coerce_ndjson
from shoal.ingest.commit import CommitCoordinator, CommitSpec
from shoal.ingest.evolve import plan_evolution
from shoal.ingest.rejects import RejectRecord, commit_rejects
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


class ConcurrentPipelineError(ShoalError):
    """Another pipeline committed offsets of the same source and table meanwhile."""

    code = "concurrent_pipeline"

    def __init__(self, table: str, source: str) -> None:
        super().__init__(f'table "{table}": offsets of source "{source}" moved while this '
                         "batch was being committed; is another pipeline consuming the same "
                         "group into the same table?")


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

    # ---- one micro-batch --------------------------------------------------------------------
    def write(self, records: pa.Table) -> BatchResult:
        base = self.committed()
        total = records.num_rows
        records = _new_records(records, base)
        if records.num_rows == 0:
            return BatchResult(0, 0, 0, 0, total, None, {})
        records = records.combine_chunks()
        topics = records.column("topic").to_pylist()
        parts = records.column("partition").to_pylist()
        offsets = records.column("offset").to_pylist()
        values = records.column("value").to_pylist()
        value_bytes = sum(len(v) for v in values if v)

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
                rejects.append(self._reject(topics[i], parts[i], offsets[i], values[i],
                                            problem, None))
            else:
                lines.append(v)
                line_rec.append(i)

        info = self.catalog.load_table(self.table)
        batch, accepted, line_errors = self._coerce(info, lines)
        for line_no, (field, message) in line_errors.items():
            i = line_rec[line_no - 1]
            rejects.append(self._reject(topics[i], parts[i], offsets[i], values[i],
                                        message, field))
        rows = pa.Table.from_batches([batch]) if batch.num_rows else None
        if rows is not None:
            take = pa.array(np.asarray(line_rec, dtype=np.int64)[accepted])
            rows = self._fill_kafka_columns(self._schema_of(batch), rows, records.take(take))

        last: dict[tuple[str, int], int] = {}
        for t, p, o in zip(topics, parts, offsets):
            if o > last.get((t, p), -1):
                last[(t, p)] = o
        n_rejects = commit_rejects(self.coordinator, self.catalog, self.table, rejects)
        snapshot_id = self._commit(rows, last, base)
        if self.on_kafka_commit is not None:
            try:
                self.on_kafka_commit({k: o + 1 for k, o in last.items()})
            except Exception:  # lag tools only; the catalog holds the truth
                pass
        return BatchResult(records.num_rows, 0 if rows is None else rows.num_rows, n_rejects,
                           value_bytes, total - records.num_rows, snapshot_id, last)

    def _schema_of(self, batch: pa.RecordBatch) -> Schema:
        v = int((batch.schema.metadata or {}).get(b"shoal.schema_version", b"0"))
        return self.catalog.schema_version(self.table, v)

    def _reject(self, topic: str, part: int, offset: int, raw: bytes | None, error: str,
                field: str | None) -> RejectRecord:
        return RejectRecord(
            key=f"kafka-reject:{self.group}:{topic}:{part}:{offset}", raw=raw or b"",
            error=f"{topic}[{part}]@{offset}: {error}", source="kafka", field=field,
            topic=topic, partition=part, offset=offset)

    def _coerce(self, info: TableInfo, lines: list[bytes]
                ) -> tuple[pa.RecordBatch, np.ndarray, dict[int, tuple[str | None, str]]]:
        """(rows, accepted line mask, {line: (field, message)}) of the NDJSON lines."""
        n = len(lines)
        body = b"\n".join(lines)
        policy = {"evolve": "props", "drop": "drop", "reject": "reject"}[self.mode]
        coerced = coerce_ndjson(body, info.schema, unknown=policy,  # type: ignore[arg-type]
                                ingest_time_ns=time.time_ns(), max_errors=max(n, 1))
        if self.mode == "evolve" and coerced.unknown_fields:
            plan = plan_evolution(coerced.unknown_fields, info.schema, cap=self.evolution_cap)
            if plan.new_columns:
                self.coordinator.evolve_schema(self.table, plan.new_columns, base=info.schema)
                info = self.catalog.load_table(self.table)
                coerced = coerce_ndjson(body, info.schema, unknown="props",
                                        ingest_time_ns=time.time_ns(), max_errors=max(n, 1))
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
        return coerced.batch, accepted, errors

    def _fill_kafka_columns(self, schema: Schema, rows: pa.Table, recs: pa.Table) -> pa.Table:
        for i, col in enumerate(schema.columns):
            arr = _kafka_column(col, recs)
            if arr is not None:
                rows = rows.set_column(i, rows.schema.field(i), arr)
        return rows

    def _commit(self, rows: pa.Table | None, last: dict[tuple[str, int], int],
                base: dict[tuple[str, int], int]) -> int | None:
        info = self.catalog.load_table(self.table)
        written = []
        if rows is not None:
            schema = self._schema_of(rows.to_batches()[0])
            written = [self.coordinator.write_extent(info, rows.to_batches(), schema=schema)]
        offsets = [SourceOffset(source_name(self.group, t), str(p), o)
                   for (t, p), o in sorted(last.items())]
        n_rows = 0 if rows is None else rows.num_rows

        def build(_info: TableInfo) -> CommitSpec:
            now = self.committed()
            for key in last:
                if now.get(key) != base.get(key):
                    raise ConcurrentPipelineError(self.table, source_name(self.group, key[0]))
            return CommitSpec(operation="append", add=written, offsets=offsets,
                              summary={"added_extents": len(written), "added_rows": n_rows,
                                       "source": "kafka", "group": self.group})

        outcome = self.coordinator.run(self.table, build, written=written)
        return None if outcome.snapshot is None else outcome.snapshot.snapshot_id


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
