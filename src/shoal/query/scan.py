"""One table scan through the first two levels of the pruning cascade (SPEC §8).

`plan_scan()` runs stage 1 in the catalog (no object-store I/O); `read_scan()` opens each
surviving extent, runs stage 2 on its block stats and reads the surviving blocks, upgrading
every batch to the schema version being read. Neither stage decides: whoever consumes the
batches (Spark, or a test's ground truth) still applies the full predicate (stage 3).
The Spark DataSource of the query lane is built on these two functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from shoal.catalog.base import Catalog, ManifestEntry
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.storage.base import ObjectStore
from shoal.types.schema import Schema
from shoal.types.upgrade import upgrade_batch


@dataclass
class ScanStats:
    extents_considered: int = 0
    extents_pruned: int = 0
    extents_read: int = 0
    blocks_considered: int = 0
    blocks_pruned: int = 0
    blocks_read: int = 0
    bytes_read: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class ScanPlan:
    table: str
    snapshot_id: int
    schema: Schema                      # the version the scan reads as
    entries: list[ManifestEntry]
    predicate: BlockPredicate | None
    stats: ScanStats = field(default_factory=ScanStats)


def plan_scan(catalog: Catalog, table: str, predicate: BlockPredicate | None = None, *,
              snapshot_id: int | None = None, prune: bool = True) -> ScanPlan:
    plan = catalog.plan_extents(table, predicate if prune else None, snapshot_id=snapshot_id)
    snap = catalog.snapshot(table, plan.snapshot_id)
    schema = catalog.schema_version(table, snap.schema_version)
    stats = ScanStats(extents_considered=plan.considered, extents_pruned=plan.pruned)
    return ScanPlan(table, plan.snapshot_id, schema, plan.entries,
                    predicate if prune else None, stats)


def read_scan(plan: ScanPlan, store: ObjectStore, formats: dict[str, SegmentFormat], *,
              columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of every surviving block, shaped to `plan.schema` (or its `columns` subset)."""
    target = plan.schema
    for entry in plan.entries:
        reader = formats[entry.format].open_extent(store, entry.object_path)
        meta = reader.metadata()
        blocks = reader.pruned_blocks(plan.predicate)
        plan.stats.extents_read += 1
        plan.stats.blocks_considered += meta.block_count
        plan.stats.blocks_pruned += meta.block_count - len(blocks)
        for b in blocks:
            batch = upgrade_batch(reader.read_block(b, columns and [
                c for c in columns if c in meta.schema.names]), target)
            plan.stats.blocks_read += 1
            yield batch.select(list(columns)) if columns else batch
        plan.stats.bytes_read += reader.bytes_read


def read_table(catalog: Catalog, store: ObjectStore, formats: dict[str, SegmentFormat],
               table: str, predicate: BlockPredicate | None = None, *,
               snapshot_id: int | None = None, prune: bool = True,
               columns: Sequence[str] | None = None) -> tuple[pa.Table, ScanStats]:
    """The whole scan as one Arrow table (small tables, tests, the demo)."""
    plan = plan_scan(catalog, table, predicate, snapshot_id=snapshot_id, prune=prune)
    schema = plan.schema.arrow()
    if columns:
        schema = pa.schema([schema.field(c) for c in columns])
    batches = list(read_scan(plan, store, formats, columns=columns))
    return pa.Table.from_batches(batches, schema=schema), plan.stats
