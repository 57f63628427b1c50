"""The commit layer: extents into the store, snapshots into the catalog, and their cleanup.

Everything that makes rows part of a table, or takes extents out of one, goes through here,
for ingest, every frontend and maintenance alike; it is also the only place that discards
or deletes extents (a contract test keeps it so). Written extents are deleted only when
their commit *certainly* failed; an unknown outcome leaves them for orphan GC.

- `extents`: `ExtentStager` writes extents (no catalog needed: it runs in Spark tasks);
  `StagedExtents` scopes one unit's extents; `discard_extents` / `discard_on_failure`
  delete those that certainly did not commit;
- `coordinator`: `CommitCoordinator.run()`, the one compare-and-swap retry loop, and the
  common commits built on it (append, schema evolution);
- the recipes callers need, each owning its discards:
  `files.append_files` (file-drop: each file once by its ledger key, replays discarded),
  `offsets.append_ranges` (Kafka: staged ranges with the source offsets they reach),
  `rejects.commit_rejects` (the reject tables), `swap.swap_extents` (compaction and
  DELETE: old extents out, new ones in, in one CAS with the live-inputs rebase;
  `swap.stage_rewrite` writes a delete's rewritten extent),
  `expiry.expire_history` / `expiry.purge_dropped` / `expiry.delete_unreferenced`
  (retention's expired files, dropped tables' files, orphan GC's deletes);
- `ledger`: the idempotency ledger's TTL and its sweeper (ledger rows are written by the
  commits themselves).

This package sits right above the catalog: it imports `catalog`, `format`, `storage`,
`types` and `errors`, never ingest, query, maintenance, frontends or the client.
"""

from __future__ import annotations

from shoal.commit.coordinator import CommitCoordinator, CommitOutcome, CommitSpec
from shoal.commit.expiry import (ExpiredHistory, delete_unreferenced, expire_history,
                                 purge_dropped)
from shoal.commit.extents import (DEFAULT_BLOCK_ROWS, ExtentStager, OpenExtent, StageHook,
                                  StagedExtents, discard_extents, discard_on_failure,
                                  extent_prefix)
from shoal.commit.files import FilesOutcome, StagedFile, append_files
from shoal.commit.ledger import (LEDGER_TTL_S, SWEEP_AGE_S, SWEEP_INTERVAL_S,
                                 LedgerSweeper)
from shoal.commit.offsets import (OffsetsMovedError, Position, RangesOutcome, StagedOverlapError,
                                  StagedRange, append_ranges, read_offsets)
from shoal.commit.rejects import RejectRecord, commit_rejects, ensure_rejects_table
from shoal.commit.swap import (Replacement, SwapOutcome, SwapRowCountError, stage_rewrite,
                               swap_extents)

__all__ = [
    "DEFAULT_BLOCK_ROWS", "LEDGER_TTL_S", "SWEEP_AGE_S", "SWEEP_INTERVAL_S", "CommitCoordinator",
    "CommitOutcome", "CommitSpec", "ExpiredHistory", "ExtentStager", "FilesOutcome",
    "LedgerSweeper", "OffsetsMovedError", "OpenExtent", "Position", "RangesOutcome",
    "RejectRecord", "Replacement", "StageHook", "StagedExtents", "StagedFile",
    "StagedOverlapError", "StagedRange", "SwapOutcome", "SwapRowCountError", "append_files",
    "append_ranges", "commit_rejects", "delete_unreferenced", "discard_extents",
    "discard_on_failure", "ensure_rejects_table", "expire_history", "extent_prefix",
    "purge_dropped", "read_offsets", "stage_rewrite", "swap_extents",
]
