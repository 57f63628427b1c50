"""The commit layer: extents into the store, snapshots into the catalog (SPEC §6.3).

Everything that makes rows part of a table goes through here, for ingest, every frontend and
maintenance alike:

- `extents`: `ExtentStager` writes extents (no catalog needed: it runs in Spark tasks),
  `discard_extents` / `discard_on_failure` delete those that certainly did not commit;
- `coordinator`: `CommitCoordinator.run()`, the one compare-and-swap retry loop, and the
  common commits built on it (append, schema evolution);
- `ledger`: the idempotency ledger's TTL and its sweeper (ledger rows are written by the
  commits themselves).

This package sits right above the catalog: it imports `catalog`, `format`, `storage`,
`types` and `errors`, never ingest, query, maintenance, frontends or the client.
"""

from __future__ import annotations

from shoal.commit.coordinator import CommitCoordinator, CommitOutcome, CommitSpec
from shoal.commit.extents import (DEFAULT_BLOCK_ROWS, ExtentStager, OpenExtent, StageHook,
                                  discard_extents, discard_on_failure, extent_prefix)
from shoal.commit.ledger import (LEDGER_TTL_S, SWEEP_AGE_S, SWEEP_INTERVAL_S,
                                 LedgerSweeper)

__all__ = [
    "DEFAULT_BLOCK_ROWS", "LEDGER_TTL_S", "SWEEP_AGE_S", "SWEEP_INTERVAL_S", "CommitCoordinator",
    "CommitOutcome", "CommitSpec", "ExtentStager", "LedgerSweeper", "OpenExtent", "StageHook",
    "discard_extents", "discard_on_failure", "extent_prefix",
]
