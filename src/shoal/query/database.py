"""What the query lane needs of an open shoal, as a protocol (`shoal.catalog.workspace`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shoal.catalog.base import TableInfo
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
