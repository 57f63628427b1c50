"""DELETE FROM and TRUNCATE TABLE: rows leave a table as new extents, never in place.

A delete reads one snapshot S of the table and works on the extents live at S only:

1. Plan (catalog and footers, no rows read): the WHERE is analysed as the planner analyses
   `SELECT * FROM t WHERE ...` (the same allow-list and the same lowering to a
   `BlockPredicate`), then pruning stages 1 and 2 keep the extents and blocks that may hold
   a matching row. An extent pruned there cannot hold one and is not touched.
2. Match (per extent): only the predicate's columns of the kept blocks are read, in the
   engines' shape (`shoal.query.scan_read`), with each row's position in its extent, and
   the embedded engine (the same transpiled Spark SQL a SELECT would run) names the rows
   whose predicate is TRUE (NULL keeps a row, as in SQL). No match: the extent is left
   alone. Every row: it is removed without being rewritten. Otherwise the whole extent is
   read, upgraded to S's schema version, and written again without those rows (in their
   stored order) as one new extent.
3. Commit: one snapshot, `operation="delete"` (or `"truncate"`), removes the touched
   extents and adds the rewritten ones, through the write side's `db.replace_extents` (the
   commit layer's compaction recipe, `swap_extents`, with `all_or_none`): the commit
   rebases over appends that landed meanwhile (their rows were never read, so they are
   never deleted), and if any touched extent stopped being live (compacted, expired,
   deleted by another statement) nothing commits, the new extents are discarded and the
   delete starts again from a fresh snapshot. So the table is seen before or after the
   statement, never in between.

Where it runs: extents are matched and rewritten in this process, a few at a time, when
the bytes of the extents to read fit the embedded engine's budget
(`Config.local_scan_max_bytes`), else as one Spark task per extent (`run_extent_delete` is
a module-level function over a picklable `ExtentDelete`, as compaction's tasks are; each
task opens its own embedded engine). A predicate the embedded engine cannot answer exactly
as Spark would is refused with the reason (400).

TRUNCATE TABLE, and DELETE without WHERE, remove every extent live at S (appends committed
after S stay). Earlier snapshots still hold the rows for time travel until snapshot
retention expires them; the files are deleted then (docs/maintenance.md, "Erasure").
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from shoal.catalog.base import ManifestEntry
from shoal.errors import CommitError, QueryError, UnavailableError
from shoal.format import rewrite_format
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.format.shred import parse_hidden
from shoal.query.database import Database
from shoal.query.ddl import DeleteRows, TruncateTable
from shoal.query.embedded.transpile import NotLocal, spark_sql_type, to_local
from shoal.query.planner import analyze
from shoal.query.scan_plan import (TIMESTAMP_NS, FooterCache, ScanSpec, ScanStats, ScanTask,
                                   stage2, stored_by_version)
from shoal.query.scan_read import read_native, read_tasks
from shoal.storage.base import ObjectStore
from shoal.types import parse_type
from shoal.types.schema import Schema
from shoal.types.sortkey import block_rows_of

ROW = "__shoal_row"          # a row's position in its extent, beside the predicate's columns
VIEW = "__shoal_delete"
MAX_ROUNDS = 8               # fresh starts after a touched extent stopped being live
LOCAL_THREADS = max(1, min(4, os.cpu_count() or 1))    # extents rewritten at once in process

DELETE_RESULT_SCHEMA = pa.schema([
    ("table", pa.string()), ("operation", pa.string()), ("rows_deleted", pa.int64()),
    ("extents_touched", pa.int64()), ("extents_rewritten", pa.int64()),
    ("extents_removed", pa.int64()), ("extents_scanned", pa.int64()),
    ("extents_pruned", pa.int64()), ("bytes_read", pa.int64()),
    ("bytes_rewritten", pa.int64()), ("snapshot_id", pa.int64()), ("engine", pa.string())])


class DeleteNotLocalError(QueryError):
    """The predicate uses something the embedded engine cannot answer exactly as Spark."""

    code = "delete_predicate_unsupported"

    def __init__(self, reason: str) -> None:
        super().__init__(f"DELETE cannot evaluate this WHERE in process: {reason}")


class DeleteConflictError(UnavailableError, CommitError):
    """Other writers kept replacing the extents a delete had to rewrite (retryable)."""

    code = "delete_conflict"

    def __init__(self, table: str, rounds: int) -> None:
        self.table = table
        super().__init__(f'DELETE on table "{table}" gave up after {rounds} attempts: the '
                         "extents it had to rewrite kept being replaced by other writers "
                         "(compaction, retention, another DELETE); retry it")


@dataclass(frozen=True)
class RowMatch:
    """The WHERE as the embedded engine runs it over one extent's rows."""

    sql: str                         # DuckDB SQL: the ROW of every matching row of VIEW
    functions: tuple[str, ...]       # shoal functions the SQL calls
    columns: tuple[str, ...]         # the scan columns the predicate reads


@dataclass(frozen=True)
class ExtentDelete:
    """One extent's share of a delete; pickled to a Spark task (no catalog there)."""

    index: int
    storage_url: str
    s3_endpoint: str | None
    table_name: str
    table_id: int
    stage: Callable[..., ManifestEntry]   # writes the rewrite (the write side's function)
    writer_format: SegmentFormat     # the table's (ingest's) format; shredding as the source
    formats: dict[str, SegmentFormat]
    schema: dict[str, Any]           # Schema JSON of the snapshot's version: read and written
    path: str
    format: str
    rows: int
    blocks: tuple[int, ...] | None   # the blocks stage 2 kept (None: every block)
    match: RowMatch | None           # None: every row goes
    block_rows: int
    # Where the read version's columns are in this extent when it was written under an
    # older version that a later one renamed or dropped (None: under their own names).
    stored: dict[str, str | None] | None = None


@dataclass(frozen=True)
class ExtentDeleteResult:
    index: int
    deleted: int
    entry: ManifestEntry | None      # the rewritten extent, not committed yet
    bytes_read: int
    bytes_written: int


@dataclass
class DeleteReport:
    table: str
    operation: str
    rows_deleted: int = 0
    extents_scanned: int = 0        # read to match rows (after pruning)
    extents_pruned: int = 0         # ruled out by stages 1-2 without reading a row
    extents_rewritten: int = 0
    extents_removed: int = 0        # every row matched: removed, nothing written
    bytes_read: int = 0
    bytes_rewritten: int = 0
    snapshot_id: int | None = None  # the committed snapshot (None: nothing matched)
    read_snapshot_id: int | None = None
    rounds: int = 0
    engine: str = "local"
    seconds: float = 0.0
    written_paths: list[str] = field(default_factory=list)

    @property
    def extents_touched(self) -> int:
        return self.extents_rewritten + self.extents_removed

    def to_table(self) -> pa.Table:
        row = {k: getattr(self, k) for k in DELETE_RESULT_SCHEMA.names}
        return pa.Table.from_pylist([row], schema=DELETE_RESULT_SCHEMA)


# ---- one extent (in process or in a Spark task) ------------------------------------------------
def run_extent_delete(task: ExtentDelete, *, store: ObjectStore | None = None,
                      executor: Any = None) -> ExtentDeleteResult:
    """Match and rewrite one extent (see the module docstring, step 2). `store` and
    `executor` (a `DuckDBExecutor`) are the caller's when it has them; a Spark task opens
    its own."""
    if task.match is None:
        return ExtentDeleteResult(task.index, task.rows, None, 0, 0)
    if store is None:
        from shoal.storage import open_store

        store = open_store(task.storage_url, s3_endpoint=task.s3_endpoint)
    own = executor is None
    if own:
        from shoal.query.embedded.local_engine import DuckDBExecutor

        executor = DuckDBExecutor(threads=1, idle=1)
    nbytes = [0]

    def count(n: int) -> None:
        nbytes[0] += n

    try:
        matched, shredded = _matched_rows(task, store, executor, count)
    finally:
        if own:
            executor.close()
    if len(matched) == 0:
        return ExtentDeleteResult(task.index, 0, None, nbytes[0], 0)
    if len(matched) == task.rows:
        return ExtentDeleteResult(task.index, task.rows, None, nbytes[0], 0)
    schema = Schema.from_json(task.schema)
    spec = _spec(task, schema.names)
    batches = list(read_native(spec, [ScanTask(task.path, task.format, None, task.rows,
                                               stored=task.stored)],
                               store, task.formats, count))
    rows = pa.Table.from_batches(batches, schema=schema.arrow())
    gone = pa.array(matched, pa.int64())
    keep = pc.invert(pc.is_in(pa.array(range(rows.num_rows), pa.int64()), value_set=gone))
    kept = rows.filter(keep)
    # Shredded dynamic paths cost more to write than the rest together: an extent keeps them
    # if it had them (a compacted one), and does without if it did not (as ingest wrote it).
    fmt = rewrite_format(task.writer_format) if shredded else task.writer_format
    entry = task.stage(store, fmt, task.table_name, task.table_id, schema, kept,
                       block_rows=task.block_rows)
    return ExtentDeleteResult(task.index, rows.num_rows - kept.num_rows, entry, nbytes[0],
                              entry.byte_size)


def _spec(task: ExtentDelete, columns: Sequence[str]) -> ScanSpec:
    return ScanSpec(table="", snapshot_id=0, storage_url=task.storage_url,
                    s3_endpoint=task.s3_endpoint, schema=task.schema, columns=list(columns))


def _matched_rows(task: ExtentDelete, store: ObjectStore, executor: Any,
                  count: Callable[[int], None]) -> tuple[list[int], bool]:
    """Positions (in the extent) of the rows whose predicate is TRUE, and whether the extent
    holds shredded dynamic paths."""
    assert task.match is not None
    reader = task.formats[task.format].open_extent(store, task.path)
    try:
        meta = reader.metadata()
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    blocks = list(task.blocks) if task.blocks is not None else list(range(meta.block_count))
    starts: list[int] | None = None
    if meta.block_stats is not None:
        starts = [0]
        for st in meta.block_stats:
            starts.append(starts[-1] + int(st["rows"]))
    shredded = any(parse_hidden(name) is not None for st in meta.block_stats or ()
                   for name in st.get("columns") or ())
    spec = _spec(task, task.match.columns)
    parts: list[pa.RecordBatch] = []
    offset = 0
    scan = ScanTask(task.path, task.format, blocks, task.rows, stored=task.stored)
    for block, batch in zip(blocks, read_tasks(spec, [scan], store, task.formats, count),
                            strict=True):
        start = starts[block] if starts is not None else offset
        offset = start + batch.num_rows
        ids = pa.array(range(start, offset), pa.int64())
        parts.append(pa.RecordBatch.from_arrays([*batch.columns, ids],
                                                names=[*batch.schema.names, ROW]))
    if not parts:
        return [], shredded
    table = pa.Table.from_batches(parts)
    answer = executor.run(task.match.sql, {VIEW: table}, list(task.match.functions))
    return answer.column(0).to_pylist(), shredded


class SparkTasks:
    """Runs each payload as one task of a Spark job (the maintenance runner's shape)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def map(self, fn: Callable[[Any], Any], payloads: Sequence[Any], *,
            description: str = "") -> list[Any]:
        if not payloads:
            return []
        sc = self.spark.sparkContext
        sc.setJobDescription(description or None)
        try:
            return sc.parallelize(list(payloads), len(payloads)).map(fn).collect()
        finally:
            sc.setJobDescription(None)


# ---- planning --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Where:
    predicate: BlockPredicate | None
    match: RowMatch


def _plan_where(stmt: DeleteRows, schema: Schema) -> _Where:
    """The WHERE, analysed as a SELECT of the table (allow-list, pruning predicate) and
    transpiled for the embedded engine."""
    assert stmt.select_sql is not None
    types = {c.name: c.type for c in schema.columns}
    analysis = analyze(stmt.select_sql, {stmt.name: {**types, ROW: parse_type("long")}})
    refs = analysis.refs
    if len(refs) != 1 or len(list(analysis.tree.find_all(exp.Table))) != 1:
        raise QueryError(f'the WHERE of a DELETE reads only the columns of "{stmt.name}" '
                         "(no subqueries or other tables)")
    tree = analysis.tree
    if not isinstance(tree, exp.Select):
        raise QueryError("DELETE needs DELETE FROM <table> [WHERE <predicate>]")
    # Spark resolves column names case-insensitively: spell them as the table does
    spelled = {c.lower(): c for c in [*schema.names, TIMESTAMP_NS]}
    for col in tree.find_all(exp.Column):
        name = spelled.get(col.name.lower())
        if name is not None and name != col.name:
            col.set("this", exp.to_identifier(name))
    mentioned = {c.name for c in tree.find_all(exp.Column)}
    columns = [c for c in schema.names if c in mentioned]
    if TIMESTAMP_NS in mentioned:
        columns.append(TIMESTAMP_NS)
    tree.set("expressions", [exp.column(ROW)])
    view_types = {c: ("BIGINT" if c == TIMESTAMP_NS
                      else spark_sql_type(schema.column(c).type.kind)) for c in columns}
    view_types[ROW] = "BIGINT"
    dynamic = sorted(c for c in columns
                     if c != TIMESTAMP_NS and schema.column(c).type.kind == "dynamic")
    try:
        statement = to_local(analysis.tree_for([VIEW]), {VIEW: view_types}, stmt.select_sql,
                             {VIEW: dynamic})
    except NotLocal as e:
        raise DeleteNotLocalError(e.reason) from None
    if statement.scan_paths.get(VIEW, ([], []))[0]:
        paths, unread = statement.scan_paths[VIEW]
        columns = [c for c in columns if c not in unread] + paths
    return _Where(refs[0].predicate, RowMatch(statement.sql, tuple(sorted(statement.functions)),
                                              tuple(columns)))


# ---- the statement ---------------------------------------------------------------------------
def execute_delete(stmt: DeleteRows | TruncateTable, db: Database, *,
                   footers: FooterCache | None = None, executor: Any = None,
                   spark_runner: Callable[[], Any] | None = None,
                   on_stage: Callable[..., None] | None = None) -> DeleteReport:
    """Run a DELETE or TRUNCATE (see the module docstring). `executor`: the embedded
    engine's executor to match rows with in process; `spark_runner()` gives a
    `TaskRunner` for a delete too big for this process; `on_stage(stage, **info)` is told
    "extents_written" (before the commit) and the commit's stages ("committing",
    "committed"). The commit is the write side's (`db.replace_extents`)."""
    start = time.perf_counter()
    catalog = db.catalog
    truncate = isinstance(stmt, TruncateTable)
    where = stmt if isinstance(stmt, DeleteRows) and stmt.where is not None else None
    writer = db.formats["tlm"]
    report = DeleteReport(stmt.name, "truncate" if truncate else "delete")
    footers = footers if footers is not None else FooterCache()
    own_executor = None
    try:
        for _ in range(MAX_ROUNDS):
            report.rounds += 1
            info = catalog.load_table(stmt.name)
            planned = _plan_where(where, info.schema) if where is not None else None
            predicate = planned.predicate if planned is not None else None
            plan = catalog.plan_extents(stmt.name, predicate,
                                        snapshot_id=info.current_snapshot_id)
            report.read_snapshot_id = plan.snapshot_id
            schema = catalog.schema_version(
                stmt.name, catalog.snapshot(stmt.name, plan.snapshot_id).schema_version)
            stats = ScanStats(extents_considered=plan.considered, extents_pruned=plan.pruned)
            by_path = {e.object_path: e for e in plan.entries}
            stored = stored_by_version(catalog, stmt.name, schema, plan.entries)
            if planned is None:
                scans = [ScanTask(e.object_path, e.format, None, e.row_count, e.byte_size,
                                  stored.get(e.schema_version))
                         for e in plan.entries]
            else:
                scans = stage2(plan.entries, predicate, db.store, db.formats, footers, stats,
                               stored)
            report.extents_pruned = stats.extents_pruned
            report.extents_scanned = len(scans) if planned is not None else 0
            tasks = [ExtentDelete(
                index=i, storage_url=db.config.resolved_storage_url,
                s3_endpoint=db.config.s3_endpoint, table_name=info.name, table_id=info.id,
                stage=db.stage_rewrite, writer_format=writer, formats=db.formats,
                schema=schema.to_json(), path=s.path, format=s.format,
                rows=by_path[s.path].row_count,
                blocks=tuple(s.blocks) if s.blocks is not None else None,
                match=planned.match if planned is not None else None,
                block_rows=block_rows_of(info.properties), stored=s.stored)
                for i, s in enumerate(scans)]
            big = sum(s.planned_bytes for s in scans) > db.config.local_scan_max_bytes
            if planned is not None and big and spark_runner is not None:
                report.engine = "spark"
                results = spark_runner().map(
                    run_extent_delete, tasks,
                    description=f"shoal delete {stmt.name}: {len(tasks)} extents")
            else:
                if planned is not None and executor is None and own_executor is None:
                    from shoal.query.embedded.local_engine import DuckDBExecutor

                    own_executor = DuckDBExecutor(threads=2, idle=1)
                run = functools.partial(run_extent_delete, store=db.store,
                                        executor=executor or own_executor)
                if len(tasks) > 1 and LOCAL_THREADS > 1:
                    with ThreadPoolExecutor(LOCAL_THREADS,
                                            thread_name_prefix="shoal-delete") as pool:
                        results = list(pool.map(run, tasks))
                else:
                    results = [run(t) for t in tasks]
            touched = [r for r in results if r.deleted > 0]
            report.bytes_read = stats.bytes_read + sum(r.bytes_read for r in results)
            if not touched:
                report.rows_deleted = 0
                break
            changes = [(by_path[tasks[r.index].path], r.entry, r.deleted) for r in touched]
            written = [r.entry.object_path for r in touched if r.entry is not None]
            if on_stage is not None:
                on_stage("extents_written", table=stmt.name, paths=written)
            deleted = sum(r.deleted for r in touched)
            snapshot = db.replace_extents(stmt.name, changes, operation=report.operation,
                                          summary={"deleted_rows": deleted,
                                                   "read_snapshot_id": plan.snapshot_id},
                                          on_stage=on_stage)
            if snapshot is None:
                continue            # a touched extent is gone: start again from a fresh read
            report.snapshot_id = snapshot.snapshot_id
            report.rows_deleted = deleted
            report.extents_rewritten = sum(1 for r in touched if r.entry is not None)
            report.extents_removed = sum(1 for r in touched if r.entry is None)
            report.bytes_rewritten = sum(r.bytes_written for r in touched)
            report.written_paths = written
            break
        else:
            raise DeleteConflictError(stmt.name, MAX_ROUNDS)
    finally:
        if own_executor is not None:
            own_executor.close()
    report.seconds = time.perf_counter() - start
    return report
