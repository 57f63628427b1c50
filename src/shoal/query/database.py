"""What the query lane needs of an open shoal, as a protocol (`shoal.catalog.workspace`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from shoal.catalog.base import ManifestEntry, Snapshot, TableInfo
from shoal.catalog.workspace import Workspace
from shoal.types import Column, ColumnType, SchemaMode


class Database(Workspace, Protocol):
    """A workspace and the table operations DDL runs."""

    def create_table(self, name: str, columns: Sequence[Column], *,
                     mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo: ...

    def add_columns(self, name: str, columns: Sequence[Column]) -> TableInfo: ...

    def rename_column(self, name: str, old: str, new: str) -> TableInfo: ...

    def drop_column(self, name: str, column: str) -> TableInfo: ...

    def alter_column_type(self, name: str, column: str, new_type: ColumnType) -> TableInfo: ...

    def set_properties(self, name: str, properties: dict[str, Any]) -> TableInfo: ...

    def rename_table(self, name: str, new_name: str) -> TableInfo: ...

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool: ...

    def undrop_table(self, name: str) -> TableInfo: ...

    def describe(self, name: str) -> dict[str, Any]: ...

    def tables(self) -> list[dict[str, Any]]: ...

    @property
    def stage_rewrite(self) -> Callable[..., ManifestEntry]:
        """The write side's function that writes an extent's rows left after a delete as a
        new extent, not committed (`shoal.commit.stage_rewrite`; picklable by reference)."""
        ...

    def replace_extents(self, name: str,
                        changes: Sequence[tuple[ManifestEntry, ManifestEntry | None, int]], *,
                        operation: str, summary: dict[str, Any],
                        on_stage: Callable[..., None] | None = None) -> Snapshot | None:
        """Commit, as one snapshot, each (old extent, its rewrite or None, rows dropped)
        change, all of them or none: None when an old extent is no longer live (the new
        extents are then deleted)."""
        ...
