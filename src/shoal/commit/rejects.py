"""Reject tables: where the bulk paths (Kafka, file-drop) put records that fail coercion.

A data table `t` has a companion `t__rejects` (created on first use, schema mode `reject`) with
one row per rejected record: its raw bytes as received, the precise error, the field, the
source (`"kafka"` | `"filedrop"`) and the source position (topic/partition/offset for Kafka,
file/line for file-drop). One poison record never blocks a partition or a file: it lands
here and the pipeline moves on.

Exactly-once: every `RejectRecord` carries a unique ledger `key` (`kafka-reject:<group>:<topic>:
<partition>:<offset>`, `filedrop-reject:<sha256>:<line>`). `commit_rejects()` writes one
extent and commits it to the rejects table with one ledger row per key in ONE compare-and-swap;
keys already in the ledger are skipped, so re-running a unit of work after a crash is a no-op
for its rejects. The protocol of a bulk path: commit a unit's rejects first, then its data
with the data's own ledger key or source offsets; a crash between the two re-runs the unit,
the rejects are skipped by key and the data lands once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from shoal.catalog.base import Catalog, LedgerEntry, TableInfo
from shoal.commit.coordinator import CommitCoordinator
from shoal.errors import (CommitRetriesExhaustedError, TableAlreadyExistsError,
                          TableNotFoundError)
from shoal.types.columns import BYTES, INT, LONG, STRING
from shoal.types.schema import PROPS_COLUMN, REJECTS_SUFFIX, TIMESTAMP_COLUMN, Column, Schema

REJECTS_COLUMNS: tuple[Column, ...] = (
    Column("raw", BYTES),
    Column("error", STRING),
    Column("field", STRING),
    Column("source", STRING),
    Column("topic", STRING),
    Column("partition", INT),
    Column("offset", LONG),
    Column("file", STRING),
    Column("line", LONG),
)

_MAX_REPLAY_ROUNDS = 64  # a concurrent writer of the same keys can make a round lose a race


def rejects_table_name(table: str) -> str:
    """The reject table of data table `table`: `<table>__rejects`."""
    return f"{table}{REJECTS_SUFFIX}"


@dataclass(frozen=True)
class RejectRecord:
    """One record a bulk path could not ingest, with where it came from."""

    key: str            # unique ledger key; re-committing the same key is a no-op
    raw: bytes          # the record's raw bytes as received (a line, a Kafka value)
    error: str          # the precise message, e.g. 'line 7: field "x": int expects ...'
    source: str         # "kafka" | "filedrop"
    field: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    file: str | None = None     # object path / URL of the dropped file
    line: int | None = None     # 1-based line in that file
    timestamp_ns: int | None = None  # when rejected (default: now)


def rejects_schema() -> Schema:
    """The schema a reject table is created with (reserved columns first)."""
    return Schema.create(REJECTS_COLUMNS)


def ensure_rejects_table(catalog: Catalog, table: str) -> TableInfo:
    """The reject table of data table `table`, created (mode "reject") if missing.

    Race-safe: two processes creating it at once both get the one table.
    """
    name = rejects_table_name(table)
    try:
        return catalog.load_table(name)
    except TableNotFoundError:
        pass
    try:
        return catalog.create_table(name, rejects_schema(), mode="reject",
                                    properties={"rejects_of": table})
    except TableAlreadyExistsError:
        return catalog.load_table(name)


def rejects_batch(records: Sequence[RejectRecord], schema: Schema) -> pa.RecordBatch:
    """`records` as one batch shaped exactly as `schema.arrow()` (a reject table's schema).

    Columns of `schema` that a `RejectRecord` does not know (added by ALTER TABLE) are null.
    """
    now = time.time_ns()
    values: dict[str, list[object]] = {
        TIMESTAMP_COLUMN: [r.timestamp_ns if r.timestamp_ns is not None else now
                           for r in records],
        PROPS_COLUMN: [None] * len(records),
        "raw": [bytes(r.raw) for r in records],
        "error": [r.error for r in records],
        "field": [r.field for r in records],
        "source": [r.source for r in records],
        "topic": [r.topic for r in records],
        "partition": [r.partition for r in records],
        "offset": [r.offset for r in records],
        "file": [r.file for r in records],
        "line": [r.line for r in records],
    }
    target = schema.arrow()
    arrays = []
    for f in target:
        if f.name in values:
            arrays.append(pa.array(values[f.name], type=f.type))
        else:
            arrays.append(pa.nulls(len(records), type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def commit_rejects(coordinator: CommitCoordinator, catalog: Catalog, table: str,
                   records: Sequence[RejectRecord]) -> int:
    """Commit `records` to the reject table of data table `table`; how many were committed.

    One extent, one snapshot, one ledger row per record key, in one CAS. Records whose key is
    already in the ledger (or repeated within `records`) are skipped: re-running after a
    crash commits nothing twice. The first attempt commits every key without looking any up
    (the common case: a unit seen for the first time costs no ledger reads); if the catalog
    finds one applied, that extent is deleted and the keys still missing are retried.
    """
    if not records:
        return 0
    info = ensure_rejects_table(catalog, table)
    pending: dict[str, RejectRecord] = {}
    for r in records:
        pending.setdefault(r.key, r)
    todo = list(pending.values())
    for _ in range(_MAX_REPLAY_ROUNDS):
        if not todo:
            return 0
        info = catalog.load_table(info.name)
        entry = coordinator.write_extent(info, [rejects_batch(todo, info.schema)])
        ack = {"table": info.name, "rows": 1, "reject": True}
        outcome = coordinator.append(info.name, [entry],
                                     ledger=[LedgerEntry(r.key, ack) for r in todo],
                                     summary={"rejects_of": table})
        if outcome.replayed is None:
            return len(todo)
        # Some key was applied before (a re-run) or meanwhile (a race): keep the missing ones.
        todo = [r for r in todo if catalog.ledger_get(r.key) is None]
    raise CommitRetriesExhaustedError(info.name, _MAX_REPLAY_ROUNDS)
