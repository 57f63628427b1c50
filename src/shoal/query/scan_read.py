"""The one Arrow shape every query engine reads a planned scan in (docs/architecture.md).

Spark's Python DataSource and the embedded engine read the same `ScanSpec` through
`read_tasks`, so both see identical columns: each surviving block is read with only the
spec's columns (the tlm reader fetches and decompresses only those fields), upgraded from
the schema version it was written under to the version being read (a column renamed since is
read under the name the extent stores, `ScanTask.stored`; a dropped one is never read), then
shaped into what Spark's Arrow path accepts (`shoal.query.scan_shape`: timestamps in µs UTC,
`_timestamp_ns` as a BIGINT, vectors as `list<float>`, `dynamic` as JSON text).

A spec column may be a path of a dynamic column (`attrs.$http.method`, see
`shoal.format.shred`): utf8, the embedded engine's `get_json_object(attrs, '$.http.method')`.
A block that holds the path's shredded sub-column gives it as stored, without the JSON; any
other block computes it from the JSON column (`shoal.format.shred.engine_answer`, the
function the writer used), raising `NotIdenticalError` where a row holds a value the engine
hands to Spark. Only the embedded engine's scans ask for such columns.

`read_table` is one table's scan planned and read in one call, with shoal's own types (not
Spark's shapes): `db.read()`, the tests' ground truth and the demo. It plans exactly as a
`db.sql()` reference does (`shoal.query.scan_plan.build_scan_spec`: stages 1 and 2) and reads
the surviving blocks as the embedded engine's reader does (`shoal.query.scan_fast` for v3
extents of a mapped store, `read_native` for the others), so a scan reports the same stats
whether it came through `read` or `sql`. Neither stage decides: the caller still
applies the full predicate (stage 3).

Nothing here imports pyspark or the client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from shoal.catalog.base import Catalog
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.format.shred import block_has, engine_answer, hidden_name, parse_hidden
from shoal.query.scan_plan import (FooterCache, ScanSpec, ScanStats, ScanTask,
                                   build_scan_spec)
from shoal.query.scan_shape import stored_columns, to_spark_batch
from shoal.storage.base import ObjectStore
from shoal.types.schema import Schema
from shoal.types.upgrade import upgrade_batch

def spec_arrow_schema(spec: ScanSpec) -> pa.Schema:
    """The Arrow schema `read_tasks` yields for `spec` (also for a scan with no rows)."""
    schema = spec.read_schema()
    real = stored_columns(spec.columns)
    paths = [c for c in spec.columns if parse_hidden(c) is not None]
    empty = pa.RecordBatch.from_arrays(
        [pa.nulls(0, schema.column(c).type.arrow()) for c in real]
        + [pa.nulls(0, pa.string()) for _ in paths], names=real + paths)
    return to_spark_batch(empty, schema, spec.columns).schema


def read_native(spec: ScanSpec, tasks: Sequence[ScanTask], store: ObjectStore,
                formats: dict[str, SegmentFormat],
                on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of `tasks`' surviving blocks with shoal's own types, upgraded to the spec's
    schema version and holding its stored columns (`stored_columns`). `on_bytes(n)` is told
    of every byte fetched, before the batch that needed it is yielded (a LIMIT may stop the
    consumer at any batch)."""
    schema = spec.read_schema()
    real = stored_columns(spec.columns)
    paths = [c for c in spec.columns if parse_hidden(c) is not None]
    for task in tasks:
        reader = formats[task.format].open_extent(store, task.path)
        counted = 0
        try:
            meta = reader.metadata()
            present = set(meta.schema.names)
            blocks = task.blocks if task.blocks is not None else range(meta.block_count)
            stored = task.stored or {}
            for b in blocks:
                stat = meta.block_stats[b] if meta.block_stats is not None else None
                if not paths:
                    wanted = [n for c in real
                              if (n := stored.get(c, c)) is not None and n in present]
                    batch = upgrade_batch(reader.read_block(b, wanted), schema, real,
                                          sources=stored)
                else:
                    batch = _read_with_paths(reader, b, stat, present, schema, real, paths,
                                             stored)
                if on_bytes is not None:
                    on_bytes(reader.bytes_read - counted)
                counted = reader.bytes_read
                yield batch
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()


def _read_with_paths(reader: Any, block: int, stat: dict[str, Any] | None, present: set[str],
                     schema: Schema, real: list[str], paths: list[str],
                     renamed: dict[str, str | None]) -> pa.RecordBatch:
    """One block's `real` columns and its `paths` (see the module docstring); `renamed`: the
    task's stored names (`ScanTask.stored`)."""
    def at_rest(p: str) -> str | None:
        """The name the block stores path column `p` under, if the column is there."""
        column, path = parse_hidden(p) or ("", "")
        name = renamed.get(column, column)
        return None if name is None else hidden_name(name, path)

    stored = {p: h for p in paths if (h := at_rest(p)) is not None and block_has(stat, h)}
    computed: dict[str, list[str]] = {}
    for p in paths:
        if p not in stored:
            column, path = parse_hidden(p) or ("", "")
            computed.setdefault(column, []).append(path)
    sources = [c for c in computed if c not in real]
    raw = reader.read_block(block, [n for c in real + sources
                                    if (n := renamed.get(c, c)) is not None and n in present]
                            + list(stored.values()))
    batch = upgrade_batch(raw, schema, real + sources, sources=renamed)
    arrays = {c: batch.column(c) for c in real}
    for column, wanted in computed.items():
        answers = engine_answer(batch.column(column), wanted)
        for path, arr in zip(wanted, answers, strict=True):
            arrays[hidden_name(column, path)] = arr
    for p, h in stored.items():
        arrays[p] = raw.column(h)
    names = real + paths
    return pa.RecordBatch.from_arrays([arrays[n] for n in names], names=names)


def read_tasks(spec: ScanSpec, tasks: Sequence[ScanTask], store: ObjectStore,
               formats: dict[str, SegmentFormat],
               on_bytes: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
    """`read_native`'s batches in the engines' shape (`to_spark_batch`)."""
    schema = spec.read_schema()
    for batch in read_native(spec, tasks, store, formats, on_bytes):
        yield to_spark_batch(batch, schema, spec.columns)


def read_table(catalog: Catalog, store: ObjectStore, formats: dict[str, SegmentFormat],
               table: str, predicate: BlockPredicate | None = None, *,
               snapshot_id: int | None = None, prune: bool = True,
               columns: Sequence[str] | None = None,
               footers: FooterCache | None = None) -> tuple[pa.Table, ScanStats]:
    """The blocks of `table` that may match `predicate`, as one Arrow table of the snapshot's
    schema (or its `columns`), and the scan's stats. `footers`: a block-stats cache to share
    (the query engine's); a private one by default."""
    spec, stats = build_scan_spec(
        catalog, store, formats, footers if footers is not None else FooterCache(), table,
        predicate=predicate, columns=columns, snapshot_id=snapshot_id, storage_url="",
        s3_endpoint=None, parallelism=1, prune=prune)
    schema = spec.read_schema().arrow()
    schema = pa.schema([schema.field(c) for c in spec.columns])

    def count(n: int) -> None:
        stats.bytes_read += n

    # the embedded engine's reader: v3 extents of a mapped store fast, the others block by
    # block, so `read` and `sql` fetch (and count) the same bytes
    from shoal.query.scan_fast import BodyCache, FastScan

    fast = FastScan(spec, store, BodyCache(), predicate if prune else None, native=True)
    batches: list[pa.RecordBatch] = []
    for run, slow in fast.runs():
        batches.extend(fast.read(run, count, 1))
        batches.extend(read_native(spec, slow, store, formats, count))
    return pa.Table.from_batches(batches, schema=schema), stats
