"""The embedded engine's fast read of v3 extents (docs/architecture.md, "The read path").

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

What the fast read cannot do stays on `read_tasks`: extents of format v1 and v2, a store that
does not map objects (S3), and scans of dynamic paths (`attrs.$http.method`). A scan with
both kinds reads the fast extents first, then the others, in one stream of one schema.

Late materialization: with a `prefilter` (the scan's pushed predicate), the blocks that
survived stage 2 have their filter columns read first, and a block none of whose values can
satisfy a `StringHas` or a string `Equals` of the predicate is dropped before its other
columns are fetched. The test is conservative (a block may pass without a matching row; the
engine still applies the whole predicate) and stops paying for itself once most blocks
pass, so it gives up after the first round in which more than half the blocks matched.

Bytes are counted as the column chunks of the blocks read (their compressed size in the
Parquet footer): what a range read of those columns fetches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from shoal.format.base import And, BlockPredicate, Equals, Or, StringHas
from shoal.format.parquet_body import dictionary_columns
from shoal.format.shred import parse_hidden
from shoal.format.tlm import parquet_body_span
from shoal.format.tokens import tokenize
from shoal.lru import MISSING, Lru
from shoal.query.scan_plan import ScanSpec, ScanTask
from shoal.query.scan_read import stored_columns, to_spark_batch
from shoal.storage.base import ObjectStore
from shoal.types.columns import type_of_field
from shoal.types.upgrade import upgrade_batch

log = logging.getLogger("shoal.query.local")

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
        for j in range(self.metadata.num_columns):
            leaves.setdefault(self.metadata.schema.column(j).path.split(".")[0], []).append(j)
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
    store does not map objects."""
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
    data: pa.Buffer

    def source(self) -> pa.BufferReader:
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
        if task.format != "tlm":
            return None
        data = _mapped(store, task.path)
        if data is None:
            return None
        body = cache.get(task.path)
        if body is MISSING:
            body = _open_body(data, task.path)
            cache.put(task.path, body)
        return None if body is None else _Extent(task, body, data)  # type: ignore[arg-type]

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
    def runs(self, on_bytes: Callable[[int], None], threads: int
             ) -> Iterator[tuple[list[_Extent], list[ScanTask]]]:
        """The scan in task order, as runs: consecutive fast extents of one layout (stored
        schema), read with `read`, or consecutive tasks left to `read_tasks` (one of the two
        lists is empty)."""
        fast = self.fast
        if self.prefilter is not None:
            fast = self._late(fast, on_bytes, threads)
        narrowed = {id(e.task): e for e in self.fast}
        by_task = {id(e.task): f for e, f in zip(self.fast, fast, strict=True)}
        run: list[_Extent] = []
        slow: list[ScanTask] = []
        key: tuple[str, frozenset[str]] | None = None
        for task in self.spec.tasks():
            if id(task) not in narrowed:
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

    def read(self, run: list[_Extent], on_bytes: Callable[[int], None]
             ) -> Iterator[pa.RecordBatch]:
        """The batches of a run of fast extents in the engines' shape (`to_spark_batch`,
        timestamps still zoned), or `read_native`'s."""
        return self._group(run, on_bytes) if run else iter(())

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
    def _late(self, extents: list[_Extent], on_bytes: Callable[[int], None], threads: int
              ) -> list[_Extent]:
        """`extents` with the blocks whose filter columns rule out the prefilter dropped."""
        assert self.prefilter is not None
        columns = sorted(_checked_columns(self.prefilter) & set(self.real))
        columns = [c for c in columns if self.schema.column(c).type.kind == "string"]
        if not columns or set(self.real) <= set(columns):
            return extents
        work = [(i, b) for i, e in enumerate(extents) for b in e.blocks()]
        keep: dict[int, list[int]] = {i: [] for i in range(len(extents))}
        step = max(2, threads * 2)
        pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="shoal-late")
        try:
            done = 0
            while done < len(work):
                batch = work[done:done + step]
                results = list(pool.map(lambda ib: self._may_match(extents[ib[0]], ib[1],
                                                                   columns, on_bytes), batch))
                for (i, b), hit in zip(batch, results, strict=True):
                    if hit:
                        keep[i].append(b)
                done += len(batch)
                if sum(results) * 2 > len(results):    # most blocks match: stop testing
                    for i, b in work[done:]:
                        keep[i].append(b)
                    break
        finally:
            pool.shutdown(wait=True)
        return [replace(e, task=replace(e.task, blocks=keep[i])) for i, e in enumerate(extents)]

    def _may_match(self, extent: _Extent, block: int, columns: list[str],
                   on_bytes: Callable[[int], None]) -> bool:
        present = [c for c in columns if c in extent.body.schema.names
                   and type_of_field(extent.body.schema.field(c)).kind == "string"]
        if not present:
            return True
        parquet = pq.ParquetFile(extent.source(), metadata=extent.body.metadata,
                                 read_dictionary=sorted(extent.body.coded & set(present)))
        table = parquet.read_row_group(block, columns=present, use_threads=False)
        on_bytes(extent.body.column_bytes([block], present))
        values = {c: _values(table.column(c)) for c in present}
        assert self.prefilter is not None
        return _may_hold(self.prefilter, values)


def _checked_columns(p: BlockPredicate) -> set[str]:
    if isinstance(p, StringHas | Equals):
        return {p.column}
    if isinstance(p, And | Or):
        return set().union(*(_checked_columns(c) for c in p.children))
    return set()


def _values(col: pa.ChunkedArray) -> pa.Array:
    """The distinct-or-more values of one block's column: a dictionary's values (a
    superset of those used), else the values themselves."""
    chunks = col.chunks
    if pa.types.is_dictionary(col.type):
        return pa.concat_arrays([c.dictionary for c in chunks]) if chunks else pa.array(
            [], pa.string())
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())


def _may_hold(p: BlockPredicate, values: dict[str, pa.Array]) -> bool:
    """False only when no value of the block's filter columns can satisfy `p`."""
    if isinstance(p, StringHas):
        arr = values.get(p.column)
        if arr is None:
            return True
        words = tokenize(p.token)
        # a row holding the word as a token holds each of its tokens as a substring, in
        # any case (Arrow's case folding is at least ASCII's, so this only keeps more)
        return all(pc.any(pc.match_substring(arr, w, ignore_case=True)).as_py() is True
                   for w in words)
    if isinstance(p, Equals):
        arr = values.get(p.column)
        if arr is None or not isinstance(p.value, str):
            return True
        return pc.any(pc.equal(arr, p.value)).as_py() is True
    if isinstance(p, And):
        return all(_may_hold(c, values) for c in p.children)
    if isinstance(p, Or):
        return any(_may_hold(c, values) for c in p.children)
    return True


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _plain(arr: pa.Array) -> pa.Array:
    return arr.cast(arr.type.value_type) if pa.types.is_dictionary(arr.type) else arr


def _rows(n: int) -> pa.RecordBatch:
    """A batch of `n` rows and no columns."""
    return pa.RecordBatch.from_arrays([pa.nulls(n)], names=["_"]).select([])

