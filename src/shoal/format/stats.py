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
- `membership_filters`: a bloom filter (`membership.BloomFilter` bytes) for each of those
  columns whose distinct set overflowed.
- `present_paths`: for each dynamic column (field metadata `shoal.type` = `dynamic`, values
  JSON bytes) the sorted dotted paths of object keys present anywhere ("a", "a.b"; arrays
  are leaves). Exact, never a subset: the catalog prunes extents that lack a path. A
  column holding a value that is not parseable JSON is left out (paths unknown: keep).

Everything is vectorised per block over distinct values (`pc.unique` first); sets stop
being tracked once they overflow, so high-cardinality columns cost only their filter.
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

from shoal.format.membership import BloomFilter, hash_array
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
    """Paths present in any value of a binary array of JSON texts; None if some value is not
    parseable JSON (coercion never writes one), since then no exact answer exists.

    Objects go through Arrow's JSON reader in one call: the inferred schema's struct fields
    are exactly the keys present anywhere. Where inference fails (a key that is an object in
    one value and a number in another) each value is parsed with `json.loads` instead.
    """
    try:
        return _json_paths(values)
    except _Unparsable:
        return None


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


@dataclass
class _IndexedColumn:
    """Distinct/token sets of one int or string column; hashes once the distinct set overflows.

    Distinct values are found per block with `pc.unique`. Once only the membership filter is
    left to feed, a column whose blocks are mostly distinct (ids) is hashed row by row:
    repeated hashes only set the same bits again, and skipping `unique` saves its cost.
    """

    name: str
    is_str: bool
    filters: bool
    distinct: set[Any] | None = field(default_factory=set)
    tokens: set[str] | None = None
    hashes: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    mostly_distinct: bool = False

    def __post_init__(self) -> None:
        if self.is_str:
            self.tokens = set()

    def add(self, arr: pa.Array) -> None:
        values = len(arr) - arr.null_count
        if values == 0:
            return
        if self.distinct is None and self.tokens is None:
            if not self.filters:
                return
            if self.mostly_distinct:
                self.hashes.append(hash_array(arr))
                return
        uniq = pc.unique(arr)
        if uniq.null_count:
            uniq = pc.drop_null(uniq)
        if self.distinct is not None:
            if len(uniq) <= DISTINCT_SET_CAP:
                self.distinct.update(uniq.to_pylist())
                if len(self.distinct) > DISTINCT_SET_CAP:
                    self._overflow(pa.array(list(self.distinct), type=uniq.type))
            else:
                self._overflow(pa.concat_arrays(
                    [pa.array(list(self.distinct), type=uniq.type), uniq]))
        elif self.filters:
            self.hashes.append(hash_array(uniq))
        self.mostly_distinct = len(uniq) > values // 2
        if self.tokens is not None:
            toks = tokenize_array(uniq)
            if len(toks) > TOKEN_SET_CAP:
                self.tokens = None
            else:
                self.tokens.update(toks.to_pylist())
                if len(self.tokens) > TOKEN_SET_CAP:
                    self.tokens = None

    def _overflow(self, seen: pa.Array) -> None:
        self.distinct = None
        if self.filters:
            self.hashes.append(hash_array(seen))

    def column_stat(self) -> dict[str, Any]:
        return {"distinct": None if self.distinct is None else sorted(self.distinct),
                "tokens": None if self.tokens is None else sorted(self.tokens)}

    def membership_filter(self, fp_rate: float) -> bytes | None:
        if self.distinct is not None or not self.filters or not self.hashes:
            return None
        h1 = np.concatenate([h[0] for h in self.hashes])
        h2 = np.concatenate([h[1] for h in self.hashes])
        return BloomFilter.from_hashes(h1, h2, fp_rate=fp_rate).to_bytes()


class ExtentStatsBuilder:
    """Accumulates extent stats block by block; `finish()` gives the totals."""

    def __init__(self, schema: pa.Schema, *,
                 membership_filters: bool | Collection[str] = True,
                 fp_rate: float = 0.01) -> None:
        """`membership_filters`: True for every int/string column whose distinct set
        overflows, False for none, or the names of the columns that may get one."""
        self._fp_rate = fp_rate
        self._min_ts: int | None = None
        self._max_ts: int | None = None
        self._indexed: dict[int, _IndexedColumn] = {}
        self._dynamic: dict[int, set[str] | None] = {}     # None: paths unknown
        self._dynamic_mostly_distinct: set[int] = set()
        for i, f in enumerate(schema):
            kind = stat_kind(f)
            if kind in ("int", "str") and f.name != TIMESTAMP_COLUMN:
                filters = (membership_filters if isinstance(membership_filters, bool)
                           else f.name in membership_filters)
                self._indexed[i] = _IndexedColumn(f.name, kind == "str", filters)
            elif is_dynamic(f):
                self._dynamic[i] = set()
        self._names = schema.names

    def add_block(self, batch: pa.RecordBatch, stat: dict[str, Any]) -> None:
        """Fold in one block and its `block_stats()` entry."""
        ts = stat["columns"].get(TIMESTAMP_COLUMN)
        if ts is not None and ts["min"] is not None:
            self._min_ts = ts["min"] if self._min_ts is None else min(self._min_ts, ts["min"])
            self._max_ts = ts["max"] if self._max_ts is None else max(self._max_ts, ts["max"])
        for i, col in self._indexed.items():
            col.add(batch.column(i))
        for i, paths in self._dynamic.items():
            arr = batch.column(i)
            values = len(arr) - arr.null_count
            if paths is None or values == 0:
                continue
            if i not in self._dynamic_mostly_distinct:   # else unique would not pay
                arr = pc.unique(arr)
                if len(arr) > values // 2:
                    self._dynamic_mostly_distinct.add(i)
            found = json_paths(arr)
            if found is None:
                self._dynamic[i] = None
            else:
                paths |= found

    def finish(self) -> ExtentStats:
        filters = {}
        for col in self._indexed.values():
            blob = col.membership_filter(self._fp_rate)
            if blob is not None:
                filters[col.name] = blob
        return ExtentStats(
            min_ts=self._min_ts, max_ts=self._max_ts,
            present_paths={self._names[i]: sorted(p) for i, p in self._dynamic.items()
                           if p is not None},
            column_stats={c.name: c.column_stat() for c in self._indexed.values()},
            membership_filters=filters)
