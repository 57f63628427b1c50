"""Files applied exactly once by their ledger key: the file-drop pipeline's commit recipe.

A `StagedFile` is one source file already written as extents, with the ledger key of its
content and what its ledger row keeps. `append_files` publishes a group of them:

1. files the caller knows are applied already (`known`: an identical copy committed earlier
   in the same scan) are replays: their extents are discarded;
2. the group's `rejects` are committed first (`commit_rejects`, one ledger key per line), so
   a re-run after a crash between the two commits skips them;
3. every file's extents and ledger row land in ONE compare-and-swap. If some file's key was
   applied meanwhile (another pipeline took the same content), the group is committed file
   by file instead: a file whose key is applied is a replay and its extents are discarded,
   the others land.

Failure rule: the extents of files whose commit certainly failed are deleted (for the group
commit: all of them; file by file: that file's, and those of the files not tried yet); an
unknown outcome (`CommitStateUnknownError`) leaves what may have landed for orphan GC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.catalog.base import LedgerEntry, ManifestEntry
from shoal.commit.coordinator import CommitCoordinator, CommitOutcome, CommitSpec
from shoal.commit.extents import discard_extents, discard_on_failure
from shoal.commit.rejects import RejectRecord, commit_rejects


@dataclass(frozen=True)
class StagedFile:
    """One file's extents, waiting to land with the file's ledger key."""

    key: str                         # the ledger key of the file's content
    ack: dict[str, Any]              # what the ledger row keeps (returned to a replay)
    extents: Sequence[ManifestEntry]
    rows: int = 0


@dataclass(frozen=True)
class FilesOutcome:
    landed: list[int] = field(default_factory=list)     # indexes into `files`: committed now
    replayed: list[int] = field(default_factory=list)   # key applied before: discarded
    rejected: int = 0                                   # reject rows committed
    snapshot_id: int | None = None                      # the newest snapshot committed


def append_files(coordinator: CommitCoordinator, table: str, files: Sequence[StagedFile], *,
                 known: Sequence[StagedFile] = (), rejects: Sequence[RejectRecord] = (),
                 summary: dict[str, Any] | None = None) -> FilesOutcome:
    """Commit `files` to `table`, each exactly once by its key (see the module docstring).

    `summary` is added to each snapshot's summary (with the extent, row and file counts).
    """
    discard_extents(coordinator.store, [e for f in known for e in f.extents])
    rejected = commit_rejects(coordinator, coordinator.catalog, table, rejects)
    if not files:
        return FilesOutcome(rejected=rejected)
    if len(files) == 1:  # the coordinator discards the file's extents on a replay or failure
        outcome = _commit(coordinator, table, files, summary, written=files[0].extents)
        if outcome.replayed is not None:
            return FilesOutcome(replayed=[0], rejected=rejected)
        return FilesOutcome(landed=[0], rejected=rejected, snapshot_id=_id(outcome))
    everything = [e for f in files for e in f.extents]
    # Several files: a replay is retried file by file, so only a failure discards them here.
    with discard_on_failure(coordinator.store, everything):
        outcome = _commit(coordinator, table, files, summary, written=())
    if outcome.replayed is None:
        return FilesOutcome(landed=list(range(len(files))), rejected=rejected,
                            snapshot_id=_id(outcome))
    landed: list[int] = []
    replayed: list[int] = []
    snapshot_id: int | None = None
    for i, f in enumerate(files):
        try:
            one = _commit(coordinator, table, [f], summary, written=f.extents)
        except Exception:
            # the files after this one were never tried: certainly not committed
            discard_extents(coordinator.store, [e for g in files[i + 1:] for e in g.extents])
            raise
        if one.replayed is not None:
            replayed.append(i)
        else:
            landed.append(i)
            sid = _id(one)
            if sid is not None:
                snapshot_id = sid if snapshot_id is None else max(snapshot_id, sid)
    return FilesOutcome(landed=landed, replayed=replayed, rejected=rejected,
                        snapshot_id=snapshot_id)


def _commit(coordinator: CommitCoordinator, table: str, files: Sequence[StagedFile],
            summary: dict[str, Any] | None, *,
            written: Sequence[ManifestEntry]) -> CommitOutcome:
    add = [e for f in files for e in f.extents]
    spec = CommitSpec(
        operation="append", add=add, ledger=[LedgerEntry(f.key, f.ack) for f in files],
        summary={"added_extents": len(add), "added_rows": sum(f.rows for f in files),
                 **(summary or {}), "files": len(files)})
    return coordinator.run(table, lambda _info: spec, written=written)


def _id(outcome: CommitOutcome) -> int | None:
    return None if outcome.snapshot is None else outcome.snapshot.snapshot_id
