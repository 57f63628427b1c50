"""`LocalObjectStore`: the object store as a directory tree (`file:///abs/dir`).

Contract (on top of `shoal.storage.base.ObjectStore`):
- A key `a/b/c` is the file `<root>/a/b/c`; folders are created on demand and never pruned
  (pruning would race a concurrent `put` into the same folder).
- `put` is atomic and durable: the bytes go to `.<name>.<uuid hex>.tmp` in the target's
  folder, are fsynced, `os.replace`d over the target, and the folder is fsynced (so are
  folders the put had to create). A reader sees the old object or the new one, whole.
- A crash mid-put can leave a temporary file behind; `list`, `exists` and `get` never show
  it, and a key shaped like one is rejected with `ValueError`.
- `open_input` is a `pyarrow.MemoryMappedFile`: zero-copy, thread-safe `read_at`. Objects
  are immutable once visible, and a replace swaps the inode, so an open map stays valid.
- Missing objects (and folders named as objects) raise `ObjectNotFoundError`; other OS
  failures raise `StorageError` naming the key.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from shoal.errors import ObjectNotFoundError, StorageError
from shoal.storage.base import ObjectInfo, check_key, check_prefix

log = logging.getLogger(__name__)

_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp\Z")


class LocalObjectStore:
    """Objects as files under `root` (an absolute directory; relative paths are resolved)."""

    def __init__(self, root: str) -> None:
        self._root = os.path.abspath(root)

    @property
    def root(self) -> str:
        return self._root

    @property
    def url(self) -> str:
        return Path(self._root).as_uri()

    def __repr__(self) -> str:
        return f"LocalObjectStore({self._root!r})"

    # ---- writes ----------------------------------------------------------------------------

    def put(self, path: str, data: bytes | bytearray | memoryview | pa.Buffer) -> None:
        target = self._file(path)
        view = memoryview(data).cast("B")   # TypeError for non-buffers, before touching disk
        folder, name = os.path.split(target)
        with _storage_errors("put", path, missing_is_not_found=False):
            self._make_folders(folder)
            temp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                try:
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temp, target)
            except BaseException:
                _unlink_quietly(temp)
                raise
            _fsync_folder(folder)

    def delete(self, path: str) -> None:
        target = self._file(path)
        with _storage_errors("delete", path, missing_is_not_found=False):
            try:
                os.unlink(target)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return      # nothing there, or a folder: not an object either way
            _fsync_folder(os.path.dirname(target))

    # ---- reads -----------------------------------------------------------------------------

    def get(self, path: str) -> bytes:
        target = self._file(path)
        with _storage_errors("get", path), open(target, "rb") as f:
            return f.read()

    def get_range(self, path: str, offset: int, length: int) -> bytes:
        target = self._file(path)
        _check_range(offset, length)
        with _storage_errors("get_range", path), open(target, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def size(self, path: str) -> int:
        return self._stat(path).st_size

    def open_input(self, path: str) -> pa.NativeFile:
        target = self._file(path)
        with _storage_errors("open_input", path):
            if os.path.isdir(target):
                raise ObjectNotFoundError(path)
            return pa.memory_map(target, "r")

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._file(path))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        start = prefix.rpartition("/")[0]     # deepest folder that holds every match
        pending = [start]
        while pending:
            rel = pending.pop()
            try:
                with os.scandir(os.path.join(self._root, rel)) as entries:
                    found = list(entries)
            except (FileNotFoundError, NotADirectoryError):
                continue        # no such folder, or removed while we walked
            except OSError as exc:
                raise StorageError(f"list {prefix!r} under {self._root}: {exc}") from exc
            for entry in found:
                key = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if key.startswith(prefix) or prefix.startswith(key + "/"):
                        pending.append(key)
                elif key.startswith(prefix) and not _TEMP_NAME.match(entry.name):
                    try:
                        st = entry.stat()
                    except FileNotFoundError:
                        continue    # deleted since the scan
                    yield ObjectInfo(path=key, size=st.st_size, mtime_ns=st.st_mtime_ns)

    # ---- helpers ---------------------------------------------------------------------------

    def _file(self, path: str) -> str:
        check_key(path)
        if _TEMP_NAME.match(path.rpartition("/")[2]):
            raise ValueError(f"object key looks like a temporary file of a put: {path!r}")
        return os.path.join(self._root, *path.split("/"))

    def _stat(self, path: str) -> os.stat_result:
        target = self._file(path)
        with _storage_errors("stat", path):
            st = os.stat(target)
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFoundError(path)
        return st

    def _make_folders(self, folder: str) -> None:
        missing: list[str] = []
        while not os.path.isdir(folder):
            missing.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        for created in reversed(missing):
            # a concurrent put may make it (if it is a file, the open that follows fails)
            with contextlib.suppress(FileExistsError):
                os.mkdir(created)
            _fsync_folder(os.path.dirname(created))


def _check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"offset and length must be >= 0, got offset={offset} length={length}")


@contextmanager
def _storage_errors(op: str, path: str, *, missing_is_not_found: bool = True) -> Iterator[None]:
    try:
        yield
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        if missing_is_not_found:
            raise ObjectNotFoundError(path) from exc
        raise StorageError(f"{op} {path!r}: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"{op} {path!r}: {exc}") from exc


def _fsync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):   # some filesystems refuse; fine
            raise
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    """Remove a temporary file after a failed write; the write's own error is what matters."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as e:
        log.warning("could not remove the temporary file %s: %s", path, e)
