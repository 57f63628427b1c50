"""Compaction: merge small extents adjacent in time into well-sized ones (docs/maintenance.md).

Plan (driver, catalog only): the live extents of the current snapshot, ordered by
(min_ts, max_ts, extent_id), are walked in order; runs of consecutive *small* extents
(`byte_size < target_extent_size / 2`) are cut into groups of at most the target's input
bytes. A big extent ends a run, so groups never reach across one; a group needs two
extents or more. Extents already wholly past the table's retention are left out (retention
is about to drop them).

Write (Spark, one task per group): the task reads every block of its inputs through their
`SegmentFormat`, upgrades each batch to the table's current schema version (this is the
background row upgrade), sorts the group by the table's current sort key (`sort_by`,
`shoal.types.sortkey`), or by `_timestamp` when it has none (groups up to `SORT_MAX_ROWS`;
bigger ones keep input order: inputs in time order, each sorted as it was written), and
writes one extent through an `ExtentStager` of the table's `SegmentFormat` and `ObjectStore`.
Extents written before the key was set (or under another key) come out sorted by the
current one. It returns the new extent's `ManifestEntry`: its catalog stats come from the
writer over the merged rows (time range, distinct and token sets, membership filters,
present paths), so a merged extent is pruned whenever every one of its inputs would have
been, subject to the sets' caps (an overflowing distinct set falls back to a membership
filter where the writer builds one).

Commit (driver): one snapshot `operation="compact"` removes the inputs and adds the outputs
through the commit layer's `swap_extents`. On a conflict the rebase keeps only the groups
whose inputs are all still live; outputs of dropped groups are deleted; if no group survives
the commit gives up cleanly and every output is deleted. Rows are checked: a task whose
output row count differs from its inputs' fails the unit before anything commits.
A commit is also abandoned when `should_continue()` turns False (the worker lost its lease)
or when writing took longer than `max_commit_delay_s` (orphan GC's grace period must never
catch an output before its commit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shoal.catalog.base import Catalog, ManifestEntry, TableInfo
from shoal.commit import (DEFAULT_BLOCK_ROWS, CommitCoordinator, ExtentStager, Replacement,
                          SwapRowCountError, extent_prefix, swap_extents)
from shoal.errors import PipelineError
from shoal.format import rewrite_format
from shoal.format.base import SegmentFormat
from shoal.maintenance.policy import TablePolicy
from shoal.maintenance.runner import TaskRunner
from shoal.types.schema import TIMESTAMP_COLUMN, Schema, stored_names
from shoal.types.sortkey import block_rows_of, sort_key_of, sort_rows
from shoal.types.upgrade import upgrade_batch

SORT_MAX_ROWS = 4_000_000


class CompactionError(PipelineError):
    code = "compaction_failed"

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(f'compaction of table "{table}" failed: {reason}')


@dataclass(frozen=True)
class CompactionGroup:
    entries: tuple[ManifestEntry, ...]

    @property
    def extent_ids(self) -> list[str]:
        return [e.extent_id for e in self.entries]

    @property
    def input_bytes(self) -> int:
        return sum(e.byte_size for e in self.entries)

    @property
    def rows(self) -> int:
        return sum(e.row_count for e in self.entries)


def _time_key(e: ManifestEntry) -> tuple[int, int, str]:
    lo = e.min_ts if e.min_ts is not None else -(1 << 62)
    hi = e.max_ts if e.max_ts is not None else lo
    return (lo, hi, e.extent_id)


def plan_compaction(entries: Sequence[ManifestEntry], policy: TablePolicy, *,
                    now_s: float | None = None, max_groups: int | None = None,
                    max_group_extents: int = 4096) -> list[CompactionGroup]:
    """Groups of adjacent small extents, oldest first (see the module docstring)."""
    cutoff_ns = None
    if policy.retention_s is not None:
        cutoff_ns = int(((now_s if now_s is not None else time.time())
                         - policy.retention_s) * 1e9)
    small, target = policy.small_extent_bytes, policy.target_extent_bytes
    groups: list[CompactionGroup] = []
    run: list[ManifestEntry] = []
    run_bytes = 0

    def close() -> None:
        nonlocal run, run_bytes
        if len(run) >= 2:
            groups.append(CompactionGroup(tuple(run)))
        run, run_bytes = [], 0

    for e in sorted(entries, key=_time_key):
        if cutoff_ns is not None and e.max_ts is not None and e.max_ts < cutoff_ns:
            continue
        if e.byte_size >= small:
            close()
            continue
        if run and (run_bytes + e.byte_size > target or len(run) >= max_group_extents):
            close()
        run.append(e)
        run_bytes += e.byte_size
    close()
    return groups[:max_groups] if max_groups is not None else groups


# ---- the Spark task ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CompactionTask:
    """Everything one task needs; pickled to the executor (no catalog access there)."""

    index: int
    storage_url: str
    s3_endpoint: str | None
    prefix: str
    writer_format: SegmentFormat
    formats: dict[str, SegmentFormat]
    target_schema: dict[str, Any]           # Schema JSON of the version written
    sources: tuple[tuple[str, str], ...]    # (object_path, format name), in time order
    # per source: the target columns it stores under another name (renamed since), or not
    # at all (None: a dropped name taken again); () = every name is its own
    stored: tuple[dict[str, str | None], ...] = ()
    block_rows: int = DEFAULT_BLOCK_ROWS
    sort_by: tuple[str, ...] = ()           # the table's sort key; () sorts by _timestamp


@dataclass(frozen=True)
class CompactionTaskResult:
    index: int
    entry: ManifestEntry                    # the written extent (not committed yet)
    rows_in: int
    bytes_in: int
    seconds: float


def run_compaction_task(task: CompactionTask) -> CompactionTaskResult:
    """Read, upgrade, merge and write one group (runs inside a Spark task)."""
    from shoal.storage import open_store

    start = time.perf_counter()
    store = open_store(task.storage_url, s3_endpoint=task.s3_endpoint)
    target = Schema.from_json(task.target_schema)
    batches: list[pa.RecordBatch] = []
    bytes_in = 0
    for n, (path, fmt_name) in enumerate(task.sources):
        reader = task.formats[fmt_name].open_extent(store, path)
        meta = reader.metadata()
        names = task.stored[n] if task.stored else {}
        for b in range(meta.block_count):
            batches.append(upgrade_batch(reader.read_block(b), target, sources=names))
        bytes_in += meta.byte_size
    merged = pa.Table.from_batches(batches, schema=target.arrow())
    key = task.sort_by or ((TIMESTAMP_COLUMN,) if TIMESTAMP_COLUMN in merged.column_names
                           else ())
    if merged.num_rows <= SORT_MAX_ROWS:
        merged = sort_rows(merged, key)
    entry = ExtentStager(store, task.writer_format).write(
        task.prefix, target, merged.to_batches(max_chunksize=task.block_rows),
        block_rows=task.block_rows)
    return CompactionTaskResult(task.index, entry, merged.num_rows, bytes_in,
                                time.perf_counter() - start)


# ---- the driver ---------------------------------------------------------------------------------
@dataclass
class CompactionReport:
    table: str
    live_extents_before: int = 0     # at the start; live_extents_after: at the end (others'
    live_extents_after: int = 0      # appends meanwhile included)
    rounds: int = 0
    groups: int = 0
    extents_removed: int = 0
    extents_added: int = 0
    rows: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    snapshot_id: int | None = None
    gave_up: bool = False
    dropped_groups: int = 0
    added_extent_ids: list[str] = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_in / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k != "added_extent_ids"}
        doc["mb_per_s"] = round(self.mb_per_s, 3)
        doc["seconds"] = round(self.seconds, 3)
        return doc


def compact_table(catalog: Catalog, coordinator: CommitCoordinator, runner: TaskRunner,
                  table: str, *, storage_url: str, s3_endpoint: str | None,
                  formats: dict[str, SegmentFormat], max_groups: int | None = None,
                  block_rows: int = DEFAULT_BLOCK_ROWS, max_rounds: int = 3,
                  should_continue: Callable[[], bool] = lambda: True,
                  max_commit_delay_s: float = 1800.0,
                  on_stage: Callable[..., None] | None = None) -> CompactionReport:
    """Plan, write (Spark) and commit compaction rounds of `table`.

    Tiny extents are mostly per-extent overhead (IPC footer, stats), so one round's outputs
    can still be small; another round (up to `max_rounds`, while the plan is not empty and
    the previous round committed) merges those, so the table converges to well-sized
    extents in one unit.
    """
    start = time.perf_counter()
    report = CompactionReport(table)
    report.live_extents_before = catalog.table_counts(table)[1]
    for _ in range(max_rounds):
        committed = _compact_round(catalog, coordinator, runner, table, report,
                                   storage_url=storage_url, s3_endpoint=s3_endpoint,
                                   formats=formats, max_groups=max_groups,
                                   block_rows=block_rows, should_continue=should_continue,
                                   max_commit_delay_s=max_commit_delay_s, on_stage=on_stage)
        if not committed:
            break
    report.live_extents_after = catalog.table_counts(table)[1]
    report.seconds = time.perf_counter() - start
    return report


def _compact_round(catalog: Catalog, coordinator: CommitCoordinator, runner: TaskRunner,
                   table: str, report: CompactionReport, *, storage_url: str,
                   s3_endpoint: str | None, formats: dict[str, SegmentFormat],
                   max_groups: int | None, block_rows: int,
                   should_continue: Callable[[], bool], max_commit_delay_s: float,
                   on_stage: Callable[..., None] | None) -> bool:
    """One plan -> write -> commit; adds to `report`; True if a snapshot was committed."""
    info = catalog.load_table(table)
    policy = TablePolicy.from_properties(info.properties)
    groups = plan_compaction(catalog.manifests(table, info.current_snapshot_id), policy,
                             max_groups=max_groups)
    if not groups:
        return False
    history: dict[int, Schema] = {}
    if any(e.schema_version < info.schema.reshaped for g in groups for e in g.entries):
        history = {s.version: s for s in catalog.schema_history(table)}
    tasks = [_task(i, g, info, coordinator.format, formats, storage_url, s3_endpoint,
                   block_rows, history) for i, g in enumerate(groups)]
    results = runner.map(run_compaction_task, tasks,
                         description=f"shoal compact {table}: {len(groups)} groups")
    written_at = time.monotonic()
    by_index = {r.index: r for r in results}
    outputs: dict[int, ManifestEntry] = {r.index: r.entry for r in results}
    # A task reads every row of its inputs and writes them all: a swap refuses any other count.
    replacements = [Replacement(g.entries, outputs[i]) for i, g in enumerate(groups)]
    if on_stage is not None:
        on_stage("extents_written", table=table, paths=[e.object_path for e in outputs.values()])

    def proceed() -> bool:
        return should_continue() and time.monotonic() - written_at <= max_commit_delay_s

    def committing(current: TableInfo) -> None:
        if on_stage is not None:
            on_stage("committing", table=table, expected=current.current_snapshot_id)

    try:
        outcome = swap_extents(coordinator, table, replacements, operation="compact",
                               proceed=proceed, on_attempt=committing)
    except SwapRowCountError as e:
        r = by_index[e.index]
        raise CompactionError(table, f"group {r.index} read {r.rows_in} and wrote "
                              f"{r.entry.row_count} rows, expected {e.expected}") from None
    kept = outcome.kept
    report.rounds += 1
    report.bytes_in += sum(r.bytes_in for r in results)
    if outcome.snapshot is None:
        report.gave_up = True
        report.dropped_groups += len(groups)
        return False
    report.snapshot_id = outcome.snapshot.snapshot_id
    report.groups += len(kept)
    report.dropped_groups += len(groups) - len(kept)
    report.extents_removed += sum(len(groups[i].entries) for i in kept)
    report.extents_added += len(kept)
    report.rows += sum(groups[i].rows for i in kept)
    report.bytes_out += sum(outputs[i].byte_size for i in kept)
    report.added_extent_ids += [outputs[i].extent_id for i in kept]
    return True


def _task(index: int, group: CompactionGroup, info: TableInfo, writer: SegmentFormat,
          formats: dict[str, SegmentFormat], storage_url: str, s3_endpoint: str | None,
          block_rows: int, history: dict[int, Schema]) -> CompactionTask:
    return CompactionTask(index=index, storage_url=storage_url, s3_endpoint=s3_endpoint,
                          prefix=extent_prefix(info.name, info.id),
                          writer_format=rewrite_format(writer),
                          formats=formats,
                          target_schema=info.schema.to_json(),
                          sources=tuple((e.object_path, e.format) for e in group.entries),
                          stored=tuple(stored_names(info.schema, history[e.schema_version])
                                       if e.schema_version in history else {}
                                       for e in group.entries),
                          block_rows=block_rows_of(info.properties, block_rows),
                          sort_by=sort_key_of(info.properties, info.schema))

