"""The transactional catalog (SPEC §6.2): protocol, SQL implementation, stage-1 pruning."""

import time

from shoal.catalog.base import (Catalog, Clock, LedgerEntry, LedgerKeyExistsError, LedgerRecord,
                                ManifestEntry, PlanResult, Snapshot, SourceOffset, TableInfo,
                                WorkUnit)


def open_catalog(url: str, *, clock: Clock = time.time) -> Catalog:
    """A catalog for `sqlite:///path` or `postgresql://...` (migrated to the current version),
    reading the time from `clock` (see `Clock`)."""
    from shoal.catalog.sql import SqlCatalog

    return SqlCatalog(url, clock=clock)


__all__ = ["Catalog", "Clock", "LedgerEntry", "LedgerKeyExistsError", "LedgerRecord",
           "ManifestEntry", "PlanResult", "Snapshot", "SourceOffset", "TableInfo", "WorkUnit",
           "open_catalog"]
