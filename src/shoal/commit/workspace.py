"""What an open shoal offers the layers above the commit layer, as a protocol.

`shoal.client.Shoal` is the implementation. The query lane and maintenance sit below the
client in the layers, so they name these members (and what they add: `Database`,
`MaintenanceHost`) and never import the client.
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
