"""Fixtures for the format tests.

`MemoryObjectStore` is a TEST DOUBLE: a dict-backed `ObjectStore` so format unit tests run
without a filesystem. The real stores are covered by tests/storage (the contract suite).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from shoal.errors import ObjectNotFoundError
from shoal.storage.base import ObjectInfo, check_key


class MemoryObjectStore:
    """Test double: objects in a dict; `open_input` is a `pa.BufferReader` over the bytes."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.puts = 0

    @property
    def url(self) -> str:
        return "memory://"

    def put(self, path: str, data: bytes | bytearray | memoryview | pa.Buffer) -> None:
        self.objects[check_key(path)] = bytes(memoryview(data))
        self.puts += 1

    def get(self, path: str) -> bytes:
        try:
            return self.objects[path]
        except KeyError:
            raise ObjectNotFoundError(path) from None

    def get_range(self, path: str, offset: int, length: int) -> bytes:
        return self.get(path)[offset:offset + length]

    def size(self, path: str) -> int:
        return len(self.get(path))

    def open_input(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(pa.py_buffer(self.get(path)))

    def exists(self, path: str) -> bool:
        return path in self.objects

    def delete(self, path: str) -> None:
        self.objects.pop(path, None)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for k, v in list(self.objects.items()):
            if k.startswith(prefix):
                yield ObjectInfo(k, len(v), 0)


@pytest.fixture
def store() -> MemoryObjectStore:
    return MemoryObjectStore()
