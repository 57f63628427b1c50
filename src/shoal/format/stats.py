"""Block stats and extent-level column stats, computed while an extent is written (SPEC §6.1).

Block stats (inside the extent, one JSON object per block, what `pruned_blocks` reads):
    {"rows": N, "columns": {"<name>": {"min": v, "max": v, "nulls": K}, ...}}
for timestamp(ns) columns (int ns), int32/int64 columns (ints) and utf8 columns (str),
keyed by column name in schema order. min/max are null when the block has no non-null
value, and for a string column when any of its values in the block is longer than
`STRING_MINMAX_CAP` UTF-8 bytes. Other types have no entry.

Extent stats (`ExtentStatsBuilder`, handed to the catalog through `ExtentWriteResult`):
- `min_ts`/`max_ts`: bounds of the `_timestamp` column in ns (None without non-null values).
- `column_stats`: for every int32/int64 and utf8 column `{"distinct": sorted values or None,
  "tokens": sorted tokens or None}` (`tokens` is None for int columns); a set larger than
  its cap (`DISTINCT_SET_CAP`, `TOKEN_SET_CAP`) is None.
- `membership_filters`: a bloom filter (`membership.BloomFilter` bytes, ~1% false
  positives) for a column whose distinct set overflowed, where an equality lookup is
  plausible. The rule (`membership_filters=True`, the default): every int32/int64 column,
  and every string column whose values look like identifiers -- no value holds ASCII
  whitespace (space, tab, LF, VT, FF, CR; checked with numpy on each block's data buffer).
  Free text such as a log message gets none (its token set serves text search); ids, trace
  ids, hosts and codes do. `membership_filters=False` builds none; a collection of column
  names builds them for exactly those int/string columns, whatever their values look like.
- `present_paths`: for each dynamic column (field metadata `shoal.type` = `dynamic`, values
  JSON bytes) the sorted dotted paths of object keys present anywhere ("a", "a.b"; arrays
  are leaves). Exact, never a subset: the catalog prunes extents that lack a path. A
  column found to hold a value that is not JSON is left out (paths unknown: keep). Values
  are grouped by key skeleton (a numpy lexer, see `json_skeletons`) and one value per
  skeleton is parsed, since the paths depend on nothing else.

Everything is vectorised per block over distinct values (`pc.unique` first) where that
pays; sets stop being tracked once they overflow (tokens are found in growing chunks, so
free text overflows cheaply), so high-cardinality columns cost only their filter. The
writer takes block stats from `ExtentStatsBuilder.add_block`, which reads the min/max of a
column from its distinct values when it has them (same result as `block_stats`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from shoal.format._buffers import string_buffers as _string_buffers
from shoal.format.membership import (DEFAULT_FP_RATE, BloomFilter, DistinctCounter,
                                     hash_array)
from shoal.format.tokens import tokenize_array
from shoal.types.columns import FIELD_TYPE_KEY
from shoal.types.schema import TIMESTAMP_COLUMN

STRING_MINMAX_CAP = 256
DISTINCT_SET_CAP = 1_000
TOKEN_SET_CAP = 10_000
_SMALL_JSON_SET = 512      # at most this many distinct JSON values: json.loads each


# ---- column kinds -------------------------------------------------------------------------

def stat_kind(f: pa.Field) -> str | None:
    """'ts', 'int' or 'str' for columns that carry block stats, else None."""
    t = f.type
    if pa.types.is_timestamp(t):
        return "ts" if t.unit == "ns" else None
    if pa.types.is_int32(t) or pa.types.is_int64(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    return None


def is_dynamic(f: pa.Field) -> bool:
    return ((f.metadata or {}).get(FIELD_TYPE_KEY) == b"dynamic"
            and (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)))


# ---- block stats --------------------------------------------------------------------------

def column_block_stat(arr: pa.Array, kind: str) -> dict[str, Any]:
    """{"min", "max", "nulls"} of one column of one block."""
    nulls = arr.null_count
    lo = hi = None
    if nulls < len(arr):
        if kind == "ts":
            arr = arr.view(pa.int64())
        if kind != "str" or pc.max(pc.binary_length(arr)).as_py() <= STRING_MINMAX_CAP:
            mm = pc.min_max(arr)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return {"min": lo, "max": hi, "nulls": nulls}


def block_stats(batch: pa.RecordBatch) -> dict[str, Any]:
    """The block-stats entry of one block."""
    columns: dict[str, Any] = {}
    for f, arr in zip(batch.schema, batch.columns):
        kind = stat_kind(f)
        if kind is not None:
            columns[f.name] = column_block_stat(arr, kind)
    return {"rows": batch.num_rows, "columns": columns}


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
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
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


# ---- extent stats -------------------------------------------------------------------------

@dataclass
class ExtentStats:
    min_ts: int | None
    max_ts: int | None
    present_paths: dict[str, list[str]]
    column_stats: dict[str, dict[str, Any]]
    membership_filters: dict[str, bytes]


def has_whitespace(arr: pa.Array) -> bool:
    """Whether any non-null value of a string array holds an ASCII whitespace byte (space,
    tab, LF, VT, FF, CR). Vectorised over the data buffer; UTF-8 never uses these bytes
    inside a multi-byte character."""
    if arr.null_count:
        arr = pc.drop_null(arr)
    if len(arr) == 0:
        return False
    _, data = _string_buffers(arr)
    low = data <= 32
    if not low.any():                     # the usual answer for identifiers, in one pass
        return False
    return bool(np.any((data == 32) | ((data - np.uint8(9)) < 5)))


@dataclass
class _IndexedColumn:
    """Distinct/token sets of one int or string column; hashes once the distinct set overflows.

    Distinct values are found per block with `pc.unique`. Once only the membership filter is
    left to feed, a column whose blocks are mostly distinct (ids) is hashed row by row:
    repeated hashes only set the same bits again, and skipping `unique` saves its cost. Once
    only tokens are left (free text), such a column is tokenized without `unique` too.
    `filters`: the column may get a membership filter; `auto`: a string column loses that
    as soon as a value with whitespace shows up (free text, not identifiers).
    """

    name: str
    is_str: bool
    filters: bool
    auto: bool = False
    distinct: set[Any] | None = field(default_factory=set)
    tokens: set[str] | None = None
    hashes: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    counter: DistinctCounter = field(default_factory=DistinctCounter)
    mostly_distinct: bool = False
    token_step: int = 4096

    def __post_init__(self) -> None:
        if self.is_str:
            self.tokens = set()
        self.auto = self.auto and self.is_str

    def add(self, arr: pa.Array) -> pa.Array | None:
        """Fold in one block's values; returns their distinct non-null values when it had
        to compute them (the block's min/max come cheaper from those)."""
        values = len(arr) - arr.null_count
        if values == 0:
            return None
        if self.distinct is None and self.tokens is None:
            if not self.filters:
                return None
            if self.mostly_distinct:
                self._hash(arr)
                return None
        if self.distinct is None and not self.filters and self.mostly_distinct:
            # Only tokens are left to find, in values that hardly repeat (free text): skip
            # `unique`; the tokenizer keeps distinct words itself. Same token set either way.
            self._add_tokens(arr)
            return None
        uniq = pc.unique(arr)
        if uniq.null_count:
            uniq = pc.drop_null(uniq)
        untokenized = uniq
        if self.distinct is not None:
            if len(uniq) <= DISTINCT_SET_CAP:
                fresh = [v for v in uniq.to_pylist() if v not in self.distinct]
                self.distinct.update(fresh)
                untokenized = pa.array(fresh, type=uniq.type)   # the rest were tokenized
                if len(self.distinct) > DISTINCT_SET_CAP:
                    self._overflow(pa.array(list(self.distinct), type=uniq.type))
            else:
                self._overflow(pa.concat_arrays(
                    [pa.array(list(self.distinct), type=uniq.type), uniq]))
        elif self.filters:
            self._hash(uniq)
        self.mostly_distinct = len(uniq) > values // 2
        if self.tokens is not None:
            self._add_tokens(untokenized)
        return uniq

    def _add_tokens(self, values: pa.Array) -> None:
        """Tokenize in growing chunks, so a column of free text overflows the token cap
        after a few thousand values rather than after a whole block. The chunks keep growing
        across blocks: a column whose tokens fit the cap so far is tokenized in few calls."""
        start, step = 0, self.token_step
        while start < len(values) and self.tokens is not None:
            toks = tokenize_array(values.slice(start, step))
            if len(toks) > TOKEN_SET_CAP:
                self.tokens = None
                return
            self.tokens.update(toks.to_pylist())
            if len(self.tokens) > TOKEN_SET_CAP:
                self.tokens = None
            start += step
            step = min(2 * step, 1 << 20)
        self.token_step = step

    def _overflow(self, seen: pa.Array) -> None:
        self.distinct = None
        if self.filters:
            self._hash(seen)

    def _hash(self, arr: pa.Array) -> None:
        if arr.null_count:
            arr = pc.drop_null(arr)
        if self.auto and has_whitespace(arr):
            self.filters = False
            self.hashes = []
            return
        h1, h2 = hash_array(arr)
        self.hashes.append((h1, h2))
        self.counter.add(h1)

    def column_stat(self) -> dict[str, Any]:
        return {"distinct": None if self.distinct is None else sorted(self.distinct),
                "tokens": None if self.tokens is None else sorted(self.tokens)}

    def membership_filter(self, fp_rate: float) -> bytes | None:
        if self.distinct is not None or not self.filters or not self.hashes:
            return None
        return BloomFilter.from_hash_parts(self.hashes, n_distinct=self.counter.estimate(),
                                           fp_rate=fp_rate).to_bytes()


_SEEN_SKELETONS_CAP = 100_000


@dataclass
class _DynamicColumn:
    """Present paths of one dynamic column (None: unknown), fed block by block.

    A block's distinct values are taken first (`pc.unique`) unless the previous block showed
    them to be mostly distinct; they are grouped by key skeleton, and one value per skeleton
    not seen in an earlier block is parsed. A column whose skeletons are mostly distinct
    (keys that are ids) stops paying for the grouping: its later blocks are parsed whole.
    """

    paths: set[str] | None = field(default_factory=set)
    seen: set[bytes] = field(default_factory=set)
    grouping: bool = True
    mostly_distinct: bool = False

    def add(self, arr: pa.Array) -> None:
        if self.paths is None:
            return
        if arr.null_count:
            arr = pc.drop_null(arr)
        values = len(arr)
        if values == 0:
            return
        if not self.mostly_distinct:
            arr = pc.unique(arr)
            self.mostly_distinct = len(arr) > values // 2
        if self.grouping:
            skeletons = json_skeletons(arr)
            if skeletons is None:
                self.paths = None
                return
            distinct, first = skeleton_classes(skeletons)
            if len(distinct) > len(arr) // 2:
                self.grouping = False
            fresh = [i for i, sk in zip(first.tolist(), distinct.to_pylist())
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


class ExtentStatsBuilder:
    """Accumulates extent stats block by block; `finish()` gives the totals."""

    def __init__(self, schema: pa.Schema, *,
                 membership_filters: bool | Collection[str] = True,
                 fp_rate: float = DEFAULT_FP_RATE) -> None:
        """`membership_filters`: True for the automatic rule (every int/long column, and every
        string column without whitespace in its values, whose distinct set overflows), False
        for none, or the names of the int/string columns that get one when their distinct
        set overflows (whatever their values look like)."""
        self._fp_rate = fp_rate
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._indexed: dict[int, _IndexedColumn] = {}
        self._dynamic: dict[int, _DynamicColumn] = {}
        auto = membership_filters is True
        for i, f in enumerate(schema):
            kind = stat_kind(f)
            if kind in ("int", "str") and f.name != TIMESTAMP_COLUMN:
                filters = (membership_filters if isinstance(membership_filters, bool)
                           else f.name in membership_filters)
                self._indexed[i] = _IndexedColumn(f.name, kind == "str", filters, auto)
            elif is_dynamic(f):
                self._dynamic[i] = _DynamicColumn()
        self._names = schema.names

    def add_block(self, batch: pa.RecordBatch,
                  stat: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fold in one block; returns its `block_stats()` entry (computed here when not
        given, reusing the distinct values the column stats need)."""
        uniques: dict[int, pa.Array] = {}
        for i, col in self._indexed.items():
            uniq = col.add(batch.column(i))
            if uniq is not None:
                uniques[i] = uniq
        if stat is None:
            columns: dict[str, Any] = {}
            for i, (f, arr) in enumerate(zip(batch.schema, batch.columns)):
                kind = stat_kind(f)
                if kind is None:
                    continue
                uniq = uniques.get(i)
                if uniq is None:
                    columns[f.name] = column_block_stat(arr, kind)
                else:   # same min/max, same longest value: the distinct values suffice
                    columns[f.name] = dict(column_block_stat(uniq, kind), nulls=arr.null_count)
            stat = {"rows": batch.num_rows, "columns": columns}
        ts = stat["columns"].get(TIMESTAMP_COLUMN)
        if ts is not None and ts["min"] is not None:
            self._min_ts = ts["min"] if self._min_ts is None else min(self._min_ts, ts["min"])
            self._max_ts = ts["max"] if self._max_ts is None else max(self._max_ts, ts["max"])
        for i, dyn in self._dynamic.items():
            dyn.add(batch.column(i))
        return stat

    def finish(self) -> ExtentStats:
        pending = [c for c in self._indexed.values()
                   if c.distinct is None and c.filters and c.hashes]
        blobs = [c.membership_filter(self._fp_rate) for c in pending]
        filters = {c.name: b for c, b in zip(pending, blobs) if b is not None}
        return ExtentStats(
            min_ts=self._min_ts, max_ts=self._max_ts,
            present_paths={self._names[i]: sorted(d.paths) for i, d in self._dynamic.items()
                           if d.paths is not None},
            column_stats={c.name: c.column_stat() for c in self._indexed.values()},
            membership_filters=filters)
