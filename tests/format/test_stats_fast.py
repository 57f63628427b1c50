"""The cheaper ways the writer's stats are found give exactly what the plain ways
give: skeleton classes through digit classes, tokens through distinct pieces, and an
overflowing string block hashed instead of unique'd (see also test_stats_golden.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shoal.format.jsonpaths as jsonpaths
from shoal.format._buffers import string_buffers
from shoal.format.jsonpaths import (DynamicColumn, digit_classes, exact_json_paths,
                                    grouped_skeleton_classes, json_skeletons,
                                    numpy_digit_classes, paths_of, skeleton_classes)
import shoal.format.stats as stats_module
from shoal.format.stats import ExtentStatsBuilder
from shoal.format.tokens import tokenize, tokenize_array
from shoal.types import DYNAMIC, STRING, Column, Schema

# Keys and values with digits where they matter (keys differing only in digits), beside
# quotes, backslashes, brackets, colons and whitespace.
KEY_CHARS = st.sampled_from(['a', '0', '1', '9', '"', '\\', '{', '}', ':', ',', ' ', '\n',
                             '\u00e9', '.'])
KEYS = st.text(alphabet=KEY_CHARS, max_size=4)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                 st.floats(allow_nan=False, allow_infinity=False),
                 st.text(alphabet=KEY_CHARS, max_size=6))
DOCS = st.recursive(LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=10)
DUMPS = st.sampled_from([
    lambda d: json.dumps(d), lambda d: json.dumps(d, separators=(",", ":")),
    lambda d: json.dumps(d, indent=1), lambda d: json.dumps(d, separators=(" , ", " : ")),
    lambda d: json.dumps(d, ensure_ascii=False)])
RAW = st.sampled_from([b"", b":1", b'{"a', b'{"k1": 2', b'"x"', b"12", b'{"a":"b\\"1"}'])


def _plain(values: pa.Array) -> tuple[list[bytes], list[int]] | None:
    skeletons = json_skeletons(values)
    if skeletons is None:
        return None
    distinct, first = skeleton_classes(skeletons)
    return distinct.to_pylist(), first.tolist()


def _grouped(values: pa.Array) -> tuple[list[bytes], list[int]] | None:
    got = grouped_skeleton_classes(values)
    return None if got is None else (got[0].to_pylist(), got[1].tolist())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(KEYS, DOCS, max_size=4), DOCS), min_size=1,
                max_size=30), DUMPS, st.lists(st.integers(0, 10**6), max_size=30),
       st.lists(RAW, max_size=2))
def test_digit_classes_give_the_skeleton_classes(docs: list[Any], dump: Any,
                                                 numbers: list[int], raw: list[bytes]) -> None:
    # The same documents again with other numbers (same digit class, or not), and keys that
    # differ only in digits ("k1", "k2": one digit class, two skeletons).
    more = [{"n": n, f"k{n % 3}": {"v": str(n)}} for n in numbers]
    values = pa.array([dump(d).encode() for d in docs + more + docs], pa.binary())
    assert _grouped(values) == _plain(values)
    with_raw = pa.array(values.to_pylist() + raw, pa.binary())
    assert _grouped(with_raw) == _plain(with_raw)


def test_digit_classes() -> None:
    values = pa.array([b'{"a":1}', b'{"a":23}', b'{"a":2}', b'{"b":1}', b'{"a1":5}',
                       b'{"a2":7}'], pa.binary())
    codes, first = digit_classes(values)
    assert codes.tolist() == [0, 1, 0, 2, 3, 3] and first.tolist() == [0, 1, 3, 4]
    distinct, at, n = grouped_skeleton_classes(values)
    assert distinct.to_pylist() == [b'{"a"}', b'{"b"}', b'{"a1"}', b'{"a2"}']
    assert at.tolist() == [0, 3, 4, 5] and n == 4


@settings(max_examples=40, deadline=None)
@given(st.lists(st.dictionaries(KEYS, DOCS, max_size=4), min_size=1, max_size=20),
       st.integers(1, 7))
def test_dynamic_column_paths_over_blocks(docs: list[Any], block: int) -> None:
    """Paths of a column fed block by block (digit grouping on, then off once values differ
    in more than digits) equal those of parsing every value."""
    values = [json.dumps(d).encode() for d in docs] * 3
    dyn = DynamicColumn()
    for lo in range(0, len(values), block):
        dyn.add(pa.array(values[lo:lo + block], pa.binary()))
    assert dyn.paths == exact_json_paths(pa.array(values, pa.binary()))
    assert dyn.paths == set().union(*(paths_of(d) for d in docs))


WORDY = st.text(alphabet=st.sampled_from(list("abZ09 -_.:\t\n\r\x0b\x0c\x01\x1f\u00e9\u212a")),
                max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), WORDY), max_size=40), st.integers(0, 6))
def test_tokens_of_pieces_are_the_reference_tokens(values: list[str | None], cut: int) -> None:
    arr = pa.array(values, pa.string())
    expected = set().union(*(tokenize(v) for v in values if v is not None))
    got = tokenize_array(arr).to_pylist()
    assert sorted(got) == sorted(expected)
    assert set(tokenize_array(arr.slice(cut)).to_pylist()) == set().union(
        *(tokenize(v) for v in values[cut:] if v is not None))


def _builder_stats(blocks: list[list[str | None]]) -> Any:
    schema = Schema.create([Column("s", STRING), Column("d", DYNAMIC)]).arrow()
    builder = ExtentStatsBuilder(schema)
    stats = [builder.add_block(pa.RecordBatch.from_pydict(
        {"_timestamp": pa.array([0] * len(b), pa.timestamp("ns", tz="UTC")),
         "props": pa.array([None] * len(b), pa.binary()), "s": b,
         "d": pa.array([None] * len(b), pa.binary())}, schema=schema)) for b in blocks]
    return stats, builder.finish()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.integers(4001, 9000), st.integers(0, 1200),
       st.booleans())
def test_overflow_without_unique_equals_unique_first(seed: int, rows: int, before: int,
                                                     spaced: bool) -> None:
    """A string block that overflows in its first 4,000 values: same stats, filters and
    block filters as with `unique` first (the probe turned off), whatever the distinct set
    held before it and whether its values are identifiers."""
    rng = np.random.default_rng(seed)
    first = [f"v{int(i)}" for i in rng.integers(0, max(1, before), 3000)]
    sep = " " if spaced else "-"
    second = [None if i % 29 == 0 else f"id{sep}{int(j)}"
              for i, j in enumerate(rng.integers(0, 10**6, rows))]
    blocks = [first, second, second[: rows // 2]]
    fast = _builder_stats(blocks)
    old_probe = stats_module._OVERFLOW_PROBE
    stats_module._OVERFLOW_PROBE = 10**9        # never probe: `unique` first
    try:
        slow = _builder_stats(blocks)
    finally:
        stats_module._OVERFLOW_PROBE = old_probe
    assert fast == slow


# -- digit classes: the C kernel against its numpy reference -----------------------------------

# Bytes next to the digits on both sides, and bytes whose low seven bits are a digit's.
CLASS_BYTES = st.sampled_from([0x2F, 0x30, 0x31, 0x35, 0x39, 0x3A, 0x61, 0x22, 0x00, 0x7F,
                               0x80, 0xB0, 0xB9, 0xFF])
CLASS_VALUES = st.lists(st.binary(max_size=0) | st.lists(CLASS_BYTES, max_size=19).map(bytes),
                        max_size=40)


@settings(max_examples=300, deadline=None)
@given(CLASS_VALUES, st.data())
def test_the_c_digit_classes_are_the_numpy_ones(values: list[bytes], data: st.DataObject
                                                ) -> None:
    arr = pa.array(values + values[::-1], pa.binary())   # every class seen twice at least
    if len(arr):
        lo = data.draw(st.integers(0, len(arr) - 1))
        arr = arr.slice(lo, data.draw(st.integers(0, len(arr) - lo)))
    codes, first = digit_classes(arr)
    want_codes, want_first = numpy_digit_classes(arr)
    assert codes.tolist() == want_codes.tolist()
    assert first.tolist() == want_first.tolist()


# Long values: a few shapes of about the 512 bytes whose canonical words the kernel keeps
# (over it, it lexes the class's first value again to compare), differing in digits or not.
LONG_VALUES = st.lists(st.tuples(st.sampled_from([504, 511, 512, 513, 520, 1030]),
                                 st.sampled_from([b"a1", b"a2", b"b1", b'"9']),
                                 st.integers(0, 3)).map(
    lambda t: (t[1] * (t[0] // 2 + 1))[:t[0] - 1] + bytes([0x30 + t[2]])), max_size=30)


@settings(max_examples=200, deadline=None)
@given(LONG_VALUES, CLASS_VALUES)
def test_the_c_digit_classes_of_long_values_are_the_numpy_ones(long: list[bytes],
                                                               short: list[bytes]) -> None:
    arr = pa.array(long + short + long[::-1], pa.binary())
    codes, first = digit_classes(arr)
    want_codes, want_first = numpy_digit_classes(arr)
    assert codes.tolist() == want_codes.tolist()
    assert first.tolist() == want_first.tolist()


def _canon_state(prefix: bytes, length: int) -> int:
    """`canon_hash`'s state after the whole 8-byte words of `prefix`, for a value of
    `length` bytes (a Python replica of _kernels.c, as `_canon_hash` below)."""
    m = (1 << 64) - 1
    h = (length * 0x9E3779B97F4A7C15) & m
    for i in range(0, len(prefix), 8):
        word = bytes(0x30 if 0x30 <= b <= 0x39 else b for b in prefix[i:i + 8])
        h = ((h ^ int.from_bytes(word, "little")) * 0xBF58476D1CE4E5B9) & m
        h ^= h >> 29
    return h


@pytest.mark.skipif(jsonpaths._kernels is None, reason="the C kernels are not built")
@pytest.mark.parametrize("length", [16, 512, 528])
def test_values_whose_hashes_are_equal_stay_in_their_classes(length: int) -> None:
    """Pairs of values of other classes with the same 64-bit hash in the kernel (the last
    word chosen to cancel the difference): only the exact comparison tells them apart, from
    the kept canonical words (512 bytes and less) or by lexing again (longer)."""
    values = []
    for k in range(8):
        one = bytes([0x41 + k]) + b"a" * (length - 9)
        other = bytes([0x61 + k]) + b"a" * (length - 9)
        target = _canon_state(one, length) ^ int.from_bytes(b"zzzzzzzz", "little") \
            ^ _canon_state(other, length)
        last = target.to_bytes(8, "little")
        if any(0x30 <= b <= 0x39 for b in last):
            continue                  # a digit would read as 0: not the word needed
        values += [one + b"zzzzzzzz", other + last]
        assert _canon_hash(values[-2]) == _canon_hash(values[-1])
    assert len(values) >= 8
    arr = pa.array(values + values[::-1], pa.binary())
    codes, first = digit_classes(arr)
    assert codes.tolist()[:len(values)] == list(range(len(values)))  # each its own class
    assert codes.tolist() == numpy_digit_classes(arr)[0].tolist()


def test_digit_classes_by_hand() -> None:
    values = pa.array([b"", b"a1", b"a9", b"\xb1", b"\xb2", b"12345678901", b"98765432109",
                       b"12345678a01", b""], pa.binary())
    codes, first = digit_classes(values)
    # "" | a1 = a9 | \xb1 (high bit: no digit) | \xb2 | the 11 digits | digits and a letter
    assert codes.tolist() == [0, 1, 1, 2, 3, 4, 4, 5, 0]
    assert first.tolist() == [0, 1, 3, 4, 5, 7]


def _canon_hash(value: bytes) -> int:
    """`canon_hash` of _kernels.c in Python (to choose values that collide in its table)."""
    m = (1 << 64) - 1

    def canon(chunk: bytes) -> int:
        return int.from_bytes(bytes(0x30 if 0x30 <= b <= 0x39 else b for b in chunk), "little")

    def mix64(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    h = (len(value) * 0x9E3779B97F4A7C15) & m
    full = len(value) // 8 * 8
    for i in range(0, full, 8):
        h = ((h ^ canon(value[i:i + 8])) * 0xBF58476D1CE4E5B9) & m
        h ^= h >> 29
    if full < len(value):
        h = ((h ^ canon(value[full:])) * 0x94D049BB133111EB) & m
    return mix64(h)


@pytest.mark.skipif(jsonpaths._kernels is None, reason="the C kernels are not built")
def test_values_chosen_to_collide_go_to_numpy() -> None:
    """Values whose classes share one slot of the kernel's table: past a bounded number of
    probes the kernel gives up and numpy finds the classes (no quadratic time), same ones."""
    colliding = [v for v in (f"v{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}"
                             f"{chr(97 + i // 676 % 26)}{chr(97 + i // 17576)}".encode()
                             for i in range(26 ** 4))
                 if _canon_hash(v) & 1023 == 5][:200]
    assert len(colliding) == 200
    arr = pa.array(colliding, pa.binary())
    offsets, data = string_buffers(arr)
    assert jsonpaths._kernels.digit_classes(offsets, data,
                                            np.empty(len(arr), dtype=np.int32)) is None
    codes, first = digit_classes(arr)
    assert codes.tolist() == list(range(200)) and first.tolist() == list(range(200))


# -- string bounds: the C kernel against Arrow's min_max ---------------------------------------

# Prefixes of each other, NUL and the bytes around it, multi-byte characters (UTF-8 orders as
# code points do), values about 8 bytes long (the kernel compares 8-byte keys first) and past
# the 256-byte cap.
BOUND_TEXT = st.one_of(
    st.lists(st.sampled_from(["a", "b", "\x00", "\x01", "\x7f", "\u00e9", "\u212a",
                              "\U0001f600", "aaaaaaaa"]), max_size=8).map("".join),
    st.integers(250, 260).map(lambda n: "y" * n))


@pytest.mark.skipif(stats_module._kernels is None, reason="the C kernels are not built")
@settings(max_examples=400, deadline=None)
@given(st.lists(BOUND_TEXT, min_size=1, max_size=30), st.data())
def test_string_bounds_are_arrows_min_max(values: list[str], data: st.DataObject) -> None:
    arr = pa.array(values, pa.string())
    lo = data.draw(st.integers(0, len(arr) - 1))
    arr = arr.slice(lo, data.draw(st.integers(1, len(arr) - lo)))
    kept = values[lo:lo + len(arr)]
    got = stats_module.string_bounds(arr)
    if max(len(v.encode()) for v in kept) > stats_module.STRING_MINMAX_CAP:
        assert got == {"min": None, "max": None}
    else:
        mm = pc.min_max(arr)
        assert got == {"min": mm["min"].as_py(), "max": mm["max"].as_py()}
        assert got == {"min": min(kept), "max": max(kept)}
    # the block stat takes the kernel without nulls and Arrow with them: the same answer
    with_null = pa.concat_arrays([arr, pa.array([None], pa.string())])
    assert stats_module.column_block_stat(with_null, "str") == dict(
        stats_module.column_block_stat(arr, "str"), nulls=1)


def test_a_dynamic_block_probed_distinct_still_finds_every_path() -> None:
    """A block whose first 4,096 values are all distinct skips `unique` (the probe), and a
    key that shows up only near its end, and only in repeated values, is still found: the
    same paths as with `unique` first."""
    values = [json.dumps({"user": {"id": i}}).encode() for i in range(9000)]
    values += [b'{"late":{"key":1}}'] * 500
    arr = pa.array(values, pa.binary())
    probed = DynamicColumn()
    probed.add(arr)
    assert probed.mostly_distinct           # the probe found the block mostly distinct
    old = jsonpaths._DISTINCT_PROBE
    jsonpaths._DISTINCT_PROBE = 10**9       # never probe: `unique` first
    try:
        plain = DynamicColumn()
        plain.add(arr)
    finally:
        jsonpaths._DISTINCT_PROBE = old
    assert probed.paths == plain.paths == {"user", "user.id", "late", "late.key"}
