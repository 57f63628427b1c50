"""The object-store protocol: the only place extent bytes live (docs/storage.md).

Paths are relative keys with `/` separators (`tables/<table_id>/extents/<uuid>.tlm`), never
absolute, never starting with `/`. A `put` is atomic: readers see the whole object or none
of it (local: write to a temporary name, fsync, rename; S3: a single PUT). Implementations
live in `shoal.storage.local` and `shoal.storage.s3`; `shoal.storage.open_store(url)` picks
one from a URL.

Keys are checked by `check_key` / `check_prefix`: an invalid key (empty, absolute, `.`/`..`/
empty segments, backslashes, NUL) is a misuse of the API and raises `ValueError`.
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
        """`length` bytes from `offset` (fewer at the end, none past it); both must be >= 0."""
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


# ---- key rules shared by every implementation ---------------------------------------------

def check_key(path: str) -> str:
    """Return `path` if it is a valid object key, else raise `ValueError`."""
    if not isinstance(path, str):
        raise TypeError(f"object key must be str, not {type(path).__name__}")
    if not path:
        raise ValueError("object key must not be empty")
    _check_segments(path, path.split("/"), what="object key")
    return path


def check_prefix(prefix: str) -> str:
    """Return `prefix` if it is a valid listing prefix (`""`, `a/`, `a/b`), else `ValueError`."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be str, not {type(prefix).__name__}")
    if prefix:
        segments = prefix.split("/")
        if segments[-1] == "":      # "tables/" lists everything under a folder
            segments.pop()
        _check_segments(prefix, segments, what="prefix")
    return prefix


def _check_segments(value: str, segments: list[str], *, what: str) -> None:
    if value.startswith("/"):
        raise ValueError(f"{what} must be relative, got {value!r}")
    if "\\" in value or "\x00" in value:
        raise ValueError(f"{what} must not contain backslashes or NUL: {value!r}")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise ValueError(f"{what} has an empty, '.' or '..' segment: {value!r}")
