"""Bloom filters: no false negatives, ~1% false positives, stable bytes and hashes."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.format.membership import BloomFilter, hash_array, hash_value

INT64 = st.integers(-2**63, 2**63 - 1)
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30)


def test_hashes_are_pinned() -> None:
    # Filters live in the catalog for as long as their extents: the hash must never drift.
    assert hash_value("abc") == (15333103449656313765, 16334390624741519340)
    assert hash_value(5) == (4198381161108342465, 15530420428824387187)
    assert hash_value(-1) == (9517277821987196326, 13186276352328531211)
    assert hash_value("") == (15015281676176048985, 14549219686523014483)


def test_int_and_string_hash_differently() -> None:
    assert hash_value(5) != hash_value("5")
    assert BloomFilter.build([5]).might_contain(5)
    with pytest.raises(TypeError):
        hash_value(True)
    with pytest.raises(TypeError):
        hash_value(1.5)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(st.lists(INT64, max_size=40), st.lists(TEXT, max_size=40))
def test_vectorised_hash_matches_scalar(ints: list[int], texts: list[str]) -> None:
    for arr, values in ((pa.array(ints, pa.int64()), ints), (pa.array(texts, pa.string()), texts)):
        h1, h2 = hash_array(arr)
        assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [hash_value(v) for v in values]
    small = [v for v in ints if -2**31 <= v < 2**31]
    h1, _ = hash_array(pa.array(small, pa.int32()))           # int32 widens to the same hash
    assert [int(a) for a in h1] == [hash_value(v)[0] for v in small]


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.lists(INT64, max_size=300), st.lists(TEXT, max_size=300)))
def test_no_false_negatives(values: list[int] | list[str]) -> None:
    for bf in (BloomFilter.build(values), BloomFilter.build(pa.array(values))):
        again = BloomFilter.from_bytes(bf.to_bytes())
        assert all(again.might_contain(v) for v in values)


def test_false_positive_rate_and_size() -> None:
    present = [f"trace-{i:08x}" for i in range(20_000)]
    bf = BloomFilter.from_bytes(BloomFilter.build(pa.array(present)).to_bytes())
    assert all(bf.might_contain(v) for v in present)
    fp = sum(bf.might_contain(f"absent-{i}") for i in range(10_000)) / 10_000
    assert fp <= 0.02
    assert bf.k == 7 and 9 * 20_000 <= bf.m <= 10 * 20_000   # ~1% sizing: 9.6 bits/value
    ints = BloomFilter.build(pa.array(np.arange(20_000, dtype=np.int64) * 3))
    assert sum(ints.might_contain(i * 3 + 1) for i in range(10_000)) / 10_000 <= 0.02


def test_duplicates_do_not_inflate_the_filter() -> None:
    a = BloomFilter.build(pa.array(["x", "y"] * 5000))
    assert a.m == BloomFilter.build(["x", "y"]).m
    from_hashes = BloomFilter.from_hashes(*hash_array(pa.array(["x", "y"] * 50)))
    assert from_hashes.to_bytes() == a.to_bytes()


def test_bytes_layout_and_errors() -> None:
    bf = BloomFilter.build(["a", "b", "c"])
    blob = bf.to_bytes()
    assert blob[:4] == b"SHBF" and blob[4] == 1 and blob[5] == bf.k
    assert int.from_bytes(blob[8:16], "little") == bf.m
    assert len(blob) == 16 + (bf.m + 7) // 8
    for bad in (b"", blob[:10], b"XXXX" + blob[4:], blob[:4] + b"\x09" + blob[5:], blob[:-1]):
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(bad)
    empty = BloomFilter.build([])
    assert not empty.might_contain("a") and not empty.might_contain(0)
    assert not bf.might_contain(2**70)          # cannot be in an int64 column


def test_build_is_fast() -> None:
    values = pa.array([f"{i:032x}" for i in range(100_000)])
    BloomFilter.build(values.slice(0, 1000))
    start = time.perf_counter()
    BloomFilter.build(values)
    assert time.perf_counter() - start < 0.5    # target ~50 ms; generous for loaded CI hosts
