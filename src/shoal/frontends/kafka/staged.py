"""The write path inside Spark tasks: Kafka ranges -> one staged extent per task.

With a `StageSpec` (every mode but `evolve`, which must change the schema on the driver),
a task of the `shoal_kafka` source does not ship records to the driver: it reads its
ranges, coerces them (`sink.prepare_records`, header and pseudo-columns included), writes
their rows as ONE extent straight to the object store, and yields one small row: the
pickled `StagedBatch` (manifest entry, rejects, first/last offset per partition). The
driver's `KafkaSink.commit_staged` then commits every task's extent with the offsets in one
catalog transaction. Records never cross into the JVM and coercion runs on every core.

An extent whose commit never happens (a crash, a failed batch) is unreferenced: the commit
deletes what certainly failed, orphan GC removes the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from shoal.commit import ExtentStager, extent_prefix
from shoal.frontends.kafka.sink import StagedBatch, prepare_records
from shoal.types.conventions import IngestConventions
from shoal.types.schema import Schema, SchemaMode


@dataclass(frozen=True)
class StageSpec:
    """What a task needs to stage rows without the catalog (JSON in the source options)."""

    table: str
    table_id: int
    schema: dict[str, Any]      # Schema.to_json() of the version rows are shaped to
    mode: SchemaMode
    group: str
    storage_url: str
    s3_endpoint: str | None = None
    sort_by: tuple[str, ...] = ()   # the table's sort key when the pipeline started
    conventions: dict[str, Any] | None = None  # IngestConventions.to_json() of the table

    def to_option(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_option(cls, text: str) -> StageSpec:
        doc = json.loads(text)
        doc["sort_by"] = tuple(doc.get("sort_by", ()))
        return cls(**doc)


def stage_task(spec: StageSpec, ranges: Iterable[Iterator[pa.RecordBatch]]) -> StagedBatch:
    """Coerce the records of `ranges` (one iterator of record batches per range) and write
    the accepted rows as one extent; the result is what the driver commits."""
    from shoal.format import default_formats
    from shoal.storage import open_store

    schema = Schema.from_json(spec.schema)
    store = open_store(spec.storage_url, s3_endpoint=spec.s3_endpoint)
    stager = ExtentStager(store, default_formats()["tlm"])
    rejects: list[Any] = []
    first: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    counts = {"records": 0, "rows": 0, "bytes": 0}

    def rows() -> Iterator[pa.RecordBatch]:
        for batches in ranges:  # one range at a time: memory stays at one range's records
            records = pa.Table.from_batches(list(batches))
            if records.num_rows == 0:
                continue
            prep = prepare_records(records, schema, group=spec.group, mode=spec.mode,
                                   conventions=IngestConventions.from_json(spec.conventions))
            rejects.extend(prep.rejects)
            first.update(prep.first)
            last.update(prep.last)
            counts["records"] += prep.records
            counts["bytes"] += prep.value_bytes
            if prep.rows is not None:
                counts["rows"] += prep.rows.num_rows
                yield from prep.rows.to_batches()

    batches = list(rows())
    entry = (stager.write(extent_prefix(spec.table, spec.table_id), schema, batches,
                          sort_by=spec.sort_by) if batches else None)
    return StagedBatch(entry, rejects, first, last, counts["records"], counts["rows"],
                       counts["bytes"])
