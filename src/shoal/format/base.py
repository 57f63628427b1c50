"""Extent format protocols, block predicates and the write result (docs/storage.md).

Catalog, planner, executor and ingest talk to extents only through these names; a concrete
format (`tlm`, maybe Parquet later) implements `SegmentFormat`, `ExtentReader` and
`ExtentWriter`. `BlockPredicate` is the small lowered predicate language evaluated against
block stats; evaluation is conservative: whatever a format cannot decide keeps the block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from shoal.storage.base import ObjectStore

# ---- predicates ---------------------------------------------------------------------------
# Values are Python values in storage units: timestamps as int ns since the epoch, ints as
# int, strings as str. Bounds of TimeRange are inclusive; None means unbounded.


@dataclass(frozen=True, slots=True)
class TimeRange:
    lo_ns: int | None = None
    hi_ns: int | None = None
    column: str = "_timestamp"


@dataclass(frozen=True, slots=True)
class Equals:
    column: str
    value: Any


@dataclass(frozen=True, slots=True)
class InSet:
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class StringHas:
    """The column's text contains `token` as a whole token (case-insensitive, like KQL has)."""

    column: str
    token: str


@dataclass(frozen=True, slots=True)
class DynamicPathExists:
    column: str
    path: str  # dotted path into the JSON value, e.g. "http.method"


@dataclass(frozen=True, slots=True)
class DynamicPathEquals:
    column: str
    path: str
    value: Any


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[BlockPredicate, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[BlockPredicate, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: BlockPredicate


BlockPredicate = (TimeRange | Equals | InSet | StringHas | DynamicPathExists
                  | DynamicPathEquals | And | Or | Not)


# ---- metadata and write result ------------------------------------------------------------
@dataclass(frozen=True)
class ExtentMetadata:
    version: int                      # 1, 2 or 3 for tlm
    schema: pa.Schema                 # the Arrow schema the extent was written with
    block_count: int
    row_count: int
    block_stats: list[dict[str, Any]] | None   # one entry per block; None for v1
    byte_size: int


@dataclass(frozen=True)
class ExtentWriteResult:
    """What the format hands the catalog for one finished extent (docs/storage.md)."""

    extent_id: str                    # uuid4 hex string
    object_path: str                  # key in the object store
    byte_size: int
    row_count: int
    block_count: int
    min_ts: int | None                # min/max of `_timestamp` in ns; None if no rows/all null
    max_ts: int | None
    # dynamic column name -> sorted list of dotted paths present anywhere in the extent
    present_paths: dict[str, list[str]] = field(default_factory=dict)
    # column name -> {"distinct": sorted list | None, "tokens": sorted list | None}
    column_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    # column name -> serialised membership filter, for columns whose distinct set overflowed
    membership_filters: dict[str, bytes] = field(default_factory=dict)


# ---- protocols ------------------------------------------------------------------------------
@runtime_checkable
class ExtentReader(Protocol):
    def metadata(self) -> ExtentMetadata: ...

    def pruned_blocks(self, predicate: BlockPredicate | None) -> list[int]:
        """Ids of the blocks that may hold a matching row (all blocks when unsure)."""
        ...

    def read_block(self, block: int, projection: Sequence[str] | None = None) -> pa.RecordBatch:
        """One block, restricted to `projection` (names; unknown names are skipped)."""
        ...

    @property
    def bytes_read(self) -> int:
        """Bytes fetched from the object store so far by this reader."""
        ...


@runtime_checkable
class ExtentWriter(Protocol):
    def append(self, batch: pa.RecordBatch | pa.Table) -> None: ...

    def finish(self) -> ExtentWriteResult:
        """Write the object (atomically) and return its description."""
        ...

    def abort(self) -> None:
        """Drop buffered data without writing anything."""
        ...


@runtime_checkable
class SegmentFormat(Protocol):
    name: str

    def open_extent(self, store: ObjectStore, path: str) -> ExtentReader: ...

    def start_extent(self, store: ObjectStore, prefix: str, schema: pa.Schema, *,
                     block_rows: int = 65536) -> ExtentWriter:
        """Begin an extent under key prefix `prefix`; blocks hold at most `block_rows` rows."""
        ...

    def read_block_filters(self, store: ObjectStore, path: str,
                           block_stats: Sequence[dict[str, Any]], column: str
                           ) -> tuple[list[Any] | None, int]:
        """Each block's membership filter of `column` (`shoal.format.blockfilters`'s
        `(kind, BloomFilter)` or None), located by the extent's block stats, without
        opening the extent; None when it has none. Also the bytes read."""
        ...
