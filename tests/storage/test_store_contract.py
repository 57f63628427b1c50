"""One contract suite for every ObjectStore: a local directory and the S3 (moto) server."""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from shoal.errors import ObjectNotFoundError, StorageError
from shoal.storage import ObjectStore, open_store

MB = 1 << 20


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return open_store((tmp_path / "objects").as_uri())
    s3_store: ObjectStore = request.getfixturevalue("s3_store")
    return s3_store


def _payload(n: int, seed: int = 0) -> bytes:
    # Position-dependent bytes, so a range from the wrong offset cannot match by accident.
    block = bytes((i * 31 + seed) % 251 for i in range(251 * 16))
    return (block * (n // len(block) + 1))[:n]


def test_is_an_object_store(store: ObjectStore) -> None:
    assert isinstance(store, ObjectStore)
    assert store.url.startswith(("file:///", "s3://"))


_DATA = _payload(1000)
PAYLOADS: dict[str, Callable[[], Any]] = {
    "bytes": lambda: _DATA,
    "bytearray": lambda: bytearray(_DATA),
    "memoryview-slice": lambda: memoryview(b"xx" + _DATA)[2:],
    "pa.Buffer": lambda: pa.py_buffer(_DATA),
    "empty": lambda: b"",
    "8MB": lambda: _payload(8 * MB, seed=7),
}


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_put_get_round_trip(store: ObjectStore, kind: str) -> None:
    data = PAYLOADS[kind]()
    expected = bytes(data)
    store.put("tables/t/extents/x.tlm", data)
    assert store.get("tables/t/extents/x.tlm") == expected
    assert store.size("tables/t/extents/x.tlm") == len(expected)
    assert store.exists("tables/t/extents/x.tlm")


def test_odd_but_valid_keys(store: ObjectStore) -> None:
    keys = ["with space/ü=1+2.tlm", "dots.in.name/.hidden", "a-b_c/~tilde%25"]
    for key in keys:
        store.put(key, key.encode())
    for key in keys:
        assert store.get(key) == key.encode()
    assert sorted(info.path for info in store.list()) == sorted(keys)


def test_overwrite_replaces_whole_object(store: ObjectStore) -> None:
    store.put("k", b"a much longer first version")
    store.put("k", b"short")
    assert store.get("k") == b"short"
    assert store.size("k") == 5


def test_get_range(store: ObjectStore) -> None:
    data = _payload(1000)
    store.put("r", data)
    assert store.get_range("r", 100, 50) == data[100:150]      # middle
    assert store.get_range("r", 0, 1000) == data
    assert store.get_range("r", 950, 100) == data[950:]        # tail: fewer bytes
    assert store.get_range("r", 999, 1) == data[999:]
    assert store.get_range("r", 1000, 10) == b""               # at the end
    assert store.get_range("r", 5000, 10) == b""               # past the end
    assert store.get_range("r", 10, 0) == b""
    with pytest.raises(ValueError):
        store.get_range("r", -1, 10)
    with pytest.raises(ValueError):
        store.get_range("r", 0, -1)


def test_exists_and_size(store: ObjectStore) -> None:
    assert not store.exists("a/b")
    store.put("a/b", b"12345")
    assert store.exists("a/b")
    assert store.size("a/b") == 5
    assert not store.exists("a")          # a "folder" is not an object
    with pytest.raises(ObjectNotFoundError):
        store.size("a")
    with pytest.raises(ObjectNotFoundError):
        store.get("a")
    with pytest.raises(ObjectNotFoundError):
        store.open_input("a")


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("d/x", b"x")
    store.put("d/y", b"y")
    store.delete("d/x")
    assert not store.exists("d/x")
    with pytest.raises(ObjectNotFoundError):
        store.get("d/x")
    store.delete("d/x")
    store.delete("never/was/here")
    store.delete("d")                     # a "folder": not an object, nothing happens
    assert store.get("d/y") == b"y"
    store.delete("d/y")
    assert list(store.list()) == []       # no leftovers (pyarrow's S3 folder markers)


def test_list(store: ObjectStore) -> None:
    before_ns = time.time_ns()
    objects = {
        "tables/t1/extents/a.tlm": 10,
        "tables/t1/extents/b.tlm": 0,
        "tables/t1/deep/er/c": 3,
        "tables/t10/y": 7,
        "tables/t2/x": 5,
        "top": 1,
    }
    for key, n in objects.items():
        store.put(key, _payload(n))

    infos = {info.path: info for info in store.list()}
    assert {k: i.size for k, i in infos.items()} == objects
    after_ns = time.time_ns()
    for info in infos.values():           # S3 has 1 s resolution; allow clock skew
        assert before_ns - 5 * 10**9 <= info.mtime_ns <= after_ns + 5 * 10**9

    def keys(prefix: str) -> set[str]:
        return {info.path for info in store.list(prefix)}

    assert keys("") == set(objects)
    assert keys("tables/t1/") == {"tables/t1/extents/a.tlm", "tables/t1/extents/b.tlm",
                                  "tables/t1/deep/er/c"}
    assert keys("tables/t1") == keys("tables/t1/") | {"tables/t10/y"}   # a string prefix
    assert keys("tables/t1/extents/a") == {"tables/t1/extents/a.tlm"}
    assert keys("tables/t2/x") == {"tables/t2/x"}
    assert keys("t") == set(objects)
    assert keys("nothing/here/") == set()
    assert keys("tables/t3") == set()


def test_open_input_is_random_access(store: ObjectStore) -> None:
    data = _payload(MB, seed=3)
    store.put("f", data)
    with store.open_input("f") as f:
        assert isinstance(f, pa.NativeFile)
        assert f.seekable()
        assert f.size() == len(data)
        f.seek(1000)
        assert f.read(10) == data[1000:1010]
        assert f.tell() == 1010
        assert f.read_at(100, 500_000) == data[500_000:500_100]
        f.seek(len(data) - 5)
        assert f.read() == data[-5:]


@pytest.mark.parametrize("op", ["get", "get_range", "size", "open_input"])
def test_missing_object(store: ObjectStore, op: str) -> None:
    call: dict[str, Callable[[], object]] = {
        "get": lambda: store.get("no/such/key"),
        "get_range": lambda: store.get_range("no/such/key", 0, 10),
        "size": lambda: store.size("no/such/key"),
        "open_input": lambda: store.open_input("no/such/key"),
    }
    with pytest.raises(ObjectNotFoundError) as info:
        call[op]()
    assert info.value.path == "no/such/key"
    assert isinstance(info.value, StorageError)
    assert not store.exists("no/such/key")


INVALID_KEYS = ["", "/abs", "/", "a/../b", "..", "../a", "a\\b", "a//b", "a/", "./a", "a/./b",
                "nul\x00"]


@pytest.mark.parametrize("key", INVALID_KEYS)
def test_invalid_keys_are_rejected(store: ObjectStore, key: str) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.put(key, b"x"),
        lambda: store.get(key),
        lambda: store.get_range(key, 0, 1),
        lambda: store.size(key),
        lambda: store.open_input(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()


@pytest.mark.parametrize("prefix", ["/x", "../x", "a/../b", "a//", "a\\b"])
def test_invalid_list_prefix_is_rejected(store: ObjectStore, prefix: str) -> None:
    with pytest.raises(ValueError):
        list(store.list(prefix))


def test_store_pickles(store: ObjectStore) -> None:
    store.put("p", b"pickled")
    clone = pickle.loads(pickle.dumps(store))
    assert clone.url == store.url
    assert clone.get("p") == b"pickled"


def test_concurrent_puts_of_distinct_keys_all_land(store: ObjectStore) -> None:
    threads, per_thread = 8, 5
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                store.put(f"c/{t}/{i}", _payload(1000 + t * 10 + i, seed=t))
        except BaseException as exc:     # surfaced below, not lost in the thread
            errors.append(exc)

    pool = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert errors == []
    listed = {info.path: info.size for info in store.list("c/")}
    assert listed == {f"c/{t}/{i}": 1000 + t * 10 + i
                      for t in range(threads) for i in range(per_thread)}
    for t in range(threads):
        for i in range(per_thread):
            assert store.get(f"c/{t}/{i}") == _payload(1000 + t * 10 + i, seed=t)


def test_readers_see_whole_objects_during_rewrites(store: ObjectStore) -> None:
    one, two = b"1" * MB, b"2" * MB
    store.put("hot", one)
    stop = threading.Event()
    bad: list[str] = []
    seen: dict[bytes, int] = {one: 0, two: 0}

    def check(data: bytes, how: str) -> None:
        if data in seen:
            seen[data] += 1
        else:
            bad.append(f"{how}: {len(data)} bytes, starting {data[:1]!r}, ending {data[-1:]!r}")

    def read_whole() -> None:
        while not stop.is_set():
            check(store.get("hot"), "get")

    def read_via_file() -> None:
        while not stop.is_set():
            with store.open_input("hot") as f:
                check(f.read(), "open_input")

    def lister() -> None:
        while not stop.is_set():
            paths = [info.path for info in store.list()]
            if paths != ["hot"]:
                bad.append(f"list: {paths}")

    readers = [threading.Thread(target=fn) for fn in (read_whole, read_whole, read_via_file,
                                                      lister)]
    for th in readers:
        th.start()
    # Rewrites go on until the readers have really read both versions, several times each
    # (state, not a time budget); the count of writes only guards against a hang.
    try:
        writes = 0
        while writes < 20_000 and not (writes >= 20 and min(seen[one], seen[two]) >= 3):
            store.put("hot", two if writes % 2 == 0 else one)
            writes += 1
    finally:
        stop.set()
        for th in readers:
            th.join()
    assert bad == []
    assert seen[one] > 0 and seen[two] > 0, seen     # both versions were really read


def test_object_larger_than_a_multipart_part(store: ObjectStore) -> None:
    # 12 MB crosses pyarrow's S3 multipart part size; locally it is just a big file.
    data = os.urandom(12 * MB)
    store.put("big", data)
    assert store.size("big") == len(data)
    assert store.get_range("big", 11 * MB, MB) == data[11 * MB:]
    assert store.get("big") == data
