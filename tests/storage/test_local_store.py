"""LocalObjectStore beyond the contract: crash safety, durability, temp-file hygiene."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from shoal.errors import ObjectNotFoundError, StorageError
from shoal.storage import LocalObjectStore

KEY = "tables/t/extents/e.tlm"


def test_failed_rename_keeps_the_old_object_and_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put(KEY, b"old")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(errno.EIO, "simulated I/O error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StorageError, match="tables/t/extents/e.tlm"):
        store.put(KEY, b"new" * 1000)
    with pytest.raises(StorageError):
        store.put("tables/t/extents/other.tlm", b"never visible")
    monkeypatch.undo()

    assert store.get(KEY) == b"old"
    assert not store.exists("tables/t/extents/other.tlm")
    assert os.listdir(tmp_path / "tables/t/extents") == ["e.tlm"]


# The child dies by SIGKILL after the temporary file is written and fsynced, before the
# rename: exactly the window a crash of a real writer can hit.
_CRASH_MID_PUT = """
import os, signal, sys
from shoal.storage.local import LocalObjectStore
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)
LocalObjectStore(sys.argv[1]).put(sys.argv[2], b"x" * 100_000)
"""


def test_crash_mid_put_leaves_no_visible_object(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", _CRASH_MID_PUT, str(tmp_path), KEY],
                          timeout=60)
    assert proc.returncode == -9

    leftovers = os.listdir(tmp_path / "tables/t/extents")
    assert len(leftovers) == 1 and leftovers[0].startswith(".e.tlm.")   # the orphan temp
    assert not store.exists(KEY)
    with pytest.raises(ObjectNotFoundError):
        store.get(KEY)
    assert list(store.list()) == []

    store.put(KEY, b"after the crash")
    assert [info.path for info in store.list()] == [KEY]
    assert store.get(KEY) == b"after the crash"
    with pytest.raises(ValueError):          # temp names are not addressable keys
        store.get(f"tables/t/extents/{leftovers[0]}")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name fds")
def test_put_fsyncs_file_and_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalObjectStore(str(tmp_path))
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    store.put("new/folder/k", b"durable")
    folder = str(tmp_path / "new/folder")
    assert any(p.startswith(f"{folder}/.k.") for p in synced)   # the data, before the rename
    assert synced[-1] == folder                                  # the rename, after it
    assert str(tmp_path / "new") in synced                       # the folder it created
    assert str(tmp_path) in synced


def test_rewrites_of_different_sizes_are_atomic(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    small, large = b"s" * 1000, b"L" * (2 << 20)
    store.put("hot", small)
    stop = threading.Event()
    bad: list[int] = []
    seen = {small: 0, large: 0}

    def reader() -> None:
        while not stop.is_set():
            data = store.get("hot")
            if data in seen:
                seen[data] += 1
            else:
                bad.append(len(data))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    # Rewrites go on until the readers have read both sizes several times (state, not a
    # time budget); the count of writes only guards against a hang.
    try:
        i = 0
        while i < 20_000 and not (i >= 20 and min(seen.values()) >= 3):
            store.put("hot", large if i % 2 == 0 else small)
            i += 1
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert bad == []
    assert min(seen.values()) > 0, seen       # both sizes were really read


def test_key_under_an_existing_object_is_a_storage_error(tmp_path: Path) -> None:
    # S3 allows both `a` and `a/b`; a directory tree cannot. shoal's key layout never does it.
    store = LocalObjectStore(str(tmp_path))
    store.put("a", b"file")
    with pytest.raises(StorageError, match="a/b"):
        store.put("a/b", b"under a file")
    assert store.get("a") == b"file"
    assert not store.exists("a/b")
