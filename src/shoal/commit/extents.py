"""Extents on their way into a table: written to the store, discarded if they never commit.

This is the catalog-free half of the commit layer, so it runs anywhere, Spark executors
included: `ExtentStager` writes rows of one schema version as extents under a table's
prefix and returns their `ManifestEntry`s; only a commit (`CommitCoordinator`) makes them
part of the table. Until then an extent is unreferenced.

`discard_extents` is the one place that deletes extents which certainly did not commit (a
failed commit, a rebase that gave up, a replayed ledger key, a parse that failed after some
extents were written). A delete that fails is logged and left for orphan GC; it never
raises, so it never hides the error that made the caller discard. `discard_on_failure`
applies the failure rule around a commit: on an error the extents are discarded, except
when the outcome is unknown (`CommitStateUnknownError`, or an interrupt that is not an
`Exception`), when they are left for orphan GC because the commit may have landed.

`StagedExtents` (from `ExtentStager.staged()`) is the scope of one unit of work whose
extents are committed elsewhere (a dropped file parsed in a Spark task): whatever it wrote
and did not `hand_over()` to a commit is discarded when the scope ends. Both functions and
the scope are for the commit layer's own recipes; callers elsewhere use those recipes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import pyarrow as pa

from shoal.catalog.base import ManifestEntry
from shoal.errors import CommitStateUnknownError
from shoal.format.base import ExtentWriter, SegmentFormat
from shoal.storage.base import ObjectStore
from shoal.types.schema import Schema
from shoal.types.sortkey import sort_order

DEFAULT_BLOCK_ROWS = 65536

StageHook = Callable[..., None]
"""Called as `hook(stage, **info)` at each stage of a write or commit (crash tests, metrics)."""

log = logging.getLogger(__name__)


def extent_prefix(table_name: str, table_id: int) -> str:
    """Where the extents of a table live in its object store (one prefix per table id, so a
    re-created table never shares objects with its predecessor)."""
    return f"tables/{table_name}.{table_id}/extents"


def discard_extents(store: ObjectStore, entries: Iterable[ManifestEntry]) -> None:
    """Delete the objects of `entries`, which certainly did not (and will not) commit.

    Never raises: an object that cannot be deleted is logged and left for orphan GC.
    """
    for e in entries:
        try:
            store.delete(e.object_path)
        except Exception:  # noqa: BLE001 - a failed delete must not hide the caller's error
            log.warning("could not delete uncommitted extent %s; left for orphan GC",
                        e.object_path, exc_info=True)


@contextmanager
def discard_on_failure(store: ObjectStore, entries: Sequence[ManifestEntry]) -> Iterator[None]:
    """Discard `entries` if the block raises an `Exception` other than
    `CommitStateUnknownError`; the error always propagates unchanged."""
    try:
        yield
    except CommitStateUnknownError:
        raise  # the commit may have landed: the extents stay for orphan GC
    except Exception:
        discard_extents(store, entries)
        raise


class OpenExtent:
    """One extent being written: `append` batches, then `finish` (or `abort`)."""

    def __init__(self, writer: ExtentWriter, schema: Schema, format_name: str,
                 on_written: Callable[[ManifestEntry], None]) -> None:
        self._writer = writer
        self.schema = schema
        self._format_name = format_name
        self._on_written = on_written

    def append(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._writer.append(batch)

    def finish(self) -> ManifestEntry:
        """Close the extent; on failure its partial object is removed and the error raised."""
        try:
            result = self._writer.finish()
        except BaseException:
            self._writer.abort()
            raise
        entry = ManifestEntry.from_write(result, schema_version=self.schema.version,
                                         format=self._format_name)
        self._on_written(entry)
        return entry

    def abort(self) -> None:
        self._writer.abort()


class ExtentStager:
    """Writes extents of one `SegmentFormat` to one `ObjectStore`; needs no catalog."""

    def __init__(self, store: ObjectStore, fmt: SegmentFormat, *,
                 on_stage: StageHook | None = None) -> None:
        self.store = store
        self.format = fmt
        self._on_stage = on_stage

    def open(self, prefix: str, schema: Schema, *, block_rows: int = DEFAULT_BLOCK_ROWS,
             on_written: Callable[[ManifestEntry], None] | None = None) -> OpenExtent:
        """Start an extent under `prefix` for rows already shaped to `schema`."""
        writer = self.format.start_extent(self.store, prefix, schema.arrow(),
                                          block_rows=block_rows)

        def written(entry: ManifestEntry) -> None:
            self._written(entry)
            if on_written is not None:
                on_written(entry)

        return OpenExtent(writer, schema, self.format.name, written)

    def staged(self) -> StagedExtents:
        """A scope for the extents of one unit of work (see `StagedExtents`)."""
        return StagedExtents(self)

    def write(self, prefix: str, schema: Schema,
              batches: Iterable[pa.RecordBatch | pa.Table], *,
              block_rows: int = DEFAULT_BLOCK_ROWS,
              sort_by: Sequence[str] = ()) -> ManifestEntry:
        """Write `batches` (shaped to `schema`) as one extent; nothing is left on failure.

        With a sort key (`shoal.types.sortkey`) all the rows are gathered and sorted before
        blocks are cut from them, so the extent's blocks are ranges of the key. Rows are
        taken into sorted order one block at a time, so the writer works on a block while
        the next one is taken."""
        if sort_by:
            rows = _gathered(batches, schema.arrow())
            order = sort_order(rows, sort_by)
            if order is not None:
                batches = (rows.take(order.slice(i, block_rows))
                           for i in range(0, len(order), block_rows))
            else:
                batches = [rows]
        extent = self.open(prefix, schema, block_rows=block_rows)
        try:
            for b in batches:
                extent.append(b)
        except BaseException:
            extent.abort()
            raise
        return extent.finish()

    def _written(self, entry: ManifestEntry) -> None:
        if self._on_stage is not None:
            self._on_stage("extent_written", path=entry.object_path, extent_id=entry.extent_id)


def _gathered(batches: Iterable[pa.RecordBatch | pa.Table], schema: pa.Schema) -> pa.Table:
    """`batches` as one table of exactly `schema` (batches may list its columns in another
    order or carry other field metadata, as the writer allows)."""
    out = []
    for part in batches:
        for b in part.to_batches() if isinstance(part, pa.Table) else [part]:
            if b.num_rows == 0:
                continue
            if b.schema.names != schema.names:
                b = b.select(schema.names)
            out.append(pa.RecordBatch.from_arrays(b.columns, schema=schema))
    return pa.Table.from_batches(out, schema=schema)


class StagedExtents:
    """The extents one unit of work writes before a commit elsewhere takes them.

    Use it as a context manager and open extents through it. When the block ends, every
    extent written here that `hand_over()` did not pass on is discarded: a unit that fails,
    or finds it has nothing to commit, leaves nothing behind. No commit happens inside the
    block, so those extents certainly did not commit; they are discarded on any exit,
    interrupts included.
    """

    def __init__(self, stager: ExtentStager) -> None:
        self._stager = stager
        self._entries: list[ManifestEntry] = []

    def open(self, prefix: str, schema: Schema, *,
             block_rows: int = DEFAULT_BLOCK_ROWS) -> OpenExtent:
        return self._stager.open(prefix, schema, block_rows=block_rows,
                                 on_written=self._entries.append)

    def hand_over(self) -> list[ManifestEntry]:
        """The extents written so far, now the business of the commit they go on to."""
        entries, self._entries = self._entries, []
        return entries

    def __enter__(self) -> StagedExtents:
        return self

    def __exit__(self, *exc: object) -> None:
        entries, self._entries = self._entries, []
        discard_extents(self._stager.store, entries)
