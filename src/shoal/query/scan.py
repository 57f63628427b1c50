"""One table scan through the first two levels of the pruning cascade, read into
Arrow with shoal's own types: `db.read()`, the tests' ground truth and the demo.

It is the engines' scan path: `build_scan_spec` runs stage 1 (catalog) and stage 2 (block
stats, membership filters) exactly as for a `db.sql()` reference, and `read_native` reads
the surviving blocks as the engines' reader does, minus their Spark shapes. So a scan reports
the same stats whether it came through `read` or `sql`. Neither stage decides: the caller
still applies the full predicate (stage 3).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from shoal.catalog.base import Catalog
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.query.scanspec import FooterCache, ScanStats, build_scan_spec
from shoal.query.shapes import read_native
from shoal.storage.base import ObjectStore

__all__ = ["ScanStats", "read_table"]


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

    batches = list(read_native(spec, spec.tasks(), store, formats, count))
    return pa.Table.from_batches(batches, schema=schema), stats
