"""Block stats and extent-level column stats, computed while an extent is written (docs/storage.md).

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
- `present_paths`: for each dynamic column the sorted dotted paths of object keys present
  anywhere (exact; see `shoal.format.jsonpaths`).
- `block_filters`: for every column that gets a membership filter, one more per block over
  that block's values; for every other string column, a token filter per block over the
  distinct tokens of that block's values, unless every block holds every token of the
  column (`shoal.format.blockfilters`; the writer stores them in the extent).

Everything is vectorised per block over distinct values (`pc.unique` first) where that
pays; sets stop being tracked once they overflow (tokens are found in growing chunks, so
free text overflows cheaply), so high-cardinality columns cost only their filter. With
token filters (the default), a string column is tokenized once per block instead, whole
(its distinct values where they were found, else its values): those tokens make the
block's filter and feed the extent's token set, which comes out the same. The
writer takes block stats from `ExtentStatsBuilder.add_block`, which reads the min/max of a
column from its distinct values when it has them (same result as `block_stats`).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.format._buffers import string_buffers as _string_buffers
from shoal.format._ext import kernels as _kernels
from shoal.format.blockfilters import BLOCK_FP_RATE, TOKEN_FP_RATE, TOKEN_KIND
from shoal.format.jsonpaths import DynamicColumn
from shoal.format.membership import (DEFAULT_FP_RATE, BloomFilter, DistinctCounter,
                                     count_distinct_hashes, hash_array, token_hashes)
from shoal.format.tokens import tokenize_array
from shoal.types.columns import FIELD_TYPE_KEY
from shoal.types.schema import TIMESTAMP_COLUMN

STRING_MINMAX_CAP = 256
DISTINCT_SET_CAP = 1_000
TOKEN_SET_CAP = 10_000
_OVERFLOW_PROBE = 4 * DISTINCT_SET_CAP   # a block's first values that show it overflows


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
        if kind == "str" and nulls == 0 and _kernels is not None:
            return {**string_bounds(arr), "nulls": nulls}
        if kind == "ts":
            arr = arr.view(pa.int64())
        if kind != "str" or pc.max(pc.binary_length(arr)).as_py() <= STRING_MINMAX_CAP:
            mm = pc.min_max(arr)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return {"min": lo, "max": hi, "nulls": nulls}


def string_bounds(arr: pa.Array) -> dict[str, Any]:
    """{"min", "max"} of a string array without nulls, both None when a value is longer
    than `STRING_MINMAX_CAP` bytes: one pass of the C kernel (`string_bounds` in
    _kernels.c), what `pc.min_max` gives."""
    offsets, data = _string_buffers(arr)
    found = _kernels.string_bounds(offsets, data, STRING_MINMAX_CAP)
    if found is None:
        return {"min": None, "max": None}
    return {"min": arr[found[0]].as_py(), "max": arr[found[1]].as_py()}


def block_stats(batch: pa.RecordBatch) -> dict[str, Any]:
    """The block-stats entry of one block."""
    columns: dict[str, Any] = {}
    for f, arr in zip(batch.schema, batch.columns, strict=True):
        kind = stat_kind(f)
        if kind is not None:
            columns[f.name] = column_block_stat(arr, kind)
    return {"rows": batch.num_rows, "columns": columns}


# ---- extent stats -------------------------------------------------------------------------

@dataclass
class ExtentStats:
    min_ts: int | None
    max_ts: int | None
    present_paths: dict[str, list[str]]
    column_stats: dict[str, dict[str, Any]]
    membership_filters: dict[str, bytes]
    # per block: column -> (kind "int" | "str" | "tok", BloomFilter bytes), for the columns
    # that have a membership filter and the string columns with token filters (see
    # `shoal.format.blockfilters`); [] when block filters are off or none were made
    block_filters: list[dict[str, tuple[str, bytes]]] = field(default_factory=list)


def has_whitespace(arr: pa.Array) -> bool:
    """Whether any non-null value of a string array holds an ASCII whitespace byte (space,
    tab, LF, VT, FF, CR). Vectorised over the data buffer; UTF-8 never uses these bytes
    inside a multi-byte character."""
    if arr.null_count:
        arr = pc.drop_null(arr)
    if len(arr) == 0:
        return False
    _, data = _string_buffers(arr)
    # Free text answers within its first bytes: look there first, then at the rest.
    for part in (data[:_WHITESPACE_PROBE], data[_WHITESPACE_PROBE:]):
        if part.size and part.min() <= 32 and bool(
                np.any((part == 32) | ((part - np.uint8(9)) < 5))):
            return True
    return False


_WHITESPACE_PROBE = 4096


@dataclass
class _IndexedColumn:
    """Distinct/token sets of one int or string column; hashes once the distinct set overflows.

    Distinct values are found per block with `pc.unique`. Once only the membership filter is
    left to feed, a column whose blocks are mostly distinct (ids) is hashed row by row:
    repeated hashes only set the same bits again, and skipping `unique` saves its cost. Once
    only tokens are left (free text), such a column is tokenized without `unique` too.
    `filters`: the column may get a membership filter; `auto`: a string column loses that
    as soon as a value with whitespace shows up (free text, not identifiers).
    `per_block`: keep each block's hashes (`blocks`, None for a block without values) for
    its block filter; they are the arrays the extent filter is fed whenever it is hashed
    anyway, so only blocks seen before the distinct set overflowed are hashed twice. Each
    comes with the number of values its filter is sized for: the block's distinct values
    where they were counted, else its values.
    `token_filters` (string columns): tokenize each block whole in `add` (not in `_add`),
    for the block's token filter (`token_blocks`: its bytes and distinct tokens, None for a
    block without one) and the token set alike. A block of a column that has (or will
    have, its distinct set having overflowed) a membership filter gets none.
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
    per_block: bool = False
    blocks: list[tuple[np.ndarray, np.ndarray, int] | None] = field(default_factory=list)
    _block: tuple[np.ndarray, np.ndarray, int] | None = field(default=None, repr=False)
    ranges: list[tuple[Any, Any]] = field(default_factory=list)   # (min, max) per block
    token_filters: bool = False
    token_fp_rate: float = TOKEN_FP_RATE
    token_blocks: list[tuple[bytes, int] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.is_str:
            self.tokens = set()
        self.auto = self.auto and self.is_str
        self.token_filters = self.token_filters and self.is_str

    def add(self, arr: pa.Array) -> pa.Array | None:
        """Fold in one block's values; returns their distinct non-null values when it had
        to compute them (the block's min/max come cheaper from those)."""
        self._block = None
        uniq = self._add(arr)
        if self.per_block:
            if self.filters and self._block is None and uniq is not None and len(uniq):
                self._block = (*hash_array(uniq), len(uniq))
            self.blocks.append(self._block if self.filters else None)
        if self.token_filters:
            self.token_blocks.append(self._block_tokens(arr, uniq))
        return uniq

    def _block_tokens(self, arr: pa.Array, uniq: pa.Array | None) -> tuple[bytes, int] | None:
        """The block's token filter (bytes, distinct tokens), tokenizing its distinct values
        (`uniq`) when `_add` found them, else its values; its tokens feed the token set."""
        values = uniq if uniq is not None else arr
        if self.filters and self.distinct is None:
            # an identifier column, membership-filtered: only the token set wants its tokens
            self._add_tokens(values, whole_blocks=False)
            return None
        if len(values) == values.null_count:
            return None     # all null: the block's stats already rule `has` out
        if self.tokens is None:     # the set overflowed: only the tokens' hashes are needed
            h1, h2 = token_hashes(values)
        else:
            toks = tokenize_array(values)
            if len(toks) > TOKEN_SET_CAP:
                self.tokens = None
            else:
                self.tokens.update(toks.to_pylist())
                if len(self.tokens) > TOKEN_SET_CAP:
                    self.tokens = None
            h1, h2 = hash_array(toks)
        bloom = BloomFilter.from_hashes(h1, h2, n_distinct=len(h1), fp_rate=self.token_fp_rate)
        return bloom.to_bytes(), len(h1)

    def _add(self, arr: pa.Array) -> pa.Array | None:
        values = len(arr) - arr.null_count
        if values == 0:
            return None
        if self.distinct is None and self.tokens is None:
            if not self.filters:
                return None
            if self.mostly_distinct:
                self._block = self._hash(arr)
                return None
        if self.distinct is None and not self.filters and self.mostly_distinct:
            # Only tokens are left to find, in values that hardly repeat (free text): skip
            # `unique`; the tokenizer keeps distinct words itself. Same token set either way.
            self._add_tokens(arr)
            return None
        if (self.is_str and self.distinct is not None and len(arr) > _OVERFLOW_PROBE
                and pc.count_distinct(arr.slice(0, _OVERFLOW_PROBE)).as_py()
                > DISTINCT_SET_CAP):
            self._overflow_without_unique(arr, values)
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
                before = len(self.distinct)
                hashed = self._overflow(pa.concat_arrays(
                    [pa.array(list(self.distinct), type=uniq.type), uniq]))
                if hashed is not None:      # hashes are per value: the block's are the tail
                    self._block = (hashed[0][before:], hashed[1][before:], len(uniq))
        elif self.filters:
            self._block = self._hash(uniq)
        self.mostly_distinct = len(uniq) > values // 2
        if self.tokens is not None:
            self._add_tokens(untokenized)
        return uniq

    def _add_tokens(self, values: pa.Array, *, whole_blocks: bool = True) -> None:
        """Tokenize so that a column of free text overflows the token cap after a few
        thousand values rather than after a whole block: the C kernel stops by itself once
        its tokens pass the cap, so it takes the values in one call; the numpy form in
        growing chunks (they keep growing across blocks: a column whose tokens fit the cap
        so far is tokenized in few calls). Nothing when `token_filters` tokenize whole
        blocks in `add` (`whole_blocks`), which feeds the token set itself."""
        if whole_blocks and self.token_filters:
            return
        start, step = 0, self.token_step if _kernels is None else max(1, len(values))
        while start < len(values) and self.tokens is not None:
            toks = tokenize_array(values.slice(start, step), cap=TOKEN_SET_CAP)
            if len(toks) > TOKEN_SET_CAP:
                self.tokens = None
                return
            self.tokens.update(toks.to_pylist())
            if len(self.tokens) > TOKEN_SET_CAP:
                self.tokens = None
            start += step
            step = min(2 * step, 1 << 20)
        if _kernels is None:
            self.token_step = step

    def _overflow(self, seen: pa.Array) -> tuple[np.ndarray, np.ndarray, int] | None:
        self.distinct = None
        return self._hash(seen) if self.filters else None

    def _overflow_without_unique(self, arr: pa.Array, values: int) -> None:
        """What `_add` does for a string block that overflows the distinct set (its first
        `_OVERFLOW_PROBE` values already do), without `unique` of the whole block: every
        value is hashed, the block's distinct values are counted as distinct h1 (the hash of
        a string is a function of 64 bits of it, so only two values of the block with equal
        hashes would count once where `unique` counts two), and the tokens are taken from
        the values themselves (same set: the tokenizer dedups). The same filter bits, counts
        and sizes as `unique` first: a repeated value sets the same bits again."""
        prev = pa.array(list(self.distinct or ()), type=arr.type)
        self.distinct = None
        if arr.null_count:
            arr = pc.drop_null(arr)
        if self.filters and self.auto and (has_whitespace(arr) or has_whitespace(prev)):
            self.filters = False
            self.hashes = []
            self.blocks = [None] * len(self.blocks)
        if self.filters:
            # Every value's hashes go into the filters (a repeated value sets the same bits
            # again); the block's distinct ones are only counted, by a sort of h1, which is
            # far cheaper than finding them (`np.unique` with indices sorts stably).
            b1, b2 = hash_array(arr)
            distinct = count_distinct_hashes(b1)
            p1, p2 = hash_array(prev)
            h1, h2 = np.concatenate([p1, b1]), np.concatenate([p2, b2])
            self.hashes.append((h1, h2))
            self.counter.add(h1)
            self._block = (b1, b2, distinct)
            self.mostly_distinct = distinct > values // 2
        else:
            # Without filters this only picks the cheaper way for later blocks (tokens are
            # the same either way): the probe's share of distinct values says enough.
            self.mostly_distinct = True
        if self.tokens is not None:
            self._add_tokens(arr)

    def _hash(self, arr: pa.Array) -> tuple[np.ndarray, np.ndarray, int] | None:
        if arr.null_count:
            arr = pc.drop_null(arr)
        if self.auto and has_whitespace(arr):
            self.filters = False
            self.hashes = []
            self.blocks = [None] * len(self.blocks)
            return None
        h1, h2 = hash_array(arr)
        self.hashes.append((h1, h2))
        self.counter.add(h1)
        return h1, h2, len(h1)

    def column_stat(self) -> dict[str, Any]:
        return {"distinct": None if self.distinct is None else sorted(self.distinct),
                "tokens": None if self.tokens is None else sorted(self.tokens)}

    def membership_filter(self, fp_rate: float) -> bytes | None:
        if self.distinct is not None or not self.filters or not self.hashes:
            return None
        return BloomFilter.from_hash_parts(self.hashes, n_distinct=self.counter.estimate(),
                                           fp_rate=fp_rate).to_bytes()

    def token_filters_worth_keeping(self, blocks: int) -> bool:
        """Whether the token filters may rule a block out: some block has one, and unless
        the token set overflowed or a block has none, some block lacks a token of the set."""
        if not self.token_filters or len(self.token_blocks) != blocks:
            return False
        made = [b for b in self.token_blocks if b is not None]
        if not made:
            return False
        if self.tokens is None or len(made) < blocks:
            return True
        return any(n < len(self.tokens) for _, n in made)

    def block_filters(self, fp_rate: float) -> list[bytes | None]:
        """One filter per block (None for a block without values), each sized to the
        block's distinct values where they were counted, else to its values (an upper
        bound of its distinct ones)."""
        return [None if part is None else
                BloomFilter.from_hashes(part[0], part[1], n_distinct=part[2],
                                        fp_rate=fp_rate).to_bytes()
                for part in self.blocks]


def _min_max_suffice(ranges: list[tuple[Any, Any]]) -> bool:
    """Whether block filters could not narrow an equality more than the extent's own filter
    and the blocks' min/max do: one block, or blocks whose [min, max] ranges never overlap
    (sorted or clustered values, e.g. a sequence number). A block without bounds (all null,
    or a string over the min/max cap) counts as overlapping."""
    if len(ranges) <= 1:
        return True
    if any(lo is None or hi is None for lo, hi in ranges):
        return False
    bounded = sorted(ranges)
    return all(prev[1] < nxt[0] for prev, nxt in itertools.pairwise(bounded))


PARALLEL_MIN_ROWS = 8192      # a block at least this long folds its columns in on threads
_COLUMN_THREADS = max(1, min(4, os.cpu_count() or 1))
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _column_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_COLUMN_THREADS - 1,
                                       thread_name_prefix="shoal-stats")
        return _pool


def _forget_pool() -> None:
    """In a forked child (a Spark worker): the parent's pool threads did not come along, and
    its lock may have been held at the fork."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _run_all(calls: list[Callable[[], Any]], sizes: list[int] | None) -> list[Any]:
    """`[c() for c in calls]`; with `sizes` (and more than one thread), the calls are drawn
    largest first by this thread and the column pool's until none is left. Every call has
    ended when this returns or raises (the first failure in call order)."""
    if sizes is None or len(calls) < 2 or _COLUMN_THREADS < 2:
        return [c() for c in calls]
    todo = deque(sorted(range(len(calls)), key=lambda k: -sizes[k]))
    results: list[Any] = [None] * len(calls)
    failures: dict[int, BaseException] = {}

    def drain() -> None:
        while True:
            try:
                k = todo.popleft()
            except IndexError:
                return
            try:
                results[k] = calls[k]()
            except BaseException as e:  # noqa: BLE001 - raised by `_run_all`, below
                failures[k] = e

    pool = _column_pool()
    helpers = [pool.submit(drain) for _ in range(min(_COLUMN_THREADS, len(calls)) - 1)]
    drain()
    wait(helpers)
    if failures:
        raise failures[min(failures)]
    return results


class ExtentStatsBuilder:
    """Accumulates extent stats block by block; `finish()` gives the totals."""

    def __init__(self, schema: pa.Schema, *,
                 membership_filters: bool | Collection[str] = True,
                 fp_rate: float = DEFAULT_FP_RATE, block_filters: bool = True,
                 block_fp_rate: float = BLOCK_FP_RATE, token_filters: bool = True,
                 token_fp_rate: float = TOKEN_FP_RATE) -> None:
        """`membership_filters`: True for the automatic rule (every int/long column, and every
        string column without whitespace in its values, whose distinct set overflows), False
        for none, or the names of the int/string columns that get one when their distinct
        set overflows (whatever their values look like). `block_filters`: every column
        with a membership filter also gets one per block (`block_fp_rate`), and with
        `token_filters` every other string column a token filter per block
        (`token_fp_rate`)."""
        self._fp_rate = fp_rate
        self._block_fp_rate = block_fp_rate
        self._blocks = 0
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._indexed: dict[int, _IndexedColumn] = {}
        self._dynamic: dict[int, DynamicColumn] = {}
        auto = membership_filters is True
        for i, f in enumerate(schema):
            kind = stat_kind(f)
            if kind in ("int", "str") and f.name != TIMESTAMP_COLUMN:
                filters = (membership_filters if isinstance(membership_filters, bool)
                           else f.name in membership_filters)
                self._indexed[i] = _IndexedColumn(f.name, kind == "str", filters, auto,
                                                  per_block=block_filters and bool(filters),
                                                  token_filters=block_filters and token_filters,
                                                  token_fp_rate=token_fp_rate)
            elif is_dynamic(f):
                self._dynamic[i] = DynamicColumn()
        self._names = schema.names

    def add_block(self, batch: pa.RecordBatch,
                  stat: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fold in one block; returns its `block_stats()` entry (computed here when not
        given, reusing the distinct values the column stats need).

        Each column's state is its own, so a block of `PARALLEL_MIN_ROWS` rows or more has
        its columns folded in on `_COLUMN_THREADS` threads (this one included): the kernels
        release the GIL, and the group commit of REST waits for these stats (the extent of
        8 x 1 MB bodies: ~8.5 ms on one thread). The result does not depend on it."""
        uniques: dict[int, pa.Array] = {}
        self._blocks += 1
        indexed = list(self._indexed.items())
        calls: list[Callable[[], Any]] = [functools.partial(col.add, batch.column(i))
                                          for i, col in indexed]
        calls += [functools.partial(dyn.add, batch.column(i)) for i, dyn in self._dynamic.items()]
        sizes = [batch.column(i).nbytes for i, _ in indexed]
        sizes += [batch.column(i).nbytes for i in self._dynamic]
        results = _run_all(calls, sizes if batch.num_rows >= PARALLEL_MIN_ROWS else None)
        for (i, _), uniq in zip(indexed, results, strict=False):
            if uniq is not None:
                uniques[i] = uniq
        if stat is None:
            columns: dict[str, Any] = {}
            for i, (f, arr) in enumerate(zip(batch.schema, batch.columns, strict=True)):
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
        for col in self._indexed.values():
            if col.per_block:
                entry = stat["columns"].get(col.name) or {}
                col.ranges.append((entry.get("min"), entry.get("max")))
        return stat

    def finish(self) -> ExtentStats:
        pending = [c for c in self._indexed.values()
                   if c.distinct is None and c.filters and c.hashes]
        blobs = [c.membership_filter(self._fp_rate) for c in pending]
        filters = {c.name: b for c, b in zip(pending, blobs, strict=True) if b is not None}
        per_block: list[dict[str, tuple[str, bytes]]] = [{} for _ in range(self._blocks)]
        for c in pending:
            if (c.name in filters and c.per_block and len(c.blocks) == self._blocks
                    and not _min_max_suffice(c.ranges)):
                kind = "str" if c.is_str else "int"
                blobs = c.block_filters(self._block_fp_rate)
                for entry, blob in zip(per_block, blobs, strict=True):
                    if blob is not None:
                        entry[c.name] = (kind, blob)
        for c in self._indexed.values():
            # one filter per column and block: a membership-filtered column gets no tokens
            if c.name not in filters and c.token_filters_worth_keeping(self._blocks):
                for entry, made in zip(per_block, c.token_blocks, strict=True):
                    if made is not None:
                        entry[c.name] = (TOKEN_KIND, made[0])
        return ExtentStats(
            min_ts=self._min_ts, max_ts=self._max_ts,
            present_paths={self._names[i]: sorted(d.paths) for i, d in self._dynamic.items()
                           if d.paths is not None},
            column_stats={c.name: c.column_stat() for c in self._indexed.values()},
            membership_filters=filters,
            block_filters=per_block if any(per_block) else [])
