"""The work of one file-drop Spark task: read, hash, check, coerce, write extents.

`process_files(spec, objects)` runs on an executor (or anywhere: it is plain Python) over a
group of objects of the watched prefix. For each object it:

1. reads the bytes once and hashes them (sha256) while reading. An object up to
   `spec.memory_limit` bytes is read whole; a larger one is streamed twice (a hashing pass,
   then a parsing pass) and its size and modification time are checked unchanged after the
   parse, so a file rewritten meanwhile is left for the next scan, never ingested under
   another content's key;
2. looks its ledger key `filedrop:{sha256}` up in the catalog: a known object is done
   (`status="known"`), nothing is parsed;
3. decompresses gzip (detected by magic bytes) as a stream and cuts the text at line
   boundaries into chunks of about `spec.chunk_bytes`;
4. coerces each chunk with `coerce_ndjson` in partial mode. In `evolve` mode unknown
   top-level keys found by that pass become nullable string columns first (identifier-safe
   names, at most `spec.evolution_cap` per file, the rest in `props`; docs/ingest.md) through the
   commit coordinator's schema evolution, and the chunk is coerced again against the fresh
   schema; rows go to extents written straight to the table's object store (a new extent
   when the schema version changes or an extent reaches `EXTENT_ROWS` / `EXTENT_BYTES`);
5. turns every rejected line into a `RejectRecord` (`filedrop-reject:{sha256}:{line}`, raw
   line, every error of that line, file, 1-based line of the decompressed file).

Nothing here commits data: the driver commits each file's extents with its ledger key
(and, before that, its rejects). A file that cannot be decompressed at all (a corrupt gzip
stream) yields no rows and one reject for the whole file (line 0); its key is committed too,
so the same bytes are not retried forever. A file's extents are written in the commit
layer's `StagedExtents` scope: those of a file that fails, turns out corrupt or changed
while read are deleted there, before the error propagates or the result is returned.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa

from shoal.catalog.base import Catalog, ManifestEntry, TableInfo
from shoal.commit import RejectRecord, extent_prefix
from shoal.errors import LineError
from shoal.frontends.filedrop.source import DropSource
from shoal.ingest.chunks import iter_chunks
from shoal.storage import ObjectInfo, ObjectStore
from shoal.types.conventions import IngestConventions
from shoal.types.schema import SchemaMode

if TYPE_CHECKING:
    from shoal.commit import CommitCoordinator, OpenExtent, StagedExtents
    from shoal.ingest.coerce import Coerced

LEDGER_PREFIX = "filedrop:"
REJECT_PREFIX = "filedrop-reject:"
EXTENT_ROWS = 1_000_000          # a file's output rolls to a new extent at this many rows
EXTENT_BYTES = 128 << 20         # ... or this much Arrow data (the writer holds it until done)
READ_BLOCK = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"

FileStatus = Literal["new", "known", "changed"]


def ledger_key(sha256: str) -> str:
    return f"{LEDGER_PREFIX}{sha256}"


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs, shipped to the executor (all plain values)."""

    table: str
    mode: SchemaMode
    source: DropSource
    catalog_url: str
    storage_url: str
    s3_endpoint: str | None = None      # for the table's object store
    format: str = "tlm"
    chunk_bytes: int = 32 << 20
    memory_limit: int = 256 << 20
    evolution_cap: int = 32
    block_rows: int = 65536


@dataclass(frozen=True)
class FileResult:
    path: str                   # key under the watched prefix
    display: str                # full path / URL (reject rows, messages)
    size: int                   # bytes of the object as stored
    mtime_ns: int
    sha256: str
    status: FileStatus
    rows: int = 0
    lines: int = 0              # lines of the decompressed text
    text_bytes: int = 0         # bytes of the decompressed text
    extents: list[ManifestEntry] = field(default_factory=list)
    rejects: list[RejectRecord] = field(default_factory=list)
    new_columns: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return ledger_key(self.sha256)

    def ack(self, table: str) -> dict[str, object]:
        """What the ledger row keeps for this file."""
        return {"table": table, "rows": self.rows, "file": self.display,
                "sha256": self.sha256, "rejected_lines": len(self.rejects),
                "new_columns": self.new_columns,
                "extent_ids": [e.extent_id for e in self.extents]}


def process_files(spec: TaskSpec, objects: Sequence[ObjectInfo]) -> list[FileResult]:
    """Process a group of objects (one Spark task); see the module docstring."""
    from shoal.catalog import executor_catalog
    from shoal.commit import CommitCoordinator
    from shoal.format import default_formats
    from shoal.storage import open_store

    catalog = executor_catalog(spec.catalog_url)    # shared by the tasks of this process
    store = open_store(spec.storage_url, s3_endpoint=spec.s3_endpoint)
    coordinator = CommitCoordinator(catalog, store, default_formats()[spec.format])
    source = spec.source.open()
    return [_FileJob(spec, catalog, coordinator, source, obj).run() for obj in objects]


# -- reading --------------------------------------------------------------------------------

def _text_stream(raw: IO[bytes], head: bytes) -> IO[bytes]:
    if head.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


class _FileJob:
    def __init__(self, spec: TaskSpec, catalog: Catalog, coordinator: CommitCoordinator,
                 source: ObjectStore, obj: ObjectInfo) -> None:
        self.spec = spec
        self.catalog = catalog
        self.coordinator = coordinator
        self.source = source
        self.obj = obj
        self.display = spec.source.display(obj.path)

    def run(self) -> FileResult:
        t0 = time.perf_counter()
        obj = self.obj
        if obj.size <= self.spec.memory_limit:
            data = self.source.get(obj.path)
            sha = hashlib.sha256(data).hexdigest()
            size = len(data)
            if self.catalog.ledger_get(ledger_key(sha)) is not None:
                return self._result(sha, "known", size, t0)
            raw: IO[bytes] = io.BytesIO(data)
        else:
            digest = hashlib.sha256()
            size = 0
            with self.source.open_input(obj.path) as f:
                while block := f.read(READ_BLOCK):
                    digest.update(block)
                    size += len(block)
            sha = digest.hexdigest()
            if self.catalog.ledger_get(ledger_key(sha)) is not None:
                return self._result(sha, "known", size, t0)
            raw = self.source.open_input(obj.path)
        head = raw.read(2)
        raw.seek(0)
        try:
            # Extents the file wrote and that are not handed over are deleted on the way out.
            with self.coordinator.extents.staged() as staged:
                try:
                    result = self._parse(_text_stream(raw, head), staged, sha, size, t0)
                finally:
                    raw.close()
                if self._changed():
                    return self._result(sha, "changed", size, t0)
                return replace(result, extents=staged.hand_over())
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            if not head.startswith(GZIP_MAGIC):
                raise
            if self._changed():
                return self._result(sha, "changed", size, t0)
            reject = RejectRecord(key=f"{REJECT_PREFIX}{sha}:0", raw=b"", source="filedrop",
                                  error=f"file {self.display}: not a valid gzip stream: {e}",
                                  file=self.display, line=0)
            return self._result(sha, "new", size, t0, rejects=[reject])

    def _changed(self) -> bool:
        """A large (streamed) object no longer has the size and time it was listed with."""
        if self.obj.size <= self.spec.memory_limit:
            return False
        now = [o for o in self.source.list(self.obj.path) if o.path == self.obj.path]
        return not (bool(now) and (now[0].size, now[0].mtime_ns) == (self.obj.size,
                                                                     self.obj.mtime_ns))

    def _result(self, sha: str, status: FileStatus, size: int, t0: float,
                **kw: object) -> FileResult:
        return FileResult(path=self.obj.path, display=self.display, size=size,
                          mtime_ns=self.obj.mtime_ns, sha256=sha, status=status,
                          seconds=time.perf_counter() - t0, **kw)  # type: ignore[arg-type]

    # -- parsing ------------------------------------------------------------------------------
    def _parse(self, text: IO[bytes], staged: StagedExtents, sha: str, size: int,
               t0: float) -> FileResult:
        """The file's rows as extents of `staged` (handed over by the caller) and rejects."""
        out = _ExtentSink(staged, self.spec)
        rejects: list[RejectRecord] = []
        new_columns: list[str] = []
        rows = lines = text_bytes = 0
        info = self.catalog.load_table(self.spec.table)
        try:
            for chunk, before in iter_chunks(text, self.spec.chunk_bytes):
                info, coerced, added = self._coerce(info, chunk, len(new_columns))
                new_columns.extend(added)
                out.append(info, coerced.batch)
                rows += coerced.rows
                lines = before + chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
                text_bytes += len(chunk)
                if coerced.rejected_lines:
                    rejects.extend(self._rejects(sha, chunk, before, coerced.rejected_lines,
                                                 coerced.errors))
        except BaseException:
            out.abort()
            raise
        out.finish()
        return self._result(sha, "new", size, t0, rows=rows, lines=lines,
                            text_bytes=text_bytes, rejects=rejects, new_columns=new_columns)

    def _coerce(self, info: TableInfo, chunk: bytes, added_so_far: int
                ) -> tuple[TableInfo, Coerced, list[str]]:
        from shoal.ingest.coerce import UNKNOWN_POLICY, coerce_ndjson
        from shoal.ingest.evolve import plan_evolution

        mode = self.spec.mode
        max_errors = chunk.count(b"\n") * max(len(info.schema.columns), 1) + 16
        conventions = IngestConventions.of(info.properties)
        coerced = coerce_ndjson(chunk, info.schema, unknown=UNKNOWN_POLICY[mode],
                                ingest_time_ns=time.time_ns(), max_errors=max_errors,
                                conventions=conventions)
        added: list[str] = []
        if mode == "evolve" and coerced.unknown_fields:
            unknown = coerced.unknown_fields
            cap = max(self.spec.evolution_cap - added_so_far, 0)
            plan = plan_evolution(unknown, info.schema, cap=cap)
            if plan.new_columns:
                info = self.coordinator.evolve_schema(self.spec.table, plan.new_columns,
                                                      base=info.schema)
                added = [c.name for c in plan.new_columns]
                coerced = coerce_ndjson(
                    chunk, info.schema, unknown="props", ingest_time_ns=time.time_ns(),
                    max_errors=max_errors,
                    unknown_fields=[u for u in unknown if u not in info.schema],
                    conventions=conventions)
        return info, coerced, added

    def _rejects(self, sha: str, chunk: bytes, before: int, lines: Sequence[int],
                 errors: Sequence[LineError]) -> list[RejectRecord]:
        ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
        by_line: dict[int, list[LineError]] = {}
        for e in errors:
            by_line.setdefault(e.line, []).append(e)
        out = []
        for line in lines:
            start = 0 if line == 1 else int(ends[line - 2]) + 1
            end = int(ends[line - 1]) if line - 1 < len(ends) else len(chunk)
            errs = [e.shifted(before) for e in by_line.get(line, [])]
            message = "; ".join(e.message for e in errs) or f"line {line + before}: rejected"
            out.append(RejectRecord(
                key=f"{REJECT_PREFIX}{sha}:{line + before}",
                raw=chunk[start:end].rstrip(b"\r"), error=message, source="filedrop",
                field=errs[0].field if errs else None, file=self.display, line=line + before))
        return out


class _ExtentSink:
    """A file's rows as extents: a new one per schema version, `EXTENT_ROWS`, `EXTENT_BYTES`."""

    def __init__(self, extents: StagedExtents, spec: TaskSpec) -> None:
        self.extents = extents
        self.spec = spec
        self.extent: OpenExtent | None = None
        self.rows = 0
        self.nbytes = 0

    def append(self, info: TableInfo, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if self.extent is not None and (
                self.extent.schema.version != info.schema.version or self.rows >= EXTENT_ROWS
                or self.nbytes >= EXTENT_BYTES):
            self.finish()
        if self.extent is None:
            self.extent = self.extents.open(extent_prefix(info.name, info.id), info.schema,
                                            block_rows=self.spec.block_rows)
            self.rows = self.nbytes = 0
        self.extent.append(batch)
        self.rows += batch.num_rows
        self.nbytes += batch.nbytes

    def finish(self) -> None:
        if self.extent is None:
            return
        extent, self.extent = self.extent, None
        extent.finish()

    def abort(self) -> None:
        if self.extent is not None:
            self.extent.abort()
            self.extent = None
