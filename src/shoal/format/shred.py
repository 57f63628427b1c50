"""Shredded paths of dynamic columns: hidden sub-columns of an extent (docs/storage.md).

A `dynamic` column holds JSON bytes, and `get_json_object(col, '$.a.b')` parses every value
to answer. For the leaf paths most rows of an extent hold, the writer stores the answer
beside the JSON, once, as a hidden utf8 sub-column named `hidden_name(col, path)`
(`attrs.$http.method`): a name no user column can take (column names are lower-case
identifiers, never holding `.` or `$`). A query reading the path reads the sub-column instead
of the JSON (`shoal.query.scan_read`).

The sub-column holds, row by row, exactly what the embedded engine answers for the path
(`extract_paths`, the one function writer and reader share): a string unquoted, an integer as
its text, `true`/`false`, NULL for a missing path or JSON null. The embedded engine hands a
statement to Spark when a path holds a JSON double, object or array (Spark renders them
otherwise), so such a value is never shredded: a path that holds one in the extent's first
block is not shredded in that extent, and a later block where a shredded path holds one
names that sub-column in its block stats under `"unshredded"` (its values there are all
NULL and mean nothing): a reader computes that block's answer from the JSON instead, and the
not-identical signal comes up there as it always did.

Choice (`Shredder`, per extent, from its first block): the leaf paths (keys `[A-Za-z_]\\w*`)
present in at least `min_share` of the first `sample_rows` rows with no double, object or
array among their sampled values, the most common first, at most `max_paths` per column.
Sub-columns get block stats (min, max, nulls; no distinct sets or membership filters), so
an equality on a path prunes blocks by the sub-column's min/max. They are not the table's
columns: extent stats and the write result know nothing of them, and the extent reader
leaves them out of the extent's schema and of a whole block; a projection naming one reads
it, and a block's stats say whether it holds a valid one (`block_has`).

`extract_paths` runs DuckDB's own JSON functions over the Arrow array (the very functions
the transpiled `get_json_object` calls), so the stored answer is the engine's by
construction.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import QueryError
from shoal.types.columns import FIELD_TYPE_KEY

log = logging.getLogger("shoal.format.shred")

HIDDEN_SEPARATOR = ".$"
UNSHREDDED_KEY = "unshredded"           # block stats: sub-columns not valid in that block
DEFAULT_MIN_SHARE = 0.2
DEFAULT_MAX_PATHS = 16
DEFAULT_SAMPLE_ROWS = 4096
# The mark a DuckDB error carries when a row would be answered differently from Spark
# (the embedded engine then hands the statement to Spark).
NOT_IDENTICAL_MARK = "shoal:not-identical"
RISKY_JSON_REASON = "a JSON number or object"
RISKY_JSON_TYPES = ("DOUBLE", "OBJECT", "ARRAY")
_PATH_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


class NotIdenticalError(QueryError):
    """A value the embedded engine would not answer as Spark does (the statement goes to
    Spark); the message carries `NOT_IDENTICAL_MARK`."""

    code = "local_engine_mismatch"

    def __init__(self, why: str) -> None:
        self.why = why
        super().__init__(f"{NOT_IDENTICAL_MARK}: {why}")


def is_dynamic(f: pa.Field) -> bool:
    """A `dynamic` field (JSON bytes), as `shoal.format.stats` tells one."""
    return ((f.metadata or {}).get(FIELD_TYPE_KEY) == b"dynamic"
            and (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)))


def hidden_name(column: str, path: str) -> str:
    """The sub-column (and the scan's virtual column) of `path` ("a.b") of `column`."""
    return f"{column}{HIDDEN_SEPARATOR}{path}"


def parse_hidden(name: str) -> tuple[str, str] | None:
    """(column, dotted path) of a sub-column name, None for any other name."""
    column, sep, path = name.partition(HIDDEN_SEPARATOR)
    return (column, path) if sep and column and path else None


def is_hidden(name: str) -> bool:
    return HIDDEN_SEPARATOR in name


def is_shreddable_path(path: str) -> bool:
    """A dotted path of plain keys: what `get_json_object(col, '$.a.b')` reads locally."""
    return all(_PATH_KEY.match(k) for k in path.split("."))


# ---- the engine's answer --------------------------------------------------------------------
_local = threading.local()
_base_lock = threading.Lock()
_base: list[Any] = []


def _connection() -> Any:
    """This thread's cursor on one in-memory DuckDB database shared by the process (writers
    shred on short-lived threads: a cursor is cheap, a database is not)."""
    con = getattr(_local, "con", None)
    if con is None:
        with _base_lock:
            if not _base:
                import duckdb   # the embedded engine's own JSON functions: identical answers

                _base.append(duckdb.connect(config={
                    "enable_external_access": False, "autoinstall_known_extensions": False,
                    "autoload_known_extensions": False, "threads": 2}))
            con = _base[0].cursor()
        _local.con = con
    return con


def _as_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        values = values.cast(pa.string() if pa.types.is_binary(values.type)
                             else pa.large_string())
    return values


# An answer a double, object or array can render as: it opens an object or array, or looks
# like a number other than a plain integer of at most 18 digits (a double's text holds `.`,
# `e` or `E`, or is an integer beyond 64 bits, or `-0`, `nan`, `inf`). Only rows whose answer
# matches are given to `json_type`; every other row's value is a string, integer, boolean or
# null. That this admits every double, object and array is checked against `json_type` on
# every row by the property test in tests/format/test_shred.py.
_MAYBE_RISKY = r"^[\[{]|^[-+.iInN]|^[0-9](?:.*[^0-9]|[0-9]{17})|^-0|^0[0-9]"


def _run(sql: str, source: pa.Table) -> pa.Table:
    import duckdb

    con = _connection()
    try:
        con.register("src", source)
        try:
            return con.execute(sql).to_arrow_table()
        finally:
            con.unregister("src")
    except (duckdb.Error, pa.ArrowInvalid) as e:      # not UTF-8, or malformed JSON
        raise NotIdenticalError(f"a dynamic value that is not JSON ({e})") from None


def _one(col: pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return arr.cast(pa.string()) if not arr.type.equals(pa.string()) else arr


def extract_paths(values: pa.Array | pa.ChunkedArray, paths: Sequence[str]
                  ) -> tuple[list[pa.Array], list[bool]]:
    """For each dotted path: the embedded engine's `get_json_object(values, '$.path')` of
    every row (utf8), and whether any row holds a double, object or array there (a row the
    engine hands to Spark). Values that are not UTF-8 JSON raise `NotIdenticalError`.

    The answers are DuckDB's `json_extract_string` (what `->>` calls) of all paths in one
    parse; `json_type` reads again only the rows whose answer could be a double, object or
    array's rendering (`_MAYBE_RISKY`), usually none."""
    if not paths:
        return [], []
    text = _as_text(values)
    literal = "[" + ", ".join(f"'$.{p}'" for p in paths) + "]"
    items = ", ".join(f"v[{i + 1}] AS v{i}" for i in range(len(paths)))
    answer = _run(f"SELECT {items} FROM (SELECT json_extract_string(j, {literal}) AS v "
                  "FROM src)", pa.table({"j": text}))
    out = [_one(answer.column(f"v{i}")) for i in range(len(paths))]
    risky = []
    kinds = ", ".join(f"'{k}'" for k in RISKY_JSON_TYPES)
    for path, arr in zip(paths, out, strict=True):
        suspect = pc.fill_null(pc.match_substring_regex(arr, _MAYBE_RISKY), False)
        if not pc.any(suspect).as_py():
            risky.append(False)
            continue
        rows = pc.filter(text, suspect)
        found = _run(f"SELECT bool_or(json_type(j, '$.{path}') IN ({kinds})) AS r FROM src",
                     pa.table({"j": rows}))
        risky.append(bool(found.column("r")[0].as_py()))
    return out, risky


def engine_answer(values: pa.Array | pa.ChunkedArray, paths: Sequence[str]) -> list[pa.Array]:
    """`extract_paths`' answers, or `NotIdenticalError` where a row holds a value the
    engine hands to Spark (what the transpiled `get_json_object` raises on it)."""
    out, risky = extract_paths(values, paths)
    if any(risky):
        raise NotIdenticalError(RISKY_JSON_REASON)
    return out


# ---- write side -----------------------------------------------------------------------------
def _leaf_paths(doc: Any, prefix: str, out: dict[str, bool]) -> None:
    """Dotted leaf paths of `doc` -> whether the value there is one the engine answers."""
    for key, value in doc.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out[path] = False
            _leaf_paths(value, path, out)
        else:
            ok = value is None or isinstance(value, (str, bool, int))
            out[path] = out.get(path, True) and ok


def candidate_paths(values: pa.Array, *, min_share: float, max_paths: int) -> list[str]:
    """The paths of a column worth shredding, judged from `values` (a sample)."""
    counts: Counter[str] = Counter()
    bad: set[str] = set()
    rows = 0
    for raw in values.to_pylist():
        rows += 1
        if raw is None:
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        leaves: dict[str, bool] = {}
        _leaf_paths(doc, "", leaves)
        for path, ok in leaves.items():
            counts[path] += 1
            if not ok:
                bad.add(path)
    if not rows:
        return []
    need = max(1, int(min_share * rows + 0.999999))
    ranked = sorted((p for p, n in counts.items() if n >= need and p not in bad
                     and is_shreddable_path(p)), key=lambda p: (-counts[p], p))
    return ranked[:max_paths]


@dataclass(frozen=True)
class ShredOptions:
    min_share: float = DEFAULT_MIN_SHARE
    max_paths: int = DEFAULT_MAX_PATHS
    sample_rows: int = DEFAULT_SAMPLE_ROWS


DEFAULT_SHRED = ShredOptions()


class Shredder:
    """Adds the hidden sub-columns to each block of one extent (paths fixed by its first
    block: an extent has one schema)."""

    def __init__(self, schema: pa.Schema, options: ShredOptions) -> None:
        self._schema = schema
        self._options = options
        self._dynamic = [f.name for f in schema if is_dynamic(f)]
        self._paths: dict[str, list[str]] | None = None
        # the first block's answers, found while choosing the paths
        self._first: dict[str, tuple[list[pa.Array], list[bool]]] = {}

    @property
    def active(self) -> bool:
        return bool(self._dynamic)

    def _plan(self, block: pa.RecordBatch) -> None:
        opts = self._options
        paths: dict[str, list[str]] = {}
        for name in self._dynamic:
            col = block.column(name)
            try:
                chosen = candidate_paths(col.slice(0, opts.sample_rows),
                                         min_share=opts.min_share, max_paths=opts.max_paths)
                if chosen:
                    values, risky = extract_paths(col, chosen)
                    kept = [i for i, r in enumerate(risky) if not r]
                    chosen = [chosen[i] for i in kept]
                    self._first[name] = ([values[i] for i in kept], [False] * len(kept))
            except NotIdenticalError as e:
                log.info("column %s is not shredded in this extent: %s", name, e)
                chosen = []
            if chosen:
                paths[name] = chosen
        self._paths = paths

    def extend(self, block: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, Any]]:
        """`block` with its sub-columns appended, and what the block's stats entry gets for
        them: their `"columns"` stats (min, max, nulls) and, under `UNSHREDDED_KEY`, those
        that do not hold the engine's answer in this block (a path holding a double, object
        or array here)."""
        from shoal.format.stats import column_block_stat   # (stats imports this module)

        if self._paths is None:
            self._plan(block)
        assert self._paths is not None
        if not self._paths:
            return block, {}
        arrays = list(block.columns)
        fields = list(block.schema)
        stats: dict[str, Any] = {}
        unshredded: list[str] = []
        for name, paths in self._paths.items():
            try:
                first = self._first.pop(name, None)
                values, risky = first or extract_paths(block.column(name), paths)
            except NotIdenticalError as e:
                log.info("column %s is not shredded in one block: %s", name, e)
                values = [pa.nulls(block.num_rows, pa.string())] * len(paths)
                risky = [True] * len(paths)
            for path, arr, bad in zip(paths, values, risky, strict=True):
                sub = hidden_name(name, path)
                if bad:
                    arr = pa.nulls(block.num_rows, pa.string())
                    unshredded.append(sub)
                arrays.append(arr)
                fields.append(pa.field(sub, pa.string()))
                stats[sub] = column_block_stat(arr, "str")
        entry: dict[str, Any] = {"columns": stats}
        if unshredded:
            entry[UNSHREDDED_KEY] = unshredded
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
            fields, metadata=block.schema.metadata)), entry


def block_has(block_stat: dict[str, Any] | None, name: str) -> bool:
    """Whether a block (its stats entry) holds valid values of sub-column `name`."""
    if not isinstance(block_stat, dict):
        return False
    columns = block_stat.get("columns")
    if not isinstance(columns, dict) or name not in columns:
        return False
    return name not in (block_stat.get(UNSHREDDED_KEY) or ())
