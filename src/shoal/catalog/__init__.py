"""The transactional catalog (SPEC §6.2): protocol, SQL implementation, stage-1 pruning."""

from shoal.catalog.base import (Catalog, LedgerEntry, LedgerKeyExistsError, LedgerRecord,
                                ManifestEntry, PlanResult, Snapshot, SourceOffset, TableInfo,
                                WorkUnit)


def open_catalog(url: str) -> Catalog:
    """A catalog for `sqlite:///path` or `postgresql://...` (migrated to the current version)."""
    from shoal.catalog.sql import SqlCatalog

    return SqlCatalog(url)


__all__ = ["Catalog", "LedgerEntry", "LedgerKeyExistsError", "LedgerRecord", "ManifestEntry",
           "PlanResult", "Snapshot", "SourceOffset", "TableInfo", "WorkUnit", "open_catalog"]
