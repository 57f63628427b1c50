"""What the query lane needs of an open shoal, as a protocol.

`shoal.client.Shoal` is the implementation; the query lane sits below the client in the
layers (SPEC §11), so it names only these members and never imports the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shoal.catalog.base import Catalog, TableInfo
from shoal.config import Config
from shoal.format.base import SegmentFormat
from shoal.storage.base import ObjectStore
from shoal.types import Column, SchemaMode


class Database(Protocol):
    """An open catalog + object store + formats, and the table operations DDL runs."""

    @property
    def config(self) -> Config: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def store(self) -> ObjectStore: ...

    @property
    def formats(self) -> dict[str, SegmentFormat]: ...

    def create_table(self, name: str, columns: Sequence[Column], *,
                     mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo: ...

    def add_columns(self, name: str, columns: Sequence[Column]) -> TableInfo: ...

    def describe(self, name: str) -> dict[str, Any]: ...

    def tables(self) -> list[dict[str, Any]]: ...
