"""The object-store protocol: the only place extent bytes live (SPEC §1, §6).

Paths are relative keys with `/` separators (`tables/<table_id>/extents/<uuid>.tlm`), never
absolute, never starting with `/`. A `put` is atomic: readers see the whole object or none
of it (local: write to a temporary name, fsync, rename; S3: a single PUT). Implementations
live in `shoal.storage.local` and `shoal.storage.s3`; `shoal.storage.open_store(url)` picks
one from a URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import pyarrow as pa


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    path: str       # relative key, as given to put()
    size: int       # bytes
    mtime_ns: int   # last modification, ns since the epoch (used by orphan GC's grace period)


@runtime_checkable
class ObjectStore(Protocol):
    @property
    def url(self) -> str:
        """The URL this store was opened from (`file:///...` or `s3://bucket/prefix`)."""
        ...

    def put(self, path: str, data: bytes | bytearray | memoryview | pa.Buffer) -> None:
        """Write an object atomically, replacing any object at `path`."""
        ...

    def get(self, path: str) -> bytes:
        """The whole object. Raises `ObjectNotFoundError`."""
        ...

    def get_range(self, path: str, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (fewer at the end of the object)."""
        ...

    def size(self, path: str) -> int:
        ...

    def open_input(self, path: str) -> pa.NativeFile:
        """A seekable random-access file; reads on it are range reads on remote stores."""
        ...

    def exists(self, path: str) -> bool:
        ...

    def delete(self, path: str) -> None:
        """Remove an object; deleting a missing object is not an error."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose key starts with `prefix` (recursively), in no given order."""
        ...
