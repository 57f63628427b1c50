"""The embedded engine's fast read of v3 extents (docs/architecture.md, "The embedded
engine's read path").

`read_tasks` (`shoal.query.scan_read`) reads a scan block by block in Python: per block it
opens the row group, decodes it, upgrades and shapes it. For v3 extents in a store that maps
its objects into memory (the local store), `FastScan` reads them instead as one Arrow
dataset per extent layout: each extent's Parquet body is a zero-copy slice of its mapping,
one fragment per extent holding only the blocks stages 1-2 kept, decoded by Arrow's own
threads across extents while the engine consumes (no Python per block). Strings the writer
dictionary-coded stay dictionaries all the way into the engine (no cast back to plain text);
timestamps are cast once per batch. The batches are exactly `read_tasks`'s values: the same
`upgrade_batch` and `to_spark_batch` run on every column that is not a kept dictionary, and a
kept dictionary is only ever a column whose type the schema version did not change.

What the fast read cannot do stays on `read_tasks`: extents of format v1 and v2, extents
written before a column they hold was renamed or dropped (`ScanTask.stored`), a store that
does not map objects (S3), and scans of dynamic paths (`attrs.$http.method`). A scan with
both kinds reads them in task order (`runs`), in one stream of one schema (then with no
kept dictionaries).

Late materialization: with a `prefilter` (the scan's pushed predicate) that holds a
`StringHas`, an `Equals` (string or integer) or a `TimeRange` on a column the scan reads,
each surviving block is read filter columns first; the rows whose values rule the predicate
out are dropped (a token of the word found in the text in no case, another value, a time
outside the range's inclusive bounds), and only a block with rows left fetches its other
columns. Dropping such rows is what stage 2 does to whole blocks, so
the answer is the same: the engine still applies the whole predicate to what is left, and
has far fewer rows to do it on. These blocks are read by a small pool, a few ahead.

Bytes are counted as the column chunks of the blocks read (their compressed size in the
Parquet footer): what a range read of those columns fetches.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from shoal.errors import ExtentFormatError
from shoal.format.base import And, BlockPredicate, Equals, Or, StringHas, TimeRange
from shoal.format.parquet_body import dictionary_columns
from shoal.format.shred import parse_hidden
from shoal.format.tlm import parquet_body_span
from shoal.format.tokens import tokenize
from shoal.lru import MISSING, Lru
from shoal.query.scan_plan import ScanSpec, ScanTask
from shoal.query.scan_shape import stored_columns, to_spark_batch
from shoal.storage.base import ObjectStore
from shoal.types.columns import type_of_field
from shoal.types.upgrade import upgrade_batch

DEFAULT_BODY_CACHE = 4096


@dataclass(frozen=True)
class Body:
    """One v3 extent's Parquet body as the fast read needs it: its footer, its stored Arrow
    schema and which of its string columns are dictionary-coded in every block."""

    metadata: pq.FileMetaData
    schema: pa.Schema
    coded: frozenset[str]
    start: int
    end: int

    def column_bytes(self, blocks: Sequence[int], names: Sequence[str]) -> int:
        """The stored bytes of `names`' column chunks in `blocks`."""
        leaves: dict[str, list[int]] = {}
        fields = set(self.schema.names)
        for j in range(self.metadata.num_columns):
            # a leaf's path is its field's name (which may hold dots: shredded paths), or
            # that name and the nested type's parts
            path = self.metadata.schema.column(j).path
            owner = path if path in fields else max(
                (f for f in fields if path.startswith(f + ".")), key=len, default=path)
            leaves.setdefault(owner, []).append(j)
        wanted = [j for n in names for j in leaves.get(n, ())]
        return sum(self.metadata.row_group(b).column(j).total_compressed_size
                   for b in blocks for j in wanted)


class BodyCache:
    """Parsed v3 footers by object path (extents never change), least recently used out
    first; an extent that cannot be read fast is remembered as such (None)."""

    def __init__(self, capacity: int = DEFAULT_BODY_CACHE) -> None:
        self._items = Lru(capacity)

    def get(self, path: str) -> Body | None | object:
        return self._items.get(path)

    def put(self, path: str, body: Body | None) -> None:
        self._items.put(path, body, 1)


def _mapped(store: ObjectStore, path: str) -> pa.Buffer | None:
    """The whole object as a zero-copy buffer over its memory mapping, or None when the
    store does not map objects (asking a remote store would cost a request)."""
    if not str(getattr(store, "url", "")).startswith("file:"):
        return None
    source = store.open_input(path)
    if not isinstance(source, pa.MemoryMappedFile):
        source.close()
        return None
    return source.read_buffer()     # the buffer keeps the mapping alive


def _open_body(data: pa.Buffer, path: str) -> Body | None:
    span = parquet_body_span(data, path)
    if span is None:
        return None
    body = data[span[0]:span[1]]
    parquet = pq.ParquetFile(pa.BufferReader(body))
    metadata = parquet.metadata
    schema = parquet.schema_arrow
    return Body(metadata, schema, frozenset(dictionary_columns(schema, metadata)), *span)


@dataclass
class _Extent:
    task: ScanTask
    body: Body
    store: ObjectStore
    data: pa.Buffer | None = None     # mapped when first read (a cached footer needs none)

    def source(self) -> pa.BufferReader:
        if self.data is None:
            self.data = _mapped(self.store, self.task.path)
            if self.data is None:
                raise ExtentFormatError(self.task.path, "the store no longer maps it")
        return pa.BufferReader(self.data[self.body.start:self.body.end])

    def blocks(self) -> list[int]:
        return (list(range(self.body.metadata.num_row_groups)) if self.task.blocks is None
                else list(self.task.blocks))


class FastScan:
    """One planned scan, split into the extents read fast and the tasks left to
    `read_tasks` (`slow`), with the Arrow schema of the stream both give: the spec's
    (`spec_arrow_schema`), but with the columns in `kept` as dictionaries. `native`: the
    batches `read_native` gives instead (shoal's own types, no dictionaries)."""

    def __init__(self, spec: ScanSpec, store: ObjectStore, cache: BodyCache,
                 prefilter: BlockPredicate | None = None, *, native: bool = False) -> None:
        self.spec = spec
        self.native = native
        self.schema = spec.read_schema()
        self.real = stored_columns(spec.columns)
        self.prefilter = prefilter
        self.fast: list[_Extent] = []
        self.slow: list[ScanTask] = []
        paths = any(parse_hidden(c) is not None for c in spec.columns)
        for task in spec.tasks():
            extent = None if paths else self._extent(store, cache, task)
            if extent is None:
                self.slow.append(task)
            else:
                self.fast.append(extent)
        self.kept = self._kept() if not (self.slow or native) else frozenset()

    @staticmethod
    def _extent(store: ObjectStore, cache: BodyCache, task: ScanTask) -> _Extent | None:
        # An extent written before a column was renamed or dropped stores other names than
        # the ones read: the block reader maps them (`ScanTask.stored`).
        if task.format != "tlm" or task.stored:
            return None
        body = cache.get(task.path)
        data = None
        if body is MISSING:
            data = _mapped(store, task.path)
            body = None if data is None else _open_body(data, task.path)
            cache.put(task.path, body)
        return None if body is None else _Extent(task, body, store, data)  # type: ignore[arg-type]

    def _kept(self) -> frozenset[str]:
        """The spec's string columns stored dictionary-coded, of the read type, by every
        fast extent: they go to the engine as dictionaries."""
        kept = set()
        for name in self.real:
            if self.schema.column(name).type.kind != "string":
                continue
            if all(name in e.body.coded
                   and type_of_field(e.body.schema.field(name)) == self.schema.column(name).type
                   for e in self.fast):
                kept.add(name)
        return frozenset(kept)

    def arrow_schema(self, base: pa.Schema) -> pa.Schema:
        """`base` (the spec's stream schema) with the kept columns as dictionaries."""
        return pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type))
                          if f.name in self.kept else f for f in base])

    # ---- reading --------------------------------------------------------------------------
    def runs(self) -> Iterator[tuple[list[_Extent], list[ScanTask]]]:
        """The scan in task order, as runs: consecutive fast extents of one layout (stored
        schema), read with `read`, or consecutive tasks left to `read_tasks` (one of the two
        lists is empty)."""
        by_task = {id(e.task): e for e in self.fast}
        run: list[_Extent] = []
        slow: list[ScanTask] = []
        key: tuple[str, frozenset[str]] | None = None
        for task in self.spec.tasks():
            if id(task) not in by_task:
                if run:
                    yield run, []
                    run, key = [], None
                slow.append(task)
                continue
            if slow:
                yield [], slow
                slow = []
            e = by_task[id(task)]
            if e.task.blocks is not None and not e.task.blocks:
                continue
            layout = (e.body.schema.to_string(show_field_metadata=True), e.body.coded)
            if run and layout != key:
                yield run, []
                run = []
            run.append(e)
            key = layout
        if run:
            yield run, []
        if slow:
            yield [], slow

    def read(self, run: list[_Extent], on_bytes: Callable[[int], None], threads: int
             ) -> Iterator[pa.RecordBatch]:
        """The batches of a run of fast extents in the engines' shape (`to_spark_batch`,
        timestamps still zoned), or `read_native`'s; filtered row by row when the
        prefilter tests a column the scan reads (`_filtered`)."""
        if not run:
            return iter(())
        if self._checks():
            return self._filtered(run, on_bytes, threads)
        return self._group(run, on_bytes)

    def _group(self, group: list[_Extent], on_bytes: Callable[[int], None]
               ) -> Iterator[pa.RecordBatch]:
        stored = group[0].body.schema
        coded = group[0].body.coded
        wanted = [c for c in self.real if c in stored.names]
        fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(
            dictionary_columns=sorted(coded)))
        fragments = [fmt.make_fragment(e.source(), row_groups=e.blocks()) for e in group]
        schema = pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type))
                            if f.name in coded else f for f in stored], metadata=stored.metadata)
        dataset = ds.FileSystemDataset(fragments, schema, fmt)
        total_bytes = sum(e.body.column_bytes(e.blocks(), wanted or stored.names[:1])
                          for e in group)
        total_rows = max(1, sum(e.task.rows for e in group))
        rows = counted = 0
        scanner = dataset.scanner(columns=wanted or stored.names[:1], use_threads=True,
                                  batch_size=1 << 17)
        for batch in scanner.to_batches():
            if batch.num_rows == 0:
                continue
            rows += batch.num_rows
            due = total_bytes if rows >= total_rows else total_bytes * rows // total_rows
            on_bytes(due - counted)
            counted = due
            yield self._shape(batch, wanted)
        if counted < total_bytes:
            on_bytes(total_bytes - counted)

    def _shape(self, batch: pa.RecordBatch, wanted: list[str]) -> pa.RecordBatch:
        """`batch` (stored columns `wanted` of one layout) as `read_tasks` gives it, kept
        dictionaries as they are."""
        rest = [c for c in wanted if c not in self.kept]
        plain = pa.RecordBatch.from_arrays(
            [_plain(batch.column(c)) for c in rest],
            schema=pa.schema([batch.schema.field(c).with_type(
                _plain_type(batch.schema.field(c).type)) for c in rest]))
        missing = [c for c in self.real if c not in self.kept]
        upgraded = upgrade_batch(plain if rest else _rows(batch.num_rows), self.schema,
                                 missing)
        if self.native:
            return upgraded
        arrays = [batch.column(c) if c in self.kept else upgraded.column(c) for c in self.real]
        return to_spark_batch(pa.RecordBatch.from_arrays(arrays, names=self.real), self.schema,
                              self.spec.columns)

    # ---- late materialization -------------------------------------------------------------
    def _checks(self) -> list[str]:
        """The spec's string columns the prefilter tests row by row."""
        if self.prefilter is None:
            return []
        return [c for c in sorted(_checked_columns(self.prefilter) & set(self.real))
                if self.schema.column(c).type.kind in _CHECKED_KINDS]

    def _filtered(self, run: list[_Extent], on_bytes: Callable[[int], None], threads: int
                  ) -> Iterator[pa.RecordBatch]:
        """`run`'s blocks, each read filter columns first: the rows no value of which can
        satisfy the prefilter are dropped, and a block with none left fetches nothing
        more. Blocks are read `2 * threads` ahead, in order."""
        blocks = [(e, b) for e in run for b in e.blocks()]
        # fewer blocks than threads (a needle): each block's columns decode in parallel
        inside = len(blocks) < threads
        work = iter(blocks)
        pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="shoal-late")
        ahead: deque[Future[pa.RecordBatch | None]] = deque()
        try:
            for e, b in itertools.islice(work, 2 * max(1, threads)):
                ahead.append(pool.submit(self._filtered_block, e, b, on_bytes, inside))
            while ahead:
                batch = ahead.popleft().result()
                nxt = next(work, None)
                if nxt is not None:
                    ahead.append(pool.submit(self._filtered_block, *nxt, on_bytes, inside))
                if batch is not None:
                    yield batch
        finally:
            for f in ahead:
                f.cancel()
            pool.shutdown(wait=True)

    def _filtered_block(self, extent: _Extent, block: int, on_bytes: Callable[[int], None],
                        use_threads: bool = False) -> pa.RecordBatch | None:
        stored = extent.body.schema
        wanted = [c for c in self.real if c in stored.names]
        checks = [c for c in self._checks() if c in wanted
                  and type_of_field(stored.field(c)) == self.schema.column(c).type]
        parquet = pq.ParquetFile(extent.source(), metadata=extent.body.metadata,
                                 read_dictionary=sorted(extent.body.coded & set(wanted)))
        first = parquet.read_row_group(block, columns=checks, use_threads=use_threads)
        on_bytes(extent.body.column_bytes([block], checks))
        assert self.prefilter is not None
        mask = _mask(self.prefilter, {c: _one(first.column(c)) for c in checks})
        if mask is not None and not pc.any(mask).as_py():
            return None
        others = [c for c in wanted if c not in checks] or ([] if checks else stored.names[:1])
        rest = parquet.read_row_group(block, columns=others, use_threads=use_threads)
        on_bytes(extent.body.column_bytes([block], others))
        columns = {c: _one(first.column(c)) for c in checks}
        columns.update({c: _one(rest.column(c)) for c in others})
        names = wanted or others
        batch = pa.RecordBatch.from_arrays(
            [columns[c] for c in names],
            schema=pa.schema([first.schema.field(c) if c in checks else rest.schema.field(c)
                              for c in names]))
        if mask is not None:
            batch = batch.filter(mask)
        return self._shape(batch, wanted) if batch.num_rows else None


def _one(col: pa.ChunkedArray) -> pa.Array:
    """One row group's column as one array (a dictionary column keeps its dictionary)."""
    if col.num_chunks == 1:
        return col.chunk(0)
    if pa.types.is_dictionary(col.type):
        return col.unify_dictionaries().combine_chunks()
    return col.combine_chunks()


_CHECKED_KINDS = ("string", "timestamp", "int", "long")


def _checked_columns(p: BlockPredicate) -> set[str]:
    if isinstance(p, StringHas | Equals | TimeRange):
        return {p.column}
    if isinstance(p, And | Or):
        return set().union(*(_checked_columns(c) for c in p.children))
    return set()


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t.value_type if pa.types.is_dictionary(t) else t)


def _on_values(arr: pa.Array, test: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """`test` of each value of a string column (a dictionary's values tested once each),
    null rows False."""
    if pa.types.is_dictionary(arr.type):
        out = pc.take(test(arr.dictionary), arr.indices)
    else:
        out = test(arr)
    return pc.fill_null(out, False)


def _mask(p: BlockPredicate, columns: dict[str, pa.Array]) -> pa.Array | None:
    """Per row, whether it may satisfy `p` (None: every row may). False only where the
    row's values rule `p` out; the engine still applies the whole predicate."""
    if isinstance(p, StringHas):
        arr = columns.get(p.column)
        words = tokenize(p.token)
        if arr is None or not words or not _is_text(arr.type):
            return None

        def holds(values: pa.Array) -> pa.Array:
            # a row holding the word as a token holds each of its tokens (ASCII letters and
            # digits) as a substring in some case; RE2's case folding is a superset of
            # ASCII's, so this only ever keeps more rows (and is ~4x faster than lowering
            # the text and searching it)
            out = None
            for w in sorted(words):
                hit = pc.match_substring_regex(values, f"(?i){w}")
                out = hit if out is None else pc.and_(out, hit)
            return out
        return _on_values(arr, holds)
    if isinstance(p, Equals):
        arr = columns.get(p.column)
        if arr is None:
            return None
        value = p.value
        if isinstance(value, str) and _is_text(arr.type):
            return _on_values(arr, lambda values: pc.equal(values, value))
        if (isinstance(value, int) and not isinstance(value, bool)
                and pa.types.is_integer(arr.type)):
            return pc.fill_null(pc.equal(arr, pa.scalar(value, pa.int64())), False)
        return None
    if isinstance(p, TimeRange):
        # the bounds stage 2 compares with a block's min and max, applied to each row's
        # stored value (ns for a timestamp), inclusive
        arr = columns.get(p.column)
        if arr is None or not (pa.types.is_timestamp(arr.type)
                               or pa.types.is_integer(arr.type)):
            return None
        values = arr.cast(pa.int64()) if pa.types.is_timestamp(arr.type) else arr
        out = None
        if p.lo_ns is not None:
            out = pc.greater_equal(values, pa.scalar(p.lo_ns, pa.int64()))
        if p.hi_ns is not None:
            upper = pc.less_equal(values, pa.scalar(p.hi_ns, pa.int64()))
            out = upper if out is None else pc.and_(out, upper)
        return None if out is None else pc.fill_null(out, False)
    if isinstance(p, And):
        masks = [m for m in (_mask(c, columns) for c in p.children) if m is not None]
        if not masks:
            return None
        out = masks[0]
        for m in masks[1:]:
            out = pc.and_(out, m)
        return out
    if isinstance(p, Or):
        ors = [_mask(c, columns) for c in p.children]
        if not ors or any(m is None for m in ors):
            return None
        out = ors[0]
        for m in ors[1:]:
            out = pc.or_(out, m)
        return out
    return None


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _plain(arr: pa.Array) -> pa.Array:
    return arr.cast(arr.type.value_type) if pa.types.is_dictionary(arr.type) else arr


def _rows(n: int) -> pa.RecordBatch:
    """A batch of `n` rows and no columns."""
    return pa.RecordBatch.from_arrays([pa.nulls(n)], names=["_"]).select([])

