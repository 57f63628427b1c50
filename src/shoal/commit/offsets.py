"""Staged ranges of a source committed with the offsets they reach: the Kafka recipe.

A source with offsets (Kafka: one source per group and topic, one position per partition)
is applied exactly once through the catalog's source offsets, not through ledger keys. A
`StagedRange` is what one task made of some positions' records: an extent already in the
store (or none, when every record was refused), the records' rejects, and the first and last
offset it read per position. `append_ranges` commits a batch of them:

1. against the catalog's offsets (`base`, read once before the batch): a range wholly at or
   below them was applied before (a replayed batch): its extent is discarded and it is left
   out; a range that straddles them cannot be split (its rows are one extent), so the batch
   is refused with `StagedOverlapError` and every staged extent is discarded;
2. the kept ranges' rejects are committed first (`commit_rejects`), so a re-run after a crash
   between the two commits skips them by key;
3. the kept extents and the last offset per position land in ONE compare-and-swap. The
   offsets are re-read inside every attempt: they only change with a snapshot of the table,
   so the CAS on the snapshot id makes "nobody else moved them" part of the same
   transaction. If they did move, the batch fails with `OffsetsMovedError` and its extents
   are discarded.

An unknown outcome leaves the extents for orphan GC, as every commit of this layer does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shoal.catalog.base import ManifestEntry, SourceOffset, TableInfo
from shoal.commit.coordinator import CommitCoordinator, CommitSpec
from shoal.commit.extents import discard_extents
from shoal.commit.rejects import RejectRecord, commit_rejects
from shoal.errors import PipelineError

Position = tuple[str, str]
"""(source, partition), as the catalog keys a `SourceOffset`."""


class StagedOverlapError(PipelineError):
    """A staged range overlaps the offsets the catalog already holds for its position."""

    code = "staged_offsets_overlap"

    def __init__(self, table: str, position: Position, first: int, committed: int) -> None:
        self.position = position
        self.first = first
        self.committed = committed
        super().__init__(f'table "{table}": staged records of {position[0]}[{position[1]}] '
                         f"start at offset {first} but the catalog already holds up to "
                         f"{committed}")


class OffsetsMovedError(PipelineError):
    """Another writer committed offsets of the same source and table meanwhile."""

    code = "offsets_moved"

    def __init__(self, table: str, source: str) -> None:
        self.source = source
        super().__init__(f'table "{table}": offsets of source "{source}" moved while this '
                         "batch was being committed")


@dataclass(frozen=True)
class StagedRange:
    """Records of some positions made ready to commit: an extent already in the store."""

    entry: ManifestEntry | None                 # None when every record was refused
    first: Mapping[Position, int]               # first and last offset read per position
    last: Mapping[Position, int]
    rejects: Sequence[RejectRecord] = ()


@dataclass(frozen=True)
class RangesOutcome:
    kept: list[int] = field(default_factory=list)       # indexes of the ranges committed
    rejected: int = 0                                   # reject rows committed
    last: dict[Position, int] = field(default_factory=dict)   # offsets committed
    snapshot_id: int | None = None


def read_offsets(coordinator: CommitCoordinator, sources: Sequence[str]
                 ) -> dict[Position, int]:
    """The catalog's last applied offset per position of `sources`."""
    return {(s, part): off for s in sources
            for part, off in coordinator.catalog.source_offsets(s).items()}


def append_ranges(coordinator: CommitCoordinator, table: str, staged: Sequence[StagedRange],
                  *, base: Mapping[Position, int],
                  summary: Mapping[str, object] | None = None) -> RangesOutcome:
    """Commit `staged` to `table` with the offsets they reach (see the module docstring).

    `base` holds the catalog's offsets as read before the batch (`read_offsets`).
    """
    every = [sr.entry for sr in staged if sr.entry is not None]
    kept: list[int] = []
    applied: list[ManifestEntry] = []
    for i, sr in enumerate(staged):
        old = [k for k in sr.last if base.get(k, -1) >= sr.last[k]]
        overlap = [k for k in sr.last if k not in old and base.get(k, -1) >= sr.first[k]]
        if overlap:
            discard_extents(coordinator.store, every)
            raise StagedOverlapError(table, overlap[0], sr.first[overlap[0]], base[overlap[0]])
        if old and len(old) == len(sr.last):
            if sr.entry is not None:
                applied.append(sr.entry)
            continue
        if old:  # a range mixing applied and new positions: refused like an overlap
            discard_extents(coordinator.store, every)
            raise StagedOverlapError(table, old[0], sr.first[old[0]], base[old[0]])
        kept.append(i)
    discard_extents(coordinator.store, applied)
    rejected = commit_rejects(coordinator, coordinator.catalog, table,
                              [r for i in kept for r in staged[i].rejects])
    last: dict[Position, int] = {}
    for i in kept:
        for k, o in staged[i].last.items():
            last[k] = max(o, last.get(k, -1))
    if not last:
        return RangesOutcome(kept, rejected)
    written = [e for i in kept if (e := staged[i].entry) is not None]
    offsets = [SourceOffset(s, p, o) for (s, p), o in sorted(last.items())]
    sources = sorted({s for s, _ in last})

    def build(_info: TableInfo) -> CommitSpec:
        now = read_offsets(coordinator, sources)
        for key in last:
            if now.get(key) != base.get(key):
                raise OffsetsMovedError(table, key[0])
        return CommitSpec(operation="append", add=written, offsets=offsets,
                          summary={"added_extents": len(written),
                                   "added_rows": sum(e.row_count for e in written),
                                   **(summary or {})})

    outcome = coordinator.run(table, build, written=written)
    snapshot_id = None if outcome.snapshot is None else outcome.snapshot.snapshot_id
    return RangesOutcome(kept, rejected, last, snapshot_id)
