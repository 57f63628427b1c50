"""Present paths of dynamic columns (extent stats), found while an extent is written.

For each dynamic column (field metadata `shoal.type` = `dynamic`, values JSON bytes) the
sorted dotted paths of object keys present anywhere ("a", "a.b"; arrays are leaves). Exact,
never a subset: the catalog prunes extents that lack a path. A column found to hold a value
that is not JSON is left out (paths unknown: keep). Values are grouped by key skeleton (a
numpy lexer, `json_skeletons`) and one value per skeleton is parsed, since the paths depend
on nothing else. `DynamicColumn` folds in one block at a time for `ExtentStatsBuilder`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from shoal.format._buffers import string_buffers as _string_buffers
from shoal.format._ext import kernels as _kernels

logger = logging.getLogger(__name__)

_SMALL_JSON_SET = 512      # at most this many distinct JSON values: json.loads each

# ---- present paths of dynamic columns -----------------------------------------------------

def paths_of(doc: Any) -> set[str]:
    """Dotted paths of the object keys in one parsed JSON value (the reference rule)."""
    out: set[str] = set()
    stack = [(doc, "")] if isinstance(doc, dict) else []
    while stack:
        obj, prefix = stack.pop()
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            if isinstance(value, dict):
                stack.append((value, path))
    return out


class _Unparsable(Exception):
    """A dynamic value that is not JSON we can parse: the column's paths are unknown."""


def _paths_of_json(raw: bytes) -> set[str]:
    try:
        return paths_of(json.loads(raw))
    except (ValueError, RecursionError):
        raise _Unparsable from None


def _schema_paths(fields: Iterator[pa.Field] | pa.Schema, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for f in fields:
        path = f"{prefix}.{f.name}" if prefix else f.name
        out.add(path)
        if pa.types.is_struct(f.type):
            out |= _schema_paths(iter(f.type), path)
    return out


def json_paths(values: pa.Array) -> set[str] | None:
    """Paths present in any value of a binary array of JSON texts; None if some value is
    found not to be JSON (coercion never writes one), since then no exact answer exists.

    The values are first grouped by key skeleton (`json_skeletons`); one value per skeleton
    is parsed (`exact_json_paths`), since values with equal skeletons have equal paths.
    """
    if values.null_count:
        values = pc.drop_null(values)
    skeletons = json_skeletons(values)
    if skeletons is None:
        return None
    _, first = skeleton_classes(skeletons)
    return exact_json_paths(values.take(pa.array(first, type=pa.int64())))


def exact_json_paths(values: pa.Array) -> set[str] | None:
    """`json_paths` by parsing every value (the reference the skeleton grouping relies on).

    Objects go through Arrow's JSON reader in one call: the inferred schema's struct fields
    are exactly the keys present anywhere. Where inference fails (a key that is an object in
    one value and a number in another) each value is parsed with `json.loads` instead.
    """
    try:
        return _json_paths(values)
    except _Unparsable:
        return None


# Key skeletons. The paths of a JSON text depend only on its objects, arrays and keys, never
# on scalar values or whitespace. A value's *skeleton* keeps exactly those tokens: every
# bracket ({ } [ ]) outside a string and every key string literal (a string followed, after
# optional whitespace, by a colon), byte for byte, in order; everything else is dropped.
# `{"http": {"method": "GET"}, "user_id": 17}` -> `{"http"{"method"}"user_id"}`. For valid
# JSON the skeleton is a serialisation of the value's tree with its scalars erased (a key is
# always followed by its value: a bracket for a container, else the next key or the closing
# brace), so equal skeletons mean equal paths, and only one value per distinct skeleton
# needs parsing. Typical telemetry has a handful of skeletons per block however many
# distinct values it has.
#
# The lexer works like simdjson's stage 1, vectorised with numpy over all values of a block
# at once, on bitmaps (bit i of the uint64 word i >> 6 stands for byte i): quotes, minus
# escaped ones (after an odd run of backslashes); their inclusive prefix XOR marks the inside
# of strings (opening quote included, closing quote not). A key's closing quote is followed,
# after whitespace, by a colon; its literal is found by filling back from the closing quote
# through the string (log-step fills over the bitmaps). Brackets outside strings and key
# literals are kept. Every value must hold an even number of unescaped quotes (valid JSON
# does): otherwise, and for an empty value or one starting with a colon, the answer is None
# (so a key's colon is always in the key's own value). Other invalid JSON is
# noticed only when its skeleton's representative is parsed: an invalid value that shares a
# skeleton with a valid one adds that one's paths -- the paths of every parseable value are
# still all listed.

_ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _pack(mask: np.ndarray, nwords: int) -> np.ndarray:
    """A bool array as a bitmap of `nwords` little-endian uint64 words (bit i = byte i)."""
    packed = np.packbits(mask, bitorder="little")
    out = np.zeros(nwords * 8, dtype=np.uint8)
    out[:packed.size] = packed
    return out.view("<u8")


def _prefix_xor(words: np.ndarray) -> np.ndarray:
    """Inclusive prefix XOR over all bits of a bitmap (bit i = parity of set bits 0..i)."""
    x = words.copy()
    tmp = np.empty_like(x)
    for shift in (1, 2, 4, 8, 16, 32):
        np.left_shift(x, np.uint64(shift), out=tmp)
        x ^= tmp
    counts = np.bitwise_count(words).astype(np.int64)
    odd_before = ((np.cumsum(counts) - counts) & 1).astype(bool)
    x[odd_before] ^= _ALL_ONES
    return x


def _down(x: np.ndarray, s: int) -> np.ndarray:
    """The bitmap moved s bits towards position 0: bit p of the result is bit p + s of x."""
    words, bits = divmod(s, 64)
    out = np.zeros_like(x)
    if words >= x.size:
        return out
    src = x[words:]
    if bits == 0:
        out[:src.size] = src
    else:
        out[:src.size] = src >> np.uint64(bits)
        out[:src.size - 1] |= src[1:] << np.uint64(64 - bits)
    return out


def _up(x: np.ndarray) -> np.ndarray:
    """The bitmap moved one bit away from position 0: bit p + 1 of the result is bit p."""
    out = x << np.uint64(1)
    out[1:] |= x[:-1] >> np.uint64(63)
    return out


def _fill_down(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    """g extended towards position 0 through runs of p: bit i is set if some j >= i has g's
    bit set and p's bits i..j-1 are all set (Kogge-Stone, log steps in the longest run)."""
    s = 1
    while p.any():
        g = g | (p & _down(g, s))
        p = p & _down(p, s)
        s *= 2
    return g


def _count_before(words: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Set bits of a bitmap before each position (positions < 64 * len(words))."""
    counts = np.bitwise_count(words).astype(np.int64)
    cum = np.zeros(words.size + 1, dtype=np.int64)
    np.cumsum(counts, out=cum[1:])
    wi = positions >> 6
    low = (np.uint64(1) << (positions & 63).astype(np.uint64)) - np.uint64(1)
    return cum[wi] + np.bitwise_count(words[wi] & low).astype(np.int64)


_LEX_CHUNK = 1 << 23      # bytes lexed per step (bounds temporaries)


def json_skeletons(values: pa.Array) -> pa.Array | None:
    """The key skeleton (see above) of each value of a binary array without nulls, as a
    large_binary array; None if some value is certainly not JSON (empty, starting with a
    colon, or an odd number of unescaped quotes)."""
    if values.null_count:
        raise ValueError("json_skeletons needs an array without nulls")
    n = len(values)
    if n == 0:
        return pa.array([], type=pa.large_binary())
    offsets, data = _string_buffers(values)
    if not np.all(offsets[1:] > offsets[:-1]):
        return None                                       # an empty value
    # Whole values per step, about _LEX_CHUNK bytes each (a longer value is a step alone).
    cuts = np.unique(np.searchsorted(offsets, np.arange(0, data.size, _LEX_CHUNK), "right") - 1)
    cuts = np.append(cuts[cuts < n], n)
    kept: list[np.ndarray] = []
    lengths = np.empty(n, dtype=np.int64)
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        a, b = int(offsets[lo]), int(offsets[hi])
        found = _lex(offsets[lo:hi + 1] - a, data[a:b])
        if found is None:
            return None
        kept.append(found[0])
        lengths[lo:hi] = found[1]
    skeleton_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=skeleton_offsets[1:])
    body = kept[0] if len(kept) == 1 else np.concatenate(kept)
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(skeleton_offsets), pa.py_buffer(body)])


def _lex(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Kept bytes and skeleton length per value of some non-empty values (offsets from 0)."""
    size = data.size
    nwords = size // 64 + 1                               # room for position `size`
    quotes = data == 34
    backslashes = data == 92
    if backslashes.any():
        # A quote right after an odd run of backslashes (within one value) is escaped.
        value_start = np.zeros(size + 1, dtype=np.bool_)
        value_start[offsets] = True
        pos = np.flatnonzero(backslashes)
        breaks = np.flatnonzero((np.diff(pos) != 1) | value_start[pos[1:]])
        run_ends = np.append(pos[breaks], pos[-1])
        run_starts = np.insert(pos[breaks + 1], 0, pos[0])
        escaped = run_ends[((run_ends - run_starts) & 1) == 0] + 1     # odd run lengths
        quotes[escaped[~value_start[escaped]]] = False
    q = _pack(quotes, nwords)
    if np.any(np.diff(_count_before(q, offsets)) & 1) or np.any(data[offsets[:-1]] == 58):
        return None                       # odd quotes, or a value starting with a colon
    in_string = _prefix_xor(q)            # opening quote .. just before the closing quote
    outside = ~in_string
    colons = _pack(data == 58, nwords) & outside
    closing = q & outside
    key_close = closing & _down(colons, 1)
    if np.any(colons & ~_up(closing)):
        # Some colon is not right after a closing quote (whitespace between, or invalid
        # JSON): fill back from each colon through the whitespace before it, within its
        # value (a value's first byte never links to the previous value).
        starts = np.zeros(nwords * 64, dtype=np.bool_)
        starts[offsets[:-1]] = True
        not_start = ~_pack(starts, nwords)
        colon_run = _fill_down(colons & not_start,
                               _pack(data <= 32, nwords) & outside & not_start)
        key_close = closing & _down(colon_run, 1)
    key_literal = _fill_down(_down(key_close, 1) & in_string, in_string) | key_close
    folded = data | np.uint8(0x20)                        # [ -> {, ] -> }
    folded -= np.uint8(0x7B)
    folded &= np.uint8(0xFD)                              # 0 exactly for { and }
    keep = (_pack(folded == 0, nwords) & outside) | key_literal
    mask = pa.BooleanArray.from_buffers(pa.bool_(), size, [None, pa.py_buffer(keep)])
    kept = pc.filter(pa.array(data, type=pa.uint8()), mask)
    return kept.to_numpy(), np.diff(_count_before(keep, offsets))


def skeleton_classes(skeletons: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct skeletons, in order of first occurrence, and that first index of each."""
    encoded = pc.dictionary_encode(skeletons)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    if codes.size == 0:
        return encoded.dictionary, np.zeros(0, dtype=np.int64)
    # Codes are handed out in order of first occurrence: a first occurrence is a new maximum.
    new = np.empty(codes.size, dtype=np.bool_)
    new[0] = True
    np.greater(codes[1:], np.maximum.accumulate(codes)[:-1], out=new[1:])
    return encoded.dictionary, np.flatnonzero(new)


def _first_occurrences(codes: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each code, codes being handed out in order of first
    occurrence (as `dictionary_encode` does): a first occurrence is a new maximum."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.empty(codes.size, dtype=np.bool_)
    new[0] = True
    np.greater(codes[1:], np.maximum.accumulate(codes)[:-1], out=new[1:])
    return np.flatnonzero(new)


# Digit classes. A value's skeleton depends on its bytes that are not ASCII digits (quotes,
# backslashes, colons, brackets, whitespace decide what is a key literal and what is a
# bracket outside strings), plus the digits inside its key literals. Values equal once every
# digit is read as "0" (same length, same non-digit bytes at the same places) therefore
# have their key literals at the same places, and the same skeleton unless a key literal
# holds a digit -- which shows in the skeleton of any one of them (its digits are at the
# same places in all). So one value per such class is lexed, and only the members of a class
# whose skeleton holds a digit are lexed one by one. Telemetry whose values differ in ids,
# counts and durations (numbers, or digits in strings) has few classes per block.

def digit_classes(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(class code of each value, index of the first value of each class) of a binary array
    without nulls, values being in one class when equal with every ASCII digit read as 0.
    Codes are numbered in order of first occurrence. One pass of the C kernel where it is
    built (`digit_classes` in _kernels.c), else `numpy_digit_classes`."""
    if _kernels is not None:
        offsets, data = _string_buffers(values)
        codes = np.empty(len(values), dtype=np.int32)
        first = _kernels.digit_classes(offsets, data, codes)
        if first is not None:
            return codes, np.frombuffer(first, dtype=np.int64)
        logger.info("values collide in the C kernel's class table: numpy finds the classes")
    return numpy_digit_classes(values)


def numpy_digit_classes(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """`digit_classes` by numpy and Arrow (the reference the C kernel is tested against)."""
    offsets, data = _string_buffers(values)
    canon = data.copy()
    canon[(data - np.uint8(48)) < 10] = 48
    large = data.size >= 2**31
    canonical = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), len(values),
        [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
         pa.py_buffer(canon)])
    codes = pc.dictionary_encode(canonical).indices.to_numpy(zero_copy_only=False)
    return codes, _first_occurrences(codes)


def grouped_skeleton_classes(values: pa.Array
                             ) -> tuple[pa.Array, np.ndarray, int] | None:
    """`skeleton_classes(json_skeletons(values))` -- the distinct skeletons, in order of first
    occurrence, and that first index of each -- lexing one value per digit class (and the
    values of classes whose key literals hold digits), and the number of digit classes; None
    where `json_skeletons` is None (its conditions hold for a whole digit class or for none
    of it)."""
    if len(values) == 0:
        return (*skeleton_classes(pa.array([], type=pa.large_binary())), 0)
    codes, first = digit_classes(values)
    heads = values.take(pa.array(first, type=pa.int64()))
    head_skeletons = json_skeletons(heads)
    if head_skeletons is None:
        return None
    offsets, data = _string_buffers(head_skeletons)
    digit_at = np.flatnonzero((data - np.uint8(48)) < 10)
    keyed = np.unique(np.searchsorted(offsets, digit_at, "right") - 1)   # heads with digit keys
    if keyed.size == 0:
        candidates, skeletons = first, head_skeletons
    else:
        # Every value of those classes, with the other classes' heads, in value order.
        take = np.isin(codes, keyed)
        take[first] = True
        candidates = np.flatnonzero(take)
        skeletons = json_skeletons(values.take(pa.array(candidates, type=pa.int64())))
        if skeletons is None:     # cannot happen: the heads were fine
            return None
    distinct, at = skeleton_classes(skeletons)
    return distinct, candidates[at], int(first.size)


def _json_paths(values: pa.Array) -> set[str]:
    if values.null_count:
        values = pc.drop_null(values)
    if len(values) <= _SMALL_JSON_SET:
        return set().union(*(_paths_of_json(v) for v in values.to_pylist()))
    starts_object = pc.starts_with(values, "{")
    objects = values.filter(starts_object)
    out: set[str] = set()
    # Values that are not compact objects: scalars and arrays have no paths; an object with
    # leading whitespace is parsed on its own.
    for v in values.filter(pc.invert(starts_object)).to_pylist():
        if v.lstrip()[:1] == b"{":
            out |= _paths_of_json(v)
    if len(objects) == 0:
        return out
    longest = pc.max(pc.binary_length(objects)).as_py()
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(objects)], pa.int32()),
                                                     objects.cast(pa.binary())), b"\n")
    multiline = pc.any(pc.match_substring(objects, "\n")).as_py()
    try:
        table = pa_json.read_json(
            pa.BufferReader(joined[0].as_buffer()),
            read_options=pa_json.ReadOptions(block_size=max(1 << 20, 2 * longest + 2)),
            parse_options=pa_json.ParseOptions(newlines_in_values=bool(multiline)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return out.union(*(_paths_of_json(v) for v in objects.to_pylist()))
    return out | _schema_paths(table.schema)


_SEEN_SKELETONS_CAP = 100_000
_DISTINCT_PROBE = 4096      # a block's first values that show it to be mostly distinct


@dataclass
class DynamicColumn:
    """Present paths of one dynamic column (None: unknown), fed block by block.

    A block's distinct values are taken first (`pc.unique`) unless the previous block, or the
    block's own first `_DISTINCT_PROBE` values, showed them to be mostly distinct; they are
    grouped by key skeleton, and one value per skeleton not seen in an earlier block is
    parsed. The skeletons are found by lexing one value per digit class
    (`grouped_skeleton_classes`) until a block shows its values to differ in more than
    digits, then by lexing every value. A column whose skeletons are mostly distinct (keys
    that are ids) stops paying for the grouping: its later blocks are parsed whole.
    """

    paths: set[str] | None = field(default_factory=set)
    seen: set[bytes] = field(default_factory=set)
    grouping: bool = True
    mostly_distinct: bool = False
    digit_grouping: bool = True

    def add(self, arr: pa.Array) -> None:
        if self.paths is None:
            return
        if arr.null_count:
            arr = pc.drop_null(arr)
        values = len(arr)
        if values == 0:
            return
        if not self.mostly_distinct:
            if (values > 2 * _DISTINCT_PROBE
                    and 2 * len(pc.unique(arr.slice(0, _DISTINCT_PROBE))) > _DISTINCT_PROBE):
                # Its first values are mostly distinct already: `unique` of the block would
                # cost more than it saves (the paths are the same either way).
                self.mostly_distinct = True
            else:
                arr = pc.unique(arr)
                self.mostly_distinct = len(arr) > values // 2
        if self.grouping:
            if self.digit_grouping:
                grouped = grouped_skeleton_classes(arr)
                classes = None if grouped is None else grouped[:2]
                if grouped is not None and grouped[2] > len(arr) // 2:
                    self.digit_grouping = False     # values differ beyond digits
            else:
                skeletons = json_skeletons(arr)
                classes = None if skeletons is None else skeleton_classes(skeletons)
            if classes is None:
                self.paths = None
                return
            distinct, first = classes
            if len(distinct) > len(arr) // 2:
                self.grouping = False
            fresh = [i for i, sk in zip(first.tolist(), distinct.to_pylist(), strict=True)
                     if sk not in self.seen]
            if len(self.seen) < _SEEN_SKELETONS_CAP:
                self.seen.update(distinct.to_pylist())
            if not fresh:
                return
            arr = arr.take(pa.array(fresh, type=pa.int64()))
        found = exact_json_paths(arr)
        if found is None:
            self.paths = None
        else:
            self.paths |= found
