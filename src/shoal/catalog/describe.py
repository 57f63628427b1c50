"""The describe document of a table, shared by the HTTP API (`GET /v1/tables/{t}`) and the
CLI (`shoal describe`)."""

from __future__ import annotations

from typing import Any

from shoal.catalog.base import Catalog
from shoal.masking import mask_properties


def describe_table(catalog: Catalog, name: str) -> dict[str, Any]:
    info = catalog.load_table(name)
    rows, extents = catalog.table_counts(name)
    return {
        "name": info.name,
        "schema_version": info.schema.version,
        "mode": info.mode,
        "retention": info.properties.get("retention"),
        "columns": [{"name": c.name, "type": str(c.type), "nullable": c.nullable,
                     "header": c.header, **({"default": c.default} if c.default is not None
                                           else {})}
                    for c in info.schema.columns],
        "snapshot_id": info.current_snapshot_id,
        "row_count": rows,
        "extent_count": extents,
        "properties": mask_properties(info.properties),
    }
