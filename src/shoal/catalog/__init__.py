"""The transactional catalog: the only record of which tables, snapshots and extents exist.

`open_catalog` gives the catalog for a URL, `executor_catalog` the one a Spark task shares.
What lives where:

- `base`: the records and the protocols, one per role (`TableCatalog`, `SnapshotCatalog`,
  `LedgerCatalog`, `WorkCatalog`, `PruningCatalog`), `Catalog` their union;
- `statements`: the SQL texts more than one path runs, each written once;
  `operations`: those operations, written once over either driver (`statements.Db`);
- `sql`: `SqlCatalog` on SQLAlchemy (SQLite and Postgres), one module per role;
- `lite`: `LiteCatalog`, the embedded catalog's hot operations on `sqlite3`;
  `sqlite`: the `sqlite3` connections; `peek`: a table's schema read before any of the rest;
- `pruning`: stage 1 as SQL; `cache`: decoded extents for it; `rows`: rows to records;
  `describe`: the describe document of a table; `workspace`: a catalog with its object
  store and extent formats, what the write and read sides both open.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.catalog.base import Catalog, Clock

# The package imports nothing heavy (no SQLAlchemy, no pyarrow): `shoal.catalog.peek` is
# imported by `shoal ingest` before anything else of the catalog, to start coercing early.
# The protocol and its records live in `shoal.catalog.base`.


def open_catalog(url: str, *, clock: Clock = time.time) -> Catalog:
    """A catalog for `sqlite:///path` or `postgresql://...` (migrated to the current version),
    reading the time from `clock` (see `Clock`). An embedded SQLite file gets `LiteCatalog`
    (its hot operations without SQLAlchemy: `shoal ingest` start-up), anything else
    `SqlCatalog`."""
    from shoal.catalog.sqlite import sqlite_file

    if sqlite_file(url) is not None:
        from shoal.catalog.lite import LiteCatalog

        return LiteCatalog(url, clock=clock)
    from shoal.catalog.sql import SqlCatalog

    return SqlCatalog(url, clock=clock)


# Executor-side catalogs (`executor_catalog`): one per URL per process, few connections.
EXECUTOR_POOL_SIZE = 1
EXECUTOR_MAX_OVERFLOW = 1
EXECUTOR_CATALOGS = 4       # URLs kept open per process (the least recently used is closed)
_executor_catalogs: dict[str, Catalog] = {}
_executor_lock = threading.Lock()


def executor_catalog(url: str) -> Catalog:
    """The catalog a Spark task uses: one per URL in this process, kept open across
    tasks (Spark reuses its Python workers), with a pool of at most
    `EXECUTOR_POOL_SIZE + EXECUTOR_MAX_OVERFLOW` connections; so a cluster holds a bounded
    number of catalog connections (that times its executor cores), and a task does not pay
    for a new pool and the migration check. Callers must not close it."""
    from shoal.catalog.sql import SqlCatalog

    with _executor_lock:
        catalog = _executor_catalogs.pop(url, None)
        if catalog is None:
            catalog = SqlCatalog(url, pool_size=EXECUTOR_POOL_SIZE,
                                 max_overflow=EXECUTOR_MAX_OVERFLOW)
        _executor_catalogs[url] = catalog       # most recently used last
        while len(_executor_catalogs) > EXECUTOR_CATALOGS:
            _executor_catalogs.pop(next(iter(_executor_catalogs))).close()
        return catalog


__all__ = ["EXECUTOR_CATALOGS", "EXECUTOR_MAX_OVERFLOW", "EXECUTOR_POOL_SIZE",
           "executor_catalog", "open_catalog"]
