"""Swapping extents for rewritten ones in one snapshot: compaction's commit recipe.

A `Replacement` is one extent already written that holds exactly the rows of some live
extents (compaction's merge of a group). `swap_extents` commits a batch of them as one
snapshot that removes the old extents and adds the new ones, through the coordinator's
compare-and-swap loop, with this rebase rule: each attempt keeps only the replacements whose
old extents are all still live (another writer may have compacted or expired some of them
meanwhile), and gives up when none is left or when `proceed()` says so (the worker lost its
lease, or the outputs are getting too old for orphan GC's grace period).

A replacement must keep the rows: one whose new extent has another row count than its old
extents is refused before anything commits (`SwapRowCountError`). A delete's replacement
says how many rows it drops on purpose (`deleted`): its new extent must hold exactly the
others, and one that drops every row has no new extent (`add=None`). With `all_or_none`
(a DELETE, which must land whole) an attempt where any old extent is no longer live gives
up instead of committing the rest.

Extents deleted here: every new extent when the swap is refused, gives up or certainly
fails; after a commit, the new extents of the replacements the rebase dropped. An unknown
outcome leaves them for orphan GC.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from shoal.catalog.base import ManifestEntry, Snapshot, TableInfo
from shoal.commit.coordinator import CommitCoordinator, CommitSpec
from shoal.commit.extents import ExtentStager, discard_extents, extent_prefix
from shoal.errors import PipelineError
from shoal.format.base import SegmentFormat
from shoal.storage.base import ObjectStore
from shoal.types.schema import Schema


class SwapRowCountError(PipelineError):
    """A new extent does not hold the rows of the extents it replaces."""

    code = "swap_row_count"

    def __init__(self, table: str, index: int, wrote: int, expected: int) -> None:
        self.index = index
        self.wrote = wrote
        self.expected = expected
        super().__init__(f'table "{table}": replacement {index} wrote {wrote} rows, '
                         f"expected {expected}")


@dataclass(frozen=True)
class Replacement:
    remove: Sequence[ManifestEntry]      # live extents whose rows `add` holds
    add: ManifestEntry | None            # written, not committed yet (None: no row kept)
    deleted: int = 0                     # rows of `remove` left out of `add` on purpose

    @property
    def rows(self) -> int:
        return sum(e.row_count for e in self.remove)

    @property
    def kept_rows(self) -> int:
        return self.rows - self.deleted


@dataclass(frozen=True)
class SwapOutcome:
    snapshot: Snapshot | None                            # None: gave up, nothing committed
    kept: list[int] = field(default_factory=list)        # indexes of the swapped replacements


def swap_extents(coordinator: CommitCoordinator, table: str,
                 replacements: Sequence[Replacement], *, operation: str = "compact",
                 proceed: Callable[[], bool] = lambda: True,
                 on_attempt: Callable[[TableInfo], None] | None = None,
                 all_or_none: bool = False,
                 summary: dict[str, int] | None = None) -> SwapOutcome:
    """Commit `replacements` to `table` (see the module docstring).

    `on_attempt(table_info)` runs before each attempt that has something to commit;
    `summary` is added to the snapshot's summary.
    """
    written = [r.add for r in replacements if r.add is not None]
    for i, r in enumerate(replacements):
        wrote = r.add.row_count if r.add is not None else 0
        if wrote != r.kept_rows or (r.add is None) != (r.kept_rows == 0):
            discard_extents(coordinator.store, written)
            raise SwapRowCountError(table, i, wrote, r.kept_rows)
    kept: list[int] = []

    def build(current: TableInfo) -> CommitSpec | None:
        if not proceed():
            return None
        ids = [e.extent_id for r in replacements for e in r.remove]
        live = coordinator.catalog.live_extent_ids(table, ids)
        kept[:] = [i for i, r in enumerate(replacements)
                   if {e.extent_id for e in r.remove} <= live]
        if not kept or (all_or_none and len(kept) < len(replacements)):
            return None
        if on_attempt is not None:
            on_attempt(current)
        added = [a for i in kept if (a := replacements[i].add) is not None]
        return CommitSpec(
            operation=operation, add=added,
            remove=[e.extent_id for i in kept for e in replacements[i].remove],
            summary={"removed_extents": sum(len(replacements[i].remove) for i in kept),
                     "added_extents": len(added),
                     "rows": sum(replacements[i].rows for i in kept), **(summary or {})})

    outcome = coordinator.run(table, build, written=written)
    if outcome.snapshot is None:
        return SwapOutcome(None)
    discard_extents(coordinator.store,
                    [a for i, r in enumerate(replacements)
                     if i not in kept and (a := r.add) is not None])
    return SwapOutcome(outcome.snapshot, list(kept))


def stage_rewrite(store: ObjectStore, fmt: SegmentFormat, table_name: str, table_id: int,
                  schema: Schema, rows: pa.Table, *, block_rows: int) -> ManifestEntry:
    """Write `rows` (shaped to `schema`, in the order they stay in) as one new extent of the
    table, not committed: a delete's rewrite of an extent, for `swap_extents`. Picklable by
    reference, so a Spark task calls it."""
    return ExtentStager(store, fmt).write(extent_prefix(table_name, table_id), schema,
                                          rows.to_batches(max_chunksize=block_rows),
                                          block_rows=block_rows)
