"""What an open shoal offers the layers above the catalog, as a protocol.

`shoal.client.Shoal` is the implementation. The query lane (read side) and maintenance (write
side) both sit below the client in the layers, so they name these members (and what they
add: `Database`, `MaintenanceHost`) and never import the client. It lives here, the lowest
layer that sees a catalog, a store and formats together, so the read side needs nothing of
the write side's commit layer.
"""

from __future__ import annotations

from typing import Protocol

from shoal.catalog.base import Catalog
from shoal.config import Config
from shoal.format.base import SegmentFormat
from shoal.storage.base import ObjectStore


class Workspace(Protocol):
    """An open catalog, object store and extent formats, with the settings they came from."""

    @property
    def config(self) -> Config: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def store(self) -> ObjectStore: ...

    @property
    def formats(self) -> dict[str, SegmentFormat]: ...
