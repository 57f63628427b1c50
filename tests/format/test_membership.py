"""Bloom filters: no false negatives, ~1% false positives, stable bytes and hashes."""

from __future__ import annotations


import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.format import membership
from shoal.format.membership import (INT_K1, INT_K2, STR_K1, STR_K2, STR_LEN, STR_POS,
                                     BloomFilter, hash_array, hash_value, hash_value_v1)

INT64 = st.integers(-2**63, 2**63 - 1)
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30)
M64 = (1 << 64) - 1


def _mix(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def reference_hash(value: int | str) -> tuple[int, int]:
    """Hash version 2 in plain Python integers, straight from the module docstring."""
    if isinstance(value, int):
        u = value & M64
        return _mix(u ^ INT_K1), _mix(u ^ INT_K2) | 1
    raw = value.encode("utf-8")
    words = [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)] or [0]
    acc = sum(_mix(w ^ ((STR_POS * (j + 1)) & M64)) for j, w in enumerate(words)) & M64
    base = (acc + len(raw) * STR_LEN) & M64
    return _mix(base ^ STR_K1), _mix(base ^ STR_K2) | 1


def test_hashes_are_pinned() -> None:
    # Filters live in the catalog for as long as their extents: the hash must never drift.
    pinned = {"abc": (9673315759947043915, 2025389301542534247),
              5: (10976539945877964888, 14106883880788278625),
              -1: (3002701955108872896, 5967317153905806419),
              "": (15879386012126259251, 6923563125719358361),
              "trace-00000001": (9587146056467442415, 11323861651846463689),
              2**63 - 1: (11544723487922429755, 6500923113366366329),
              -2**63: (661615523132938665, 4650020586771995285)}
    for value, expected in pinned.items():
        assert hash_value(value) == reference_hash(value) == expected


@settings(max_examples=80, deadline=None)
@given(st.lists(INT64, max_size=30),
       st.lists(st.one_of(TEXT, st.text(max_size=80), st.sampled_from(["", "a" * 8, "b" * 16])),
                max_size=30))
def test_numpy_hash_matches_the_reference(ints: list[int], texts: list[str]) -> None:
    for arr, values in ((pa.array(ints, pa.int64()), ints), (pa.array(texts, pa.string()), texts),
                        (pa.array(texts, pa.large_string()), texts)):
        h1, h2 = hash_array(arr)
        assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [reference_hash(v) for v in values]
    # fixed-width strings take a 2-D fast path; it must agree too
    for width in (0, 5, 8, 16, 21):
        fixed = [(t * width)[:width] if t else "x" * width for t in texts if t.isascii()]
        h1, _ = hash_array(pa.array(fixed, pa.string()))
        assert [int(a) for a in h1] == [reference_hash(v)[0] for v in fixed]


def test_large_arrays_hash_in_chunks_identically() -> None:
    values = [f"id-{i}" + "x" * (i % 11) for i in range(150_000)]
    arr = pa.array(values)
    h1, h2 = hash_array(arr)
    for lo in (0, 65_535, 65_536, 149_999):
        assert (int(h1[lo]), int(h2[lo])) == reference_hash(values[lo])
    sliced = hash_array(arr.slice(70_000, 1000))[0]
    assert (sliced == h1[70_000:71_000]).all()
    with_nulls = hash_array(pa.array(["a", None, "b"]))[0]
    assert [int(x) for x in with_nulls] == [reference_hash("a")[0], reference_hash("b")[0]]


def test_version_1_filters_stay_readable() -> None:
    values = [f"trace-{i}" for i in range(500)] + list(range(500))
    m, k = BloomFilter.shape_for(len(values))
    bits = np.zeros(m, dtype=bool)
    for v in values:                     # how version 1 filters were built
        h1, h2 = hash_value_v1(v)
        for i in range(k):
            bits[((h1 + i * h2) & M64) % m] = True
    blob = BloomFilter(m, k, np.packbits(bits, bitorder="little"), version=1).to_bytes()
    assert blob[4] == 1
    old = BloomFilter.from_bytes(blob)
    assert old.version == 1 and all(old.might_contain(v) for v in values)
    assert sum(old.might_contain(f"absent-{i}") for i in range(2000)) / 2000 <= 0.03
    assert hash_value_v1("abc") == (15333103449656313765, 16334390624741519340)


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


@pytest.mark.slow
def test_false_positive_rate_and_size() -> None:
    present = [f"trace-{i:08x}" for i in range(20_000)]
    bf = BloomFilter.from_bytes(BloomFilter.build(pa.array(present)).to_bytes())
    assert all(bf.might_contain(v) for v in present)
    fp = sum(bf.might_contain(f"absent-{i}") for i in range(50_000)) / 50_000
    assert fp <= 0.002                                # default 0.1%
    assert bf.k == 10 and 14 * 20_000 <= bf.m <= 15 * 20_000  # 0.1% sizing: 14.4 bits/value
    ints = BloomFilter.build(pa.array(np.arange(20_000, dtype=np.int64) * 3))
    assert sum(ints.might_contain(i * 3 + 1) for i in range(50_000)) / 50_000 <= 0.002
    one_pct = BloomFilter.build(pa.array(present), fp_rate=0.01)
    assert one_pct.k == 7 and 9 * 20_000 <= one_pct.m <= 10 * 20_000  # 9.6 bits/value
    assert sum(one_pct.might_contain(f"absent-{i}") for i in range(10_000)) / 10_000 <= 0.02


def test_duplicates_do_not_inflate_the_filter() -> None:
    a = BloomFilter.build(pa.array(["x", "y"] * 5000))
    assert a.m == BloomFilter.build(["x", "y"]).m
    from_hashes = BloomFilter.from_hashes(*hash_array(pa.array(["x", "y"] * 50)))
    assert from_hashes.to_bytes() == a.to_bytes()


def test_bytes_layout_and_errors() -> None:
    bf = BloomFilter.build(["a", "b", "c"])
    blob = bf.to_bytes()
    assert blob[:4] == b"SHBF" and blob[4] == 2 and blob[5] == bf.k
    assert int.from_bytes(blob[8:16], "little") == bf.m
    assert len(blob) == 16 + (bf.m + 7) // 8
    for bad in (b"", blob[:10], b"XXXX" + blob[4:], blob[:4] + b"\x09" + blob[5:], blob[:-1]):
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(bad)
    empty = BloomFilter.build([])
    assert not empty.might_contain("a") and not empty.might_contain(0)
    assert not bf.might_contain(2**70)          # cannot be in an int64 column


def test_mixed_value_lists() -> None:
    bf = BloomFilter.build([1, "1", 2, None, "x"])
    assert all(bf.might_contain(v) for v in (1, "1", 2, "x"))
    with pytest.raises(TypeError):
        BloomFilter.build([1.5])


def test_sizing_estimate_for_many_hashes() -> None:
    # Above 2^17 hashes the distinct count is a HyperLogLog estimate: close, never below
    # ~97% of the truth, so the false-positive rate holds.
    rng = np.random.default_rng(3)
    ints = rng.integers(0, 300_000, 900_000)
    h1, h2 = hash_array(pa.array(ints))
    bf = BloomFilter.from_hashes(h1, h2)
    exact_m, _ = BloomFilter.shape_for(len(np.unique(ints)))
    assert 0.99 * exact_m <= bf.m <= 1.08 * exact_m
    absent = pa.array(np.arange(10**9, 10**9 + 20_000))
    assert sum(bf.might_contain(int(v)) for v in absent.to_pylist()[:5000]) / 5000 <= 0.02


def test_filters_of_2_to_the_32_bits_probe_with_a_division(monkeypatch) -> None:
    # Such filters are too big for a test: lower the threshold to take that path.
    monkeypatch.setattr(membership, "_SMALL_M", 64)
    values = [f"id-{i}" for i in range(3000)] + list(range(3000))
    bf = BloomFilter.from_bytes(BloomFilter.build(values).to_bytes())
    assert bf.m > 64 and all(bf.might_contain(v) for v in values)
    assert sum(bf.might_contain(f"no-{i}") for i in range(3000)) / 3000 <= 0.02


def test_filters_from_parts_equal_filters_from_one_array() -> None:
    rng = np.random.default_rng(2)
    parts = [hash_array(pa.array(rng.integers(0, 10**6, n))) for n in (70_000, 10, 0, 90_000)]
    joined = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    assert (BloomFilter.from_hash_parts(parts).to_bytes()
            == BloomFilter.from_hashes(*joined).to_bytes())


needs_kernels = pytest.mark.skipif(membership._kernels is None,
                                   reason="the C kernels are not built")


@needs_kernels
@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(TEXT, st.text(max_size=80), st.sampled_from(["", "a" * 8, "b" * 16])),
                max_size=40), st.integers(0, 5))
def test_the_c_hash_equals_numpys(texts: list[str], cut: int) -> None:
    """The kernel (`_kernels.string_hashes`) against the numpy form it stands in for."""
    arr = pa.array(texts, pa.string()).slice(min(cut, len(texts)))
    fast = hash_array(arr)
    kernels, membership._kernels = membership._kernels, None
    try:
        ref = hash_array(arr)
    finally:
        membership._kernels = kernels
    assert (fast[0] == ref[0]).all() and (fast[1] == ref[1]).all()


@needs_kernels
@pytest.mark.parametrize("small_m", [membership._SMALL_M, 64])
def test_the_c_filter_bits_equal_numpys(small_m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_kernels.bloom_insert` sets exactly numpy's bits, on both probe rules."""
    monkeypatch.setattr(membership, "_SMALL_M", small_m)
    rng = np.random.default_rng(5)
    parts = [hash_array(pa.array(rng.integers(0, 10**7, n))) for n in (70_000, 3, 0)]
    parts.append(hash_array(pa.array([f"t{i}" * (i % 5) for i in range(20_000)])))
    fast = BloomFilter.from_hash_parts(parts, fp_rate=0.01).to_bytes()
    monkeypatch.setattr(membership, "_kernels", None)
    assert BloomFilter.from_hash_parts(parts, fp_rate=0.01).to_bytes() == fast
