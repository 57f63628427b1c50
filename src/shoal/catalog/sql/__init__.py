"""`SqlCatalog`: the catalog on SQLite (embedded default) or Postgres, via SQLAlchemy.

One class assembled from one module per role, each the implementation of one of the role
protocols of `shoal.catalog.base`:

- `connections`: the engine, transactions, `SqlDb` (what the shared operations run on);
- `tables`: tables and schema versions (`TableCatalog`);
- `lifecycle`: renaming, dropping, undropping and purging tables (`TableCatalog` too);
- `ledger`: the idempotency ledger and source offsets (`LedgerCatalog`);
- `snapshots`: commits, snapshots and manifests, expiry (`SnapshotCatalog`);
- `work`: the work-unit queue (`WorkCatalog`);
- `pruning`: stage-1 pruning queries (`PruningCatalog`);
- `model`: the catalog's SQL tables and their migrations.

The operations the embedded catalog's `LiteCatalog` also runs (`load_table`, `ledger_get`,
`commit`, `find_commit`) are `shoal.catalog.operations`, over the SQL texts of
`shoal.catalog.statements`: one text and one implementation for both paths. The rest is
SQLAlchemy Core, written once here. Stored values that do not decode (JSON, schema
documents, membership filters) raise `CatalogCorruptError` naming the catalog table and row.
"""

from __future__ import annotations

from shoal.catalog.sql.lifecycle import SqlLifecycle
from shoal.catalog.sql.pruning import SqlPruning
from shoal.catalog.sql.snapshots import SqlSnapshots
from shoal.catalog.sql.work import SqlWork


class SqlCatalog(SqlLifecycle, SqlSnapshots, SqlWork, SqlPruning):
    """The `Catalog` protocol over one SQL database (see the package's docstring)."""


__all__ = ["SqlCatalog"]
