"""The file-drop pipeline's driver: scan a prefix, run Spark tasks, commit (docs/filedrop.md).

One `scan()`:

1. lists the watched prefix (`DropSource.candidates`); an object this process already saw
   with the same key, size and modification time (that time at least `STABLE_AGE_NS` older
   than the listing), whose content is known to be ingested, is skipped without reading it
   (poll loops re-scan cheaply);
2. spreads the rest over Spark jobs (groups balanced by bytes, at least one per core), run
   concurrently from a small thread pool so commits overlap parsing; each job is one task
   running `task.process_files`, which hashes, checks the ledger, coerces and writes the
   extents itself, returning manifest entries and reject records;
3. commits, as each job finishes, through the commit layer's `append_files`: first the
   group's rejects (keyed per line), then the group's extents with one ledger row
   `filedrop:{sha256}` per file, in ONE compare-and-swap. Two identical objects in one scan
   are one file: the copy is passed as already applied and its extents are deleted. If
   another pipeline landed one of the group's keys meanwhile, the group is committed file by
   file and the replayed ones are dropped.

Exactly-once: a file's data and its ledger key land in one catalog transaction; a crash
before it leaves only uncommitted extents (orphan GC) and, at most, the file's rejects,
which a re-run skips by key. Re-scans no-op; a file changed by one byte has another key.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from shoal.catalog.base import Catalog, TableInfo
from shoal.commit import CommitCoordinator, StagedFile, append_files
from shoal.errors import CommitStateUnknownError, IngestError, ShoalError, TableNotFoundError
from shoal.frontends.filedrop.source import DropSource
from shoal.frontends.filedrop.task import FileResult, TaskSpec, process_files
from shoal.storage import ObjectInfo
from shoal.types.schema import Schema, SchemaMode

MAX_GROUP_FILES = 64
MIN_GROUP_BYTES = 1 << 20
MAX_GROUP_BYTES = 64 << 20
# An object's (key, size, mtime) identifies its content for the skip cache only once it is
# this much older than the listing: S3 keeps modification times in whole seconds, so a
# rewrite within the same second with the same size would otherwise look unchanged.
STABLE_AGE_NS = 2_000_000_000


class FileDropTaskError(IngestError):
    """A Spark task of the pipeline failed (not a bad line: those go to the reject table)."""

    code = "filedrop_task_failed"

    def __init__(self, files: Sequence[str], cause: BaseException) -> None:
        from shoal.query.spark.failures import spark_message

        self.files = list(files)
        detail = spark_message(cause)   # the executor's Python error, not a Java frame
        more = f" (+{len(files) - 1} more)" if len(files) > 1 else ""
        super().__init__(f"file-drop task failed on {files[0]}{more}: {detail.strip()}")


@dataclass(frozen=True)
class ScanProgress:
    files_done: int
    files_total: int
    rows: int
    bytes_done: int
    elapsed_s: float


@dataclass
class ScanSummary:
    listed: int = 0             # candidate objects under the prefix
    ingested: int = 0           # new files committed
    known: int = 0              # already in the ledger (or seen by this process)
    duplicates: int = 0         # identical to a file committed in this scan or concurrently
    changed: int = 0            # rewritten while being read: left for the next scan
    rows: int = 0
    rejected: int = 0           # reject rows committed (bad lines)
    bytes: int = 0              # bytes read of the files processed (as stored)
    text_bytes: int = 0         # decompressed NDJSON bytes of the ingested files
    new_columns: list[str] = field(default_factory=list)
    snapshot_id: int | None = None
    seconds: float = 0.0

    def line(self, table: str) -> str:
        mb = self.bytes / 1e6
        secs = max(self.seconds, 1e-9)
        extra = "".join([
            f", {self.rejected} line(s) rejected" if self.rejected else "",
            f", {self.duplicates} duplicate(s)" if self.duplicates else "",
            f", {self.known} already ingested" if self.known else "",
            f", {self.changed} changed while read (retried next scan)" if self.changed else "",
            f", new columns: {', '.join(self.new_columns)}" if self.new_columns else ""])
        snap = f"snapshot {self.snapshot_id}" if self.snapshot_id is not None else "no commit"
        return (f"filedrop -> {table}: {self.listed} object(s), {self.ingested} new file(s), "
                f"{self.rows} rows{extra}; {mb:.1f} MB in {self.seconds:.2f} s "
                f"({mb / secs:.1f} MB/s, {self.rows / secs:,.0f} records/s); {snap}")


class FileDropPipeline:
    """Watches one prefix for one table; `scan()` once or `run()` in a poll loop."""

    def __init__(self, *, catalog: Catalog, coordinator: CommitCoordinator, spark: Any,
                 source: DropSource, table: str, catalog_url: str, storage_url: str,
                 s3_endpoint: str | None = None, mode: SchemaMode | None = None,
                 create: bool = False, min_age_s: float = 0.0, chunk_bytes: int = 32 << 20,
                 memory_limit: int = 256 << 20, evolution_cap: int = 32,
                 on_progress: Callable[[ScanProgress], None] | None = None) -> None:
        self.catalog = catalog
        self.coordinator = coordinator
        self.spark = spark
        self.source = source
        self.table = table
        self.mode = mode
        self.create = create
        self.min_age_s = min_age_s
        self.on_progress = on_progress
        self._spec = partial(TaskSpec, table=table, source=source, catalog_url=catalog_url,
                             storage_url=storage_url, s3_endpoint=s3_endpoint,
                             format=coordinator.format.name, chunk_bytes=chunk_bytes,
                             memory_limit=memory_limit, evolution_cap=evolution_cap)
        self._seen: dict[tuple[str, int, int], str] = {}   # (key, size, mtime) -> sha256
        self._done: set[str] = set()                       # sha256 known to be ingested
        self._listed_at_ns = 0

    @classmethod
    def from_client(cls, db: Any, spark: Any, source: DropSource, table: str,
                    **options: Any) -> FileDropPipeline:
        """A pipeline on an embedded `shoal.client.Shoal` (its catalog, store and config)."""
        cfg = db.config
        return cls(catalog=db.catalog, coordinator=db.coordinator, spark=spark, source=source,
                   table=table, catalog_url=cfg.resolved_catalog_url,
                   storage_url=cfg.resolved_storage_url, s3_endpoint=cfg.s3_endpoint,
                   **options)

    # ---- one scan -----------------------------------------------------------------------------
    def _load_table(self) -> TableInfo:
        try:
            return self.catalog.load_table(self.table)
        except TableNotFoundError:
            if not self.create:
                raise
        from shoal.errors import TableAlreadyExistsError

        try:
            return self.catalog.create_table(self.table, Schema.create([]), mode="evolve")
        except TableAlreadyExistsError:
            return self.catalog.load_table(self.table)

    def scan(self) -> ScanSummary:
        t0 = time.perf_counter()
        info = self._load_table()
        summary = ScanSummary()
        self._listed_at_ns = time.time_ns()
        objects = self.source.candidates(self.source.open(), min_age_s=self.min_age_s)
        summary.listed = len(objects)
        todo = []
        for o in objects:
            sha = self._seen.get((o.path, o.size, o.mtime_ns))
            if sha is not None and sha in self._done:
                summary.known += 1
            else:
                todo.append(o)
        if todo:
            spec = self._spec(mode=self.mode or info.mode)
            self._run_groups(spec, todo, summary, t0)
        summary.seconds = time.perf_counter() - t0
        return summary

    def _groups(self, objects: list[ObjectInfo]) -> list[list[ObjectInfo]]:
        """Groups balanced by bytes: at least one per core, each of a sensible size."""
        cores = max(int(self.spark.sparkContext.defaultParallelism), 1)
        total = sum(o.size for o in objects)
        target = min(max(total / (cores * 2), MIN_GROUP_BYTES), MAX_GROUP_BYTES)
        n = max(min(len(objects), cores), math.ceil(total / target),
                math.ceil(len(objects) / MAX_GROUP_FILES))
        n = min(n, len(objects))
        groups: list[list[ObjectInfo]] = [[] for _ in range(n)]
        heap = [(0, 0, i) for i in range(n)]       # (bytes, files, group): least loaded first
        for o in sorted(objects, key=lambda o: (-o.size, o.path)):
            load, count, i = heapq.heappop(heap)
            groups[i].append(o)
            heapq.heappush(heap, (load + o.size, count + 1, i))
        return [sorted(g, key=lambda o: o.path) for g in groups if g]

    def _run_job(self, spec: TaskSpec, group: list[ObjectInfo]) -> list[FileResult]:
        sc = self.spark.sparkContext
        sc.setJobDescription(f"shoal filedrop {self.table}: {len(group)} file(s)")
        return sc.parallelize([group], 1).map(partial(process_files, spec)).collect()[0]

    def _run_groups(self, spec: TaskSpec, todo: list[ObjectInfo], summary: ScanSummary,
                    t0: float) -> None:
        groups = self._groups(todo)
        cores = max(int(self.spark.sparkContext.defaultParallelism), 1)
        first_error: ShoalError | None = None
        done_files = 0
        in_scan: set[str] = set()
        with ThreadPoolExecutor(max_workers=min(cores + 1, len(groups)),
                                thread_name_prefix="shoal-filedrop") as pool:
            futures: dict[Future, list[ObjectInfo]] = {
                pool.submit(self._run_job, spec, g): g for g in groups}
            for fut in as_completed(futures):
                group = futures[fut]
                try:
                    results = fut.result()
                    self._settle(results, summary, in_scan)
                except CommitStateUnknownError:
                    raise
                except ShoalError as e:
                    first_error = first_error or e
                except Exception as e:  # noqa: BLE001 - a Spark task failure, mapped once
                    first_error = first_error or FileDropTaskError(
                        [self.source.display(o.path) for o in group], e)
                done_files += len(group)
                if self.on_progress is not None:
                    self.on_progress(ScanProgress(done_files, len(todo), summary.rows,
                                                  summary.bytes, time.perf_counter() - t0))
        if first_error is not None:
            raise first_error

    # ---- commits ------------------------------------------------------------------------------
    def _settle(self, results: list[FileResult], summary: ScanSummary,
                in_scan: set[str]) -> None:
        fresh: list[FileResult] = []
        copies: list[FileResult] = []
        for r in results:
            summary.bytes += r.size
            if r.status == "changed":
                summary.changed += 1
                continue
            if r.mtime_ns < self._listed_at_ns - STABLE_AGE_NS:
                self._seen[(r.path, r.size, r.mtime_ns)] = r.sha256
            if r.status == "known":
                self._done.add(r.sha256)
                if r.sha256 in in_scan:   # a copy whose twin this scan committed first
                    summary.duplicates += 1
                else:
                    summary.known += 1
            elif r.sha256 in self._done or r.sha256 in in_scan:
                copies.append(r)
                summary.duplicates += 1
            else:
                in_scan.add(r.sha256)
                fresh.append(r)
        if fresh or copies:
            self._commit(fresh, copies, summary)

    def _commit(self, files: list[FileResult], copies: list[FileResult],
                summary: ScanSummary) -> None:
        """Rejects first (their keys make a re-run after a crash a no-op), then the files."""
        outcome = append_files(
            self.coordinator, self.table, [self._staged(r) for r in files],
            known=[self._staged(r) for r in copies],
            rejects=[rec for r in files for rec in r.rejects], summary={"source": "filedrop"})
        summary.rejected += outcome.rejected
        for i in outcome.replayed:  # landed by another pipeline meanwhile (ours dropped)
            self._done.add(files[i].sha256)
            summary.duplicates += 1
        for i in outcome.landed:
            r = files[i]
            self._done.add(r.sha256)
            summary.ingested += 1
            summary.rows += r.rows
            summary.text_bytes += r.text_bytes
            summary.new_columns.extend(c for c in r.new_columns
                                       if c not in summary.new_columns)
        if outcome.snapshot_id is not None:
            summary.snapshot_id = max(summary.snapshot_id or 0, outcome.snapshot_id)

    def _staged(self, r: FileResult) -> StagedFile:
        return StagedFile(r.key, r.ack(self.table), r.extents, r.rows)

    # ---- poll loop ----------------------------------------------------------------------------
    def run(self, *, once: bool = False, interval_s: float = 10.0,
            on_summary: Callable[[ScanSummary], None] | None = None,
            on_error: Callable[[ShoalError], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> ScanSummary:
        """Scan once, or every `interval_s` until `should_stop()` (or Ctrl-C); the totals.

        When polling with `on_error`, a scan that fails with a `ShoalError` is reported there
        and the loop goes on (whatever that scan committed stays; the rest is retried).
        """
        total = ScanSummary()
        while True:
            try:
                s = self.scan()
            except ShoalError as e:
                if once or on_error is None:
                    raise
                on_error(e)
            else:
                _accumulate(total, s)
                if on_summary is not None:
                    on_summary(s)
            if once or (should_stop is not None and should_stop()):
                return total
            deadline = time.monotonic() + interval_s
            while time.monotonic() < deadline:
                if should_stop is not None and should_stop():
                    return total
                time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _accumulate(total: ScanSummary, s: ScanSummary) -> None:
    for name in ("ingested", "known", "duplicates", "changed", "rows", "rejected", "bytes",
                 "text_bytes", "seconds"):
        setattr(total, name, getattr(total, name) + getattr(s, name))
    total.listed = s.listed
    total.new_columns.extend(c for c in s.new_columns if c not in total.new_columns)
    if s.snapshot_id is not None:
        total.snapshot_id = s.snapshot_id
