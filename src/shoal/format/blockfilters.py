"""Per-block filters (docs/storage.md): which blocks of an extent may hold a looked-up value
or word, so that a needle inside a big (compacted) extent reads one block.

Two kinds, at most one per column and block:
- membership ("int", "str"): exactly the columns that get an extent-level membership filter
  (int columns and identifier-like string columns whose distinct set overflowed; see
  `shoal.format.stats`). Each block gets a `membership.BloomFilter` over its own non-null
  values at `BLOCK_FP_RATE` (0.2%, about 1.6 bytes a value): a false positive costs one
  block read for nothing, and a needle in an extent of 16 blocks reads a second block about
  3% of the time (at 1% it would be 14%, for 1.2 bytes a value).
- token ("tok"): every other string column (free text such as a log message, and
  low-cardinality strings), for `StringHas` (`has(column, 'word')`, KQL `has`). Each block
  gets a `BloomFilter` over the distinct tokens of its values (`shoal.format.tokens`:
  lower-cased runs of 2+ ASCII letters and digits) at `TOKEN_FP_RATE` (1%, about 1.2 bytes a
  distinct token). Free text holds far more distinct tokens than a column holds values that
  are looked up (a log line with a request id adds one per row), and a rare word is looked
  up in every block of every extent the catalog kept, so a query reads the filters of all
  those blocks and their size weighs as much as their false positives: at 1% the filter of
  a 64k-row block of bench_query's messages is 75 kB, at 0.2% 101 kB, and a false positive
  reads one block (~1 MB) with odds of 1 in 100. 1% reads 7% more bytes cold than 2% and
  40% fewer false blocks once the filters are cached (BENCHMARKS.md, "Per-block token
  filters").
  A column whose tokens are all in every block (its extent token set is known and each
  block holds all of it) gets none: they could never rule a block out.

Where: in a *filter section* inside the extent's body, between its data and its own footer
(tlm v2: the Arrow IPC file's last message and Arrow's footer; v3: the last row group and the
Parquet footer metadata). Neither body's readers look there (the footer is found from the
end of the file, the blocks by the offsets it records), so a reader that does not know the
section opens the same body and never reads it. The section holds the filters column by
column, block by block (one range read fetches a column's filters for every block), and is
padded to a multiple of 8 bytes so the footer keeps its alignment. A block-stats entry whose
block has filters carries

    "filters": {"<column>": {"kind": "int" | "str" | "tok", "at": <offset>, "len": <bytes>}}

with `at` counted from the start of the object. Readers that do not know the key ignore it
(block stats are read by column name under "columns"); readers that do not know a kind
ignore that entry (`filter_ref` returns None, which keeps the block). An extent without the
key (older extents, columns without filters) is pruned by min/max alone.

Pruning (`prune_blocks`) is conservative: a block is dropped only when its stats rule it
out (`predicates.evaluate`: min/max, or a column all null under `StringHas`) or when, outside
any `Not`, the block's filter of the column rules out every looked-up value of an
`Equals`/`InSet` (at most `predicates.MAX_FILTER_VALUES` values) or a token of a `StringHas`.
No filter, a filter of another kind than the lookup (an int filter in an extent written
before the column was widened to string; a token filter under an equality, a membership
filter under `StringHas`), or an unreadable filter keeps the block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from shoal.format.base import And, BlockPredicate, Equals, InSet, Or, StringHas
from shoal.format.membership import BloomFilter
from shoal.format.predicates import MAX_FILTER_VALUES, evaluate

log = logging.getLogger("shoal.format")

BLOCK_FP_RATE = 0.002
TOKEN_FP_RATE = 0.01
FILTERS_KEY = "filters"
TOKEN_KIND = "tok"
MEMBERSHIP_KINDS = ("int", "str")
KINDS = (*MEMBERSHIP_KINDS, TOKEN_KIND)

# One block's filter of one column: its kind and the decoded filter.
BlockFilter = tuple[str, BloomFilter]


# ---- writing ------------------------------------------------------------------------------

def layout_section(block_filters: Sequence[dict[str, tuple[str, bytes]]], at: int
                   ) -> tuple[bytes, list[dict[str, dict[str, Any]]]]:
    """The filter section for filters given per block ({column: (kind, bytes)}), placed at
    object offset `at`, and each block's `"filters"` entry ({} for a block without)."""
    columns = list(dict.fromkeys(c for per_block in block_filters for c in per_block))
    parts: list[bytes] = []
    refs: list[dict[str, dict[str, Any]]] = [{} for _ in block_filters]
    pos = at
    for column in columns:
        for i, per_block in enumerate(block_filters):
            if column not in per_block:
                continue
            kind, blob = per_block[column]
            if kind not in KINDS:
                raise ValueError(f"block filter kind must be one of {KINDS}, not {kind!r}")
            refs[i][column] = {"kind": kind, "at": pos, "len": len(blob)}
            parts.append(blob)
            pos += len(blob)
    parts.append(b"\0" * (-(pos - at) % 8))
    return b"".join(parts), refs


# ---- reading ------------------------------------------------------------------------------

def filter_ref(block_stat: dict[str, Any], column: str) -> tuple[str, int, int] | None:
    """(kind, offset, length) of the block's filter of `column`, or None (none, or not a
    well-formed reference)."""
    refs = block_stat.get(FILTERS_KEY)
    ref = refs.get(column) if isinstance(refs, dict) else None
    if not isinstance(ref, dict):
        return None
    kind, at, n = ref.get("kind"), ref.get("at"), ref.get("len")
    if kind not in KINDS or type(at) is not int or type(n) is not int or at < 0 or n <= 0:
        return None
    return kind, at, n


def column_span(block_stats: Sequence[dict[str, Any]], column: str) -> tuple[int, int] | None:
    """[start, end) object offsets holding every block filter of `column`, or None."""
    refs = [r for s in block_stats if (r := filter_ref(s, column)) is not None]
    if not refs:
        return None
    return min(at for _, at, _ in refs), max(at + n for _, at, n in refs)


def decode_column(block_stats: Sequence[dict[str, Any]], column: str, data: bytes,
                  start: int, *, path: str = "") -> list[BlockFilter | None]:
    """Each block's filter of `column` from `data`, the object's bytes from offset `start`
    (`column_span`). A filter that cannot be decoded is logged and treated as absent."""
    out: list[BlockFilter | None] = []
    for i, s in enumerate(block_stats):
        ref = filter_ref(s, column)
        if ref is None:
            out.append(None)
            continue
        kind, at, n = ref
        lo = at - start
        try:
            if lo < 0 or lo + n > len(data):
                raise ValueError("outside the fetched range")
            out.append((kind, BloomFilter.from_bytes(data[lo:lo + n])))
        except ValueError as e:
            log.warning("extent %s: block %d's filter of %s is unreadable (%s); block kept",
                        path, i, column, e)
            out.append(None)
    return out


def filter_columns(predicate: BlockPredicate | None) -> dict[str, set[str]]:
    """The columns of the Equals/InSet/StringHas leaves (outside any Not) a block filter may
    decide, each with the filter kinds that can decide them."""
    out: dict[str, set[str]] = {}

    def walk(p: BlockPredicate | None) -> None:
        if isinstance(p, StringHas):
            out.setdefault(p.column, set()).add(TOKEN_KIND)
        elif isinstance(p, Equals) or (isinstance(p, InSet)
                                       and len(p.values) <= MAX_FILTER_VALUES):
            out.setdefault(p.column, set()).update(MEMBERSHIP_KINDS)
        elif isinstance(p, (And, Or)):
            for c in p.children:
                walk(c)

    walk(predicate)
    return out


def _matches_kind(kind: str, value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return (kind == "str" and isinstance(value, str)) or (kind == "int" and isinstance(value, int))


def prune_blocks(predicate: BlockPredicate | None, block_stats: Sequence[dict[str, Any]],
                 load: Callable[[str], Sequence[BlockFilter | None] | None]) -> list[int]:
    """Blocks that may hold a row matching `predicate`: block stats first, then the block
    filters of the looked-up columns, fetched with `load(column)` (one entry per block, or
    None) only when some block that the stats kept has one of a kind that decides the
    lookup (a token filter for `StringHas`, a membership filter for `Equals`/`InSet`)."""
    keep = [i for i, s in enumerate(block_stats) if evaluate(predicate, s)]
    if not keep:
        return keep
    wanted = filter_columns(predicate)
    columns = sorted(c for c, kinds in wanted.items()
                     if any((ref := filter_ref(block_stats[i], c)) is not None
                            and ref[0] in kinds for i in keep))
    if not columns:
        return keep
    loaded = {c: load(c) for c in columns}

    def block_keeps(i: int) -> bool:
        def entry(column: str) -> BlockFilter | None:
            filters = loaded.get(column)
            return filters[i] if filters is not None and i < len(filters) else None

        def might_contain(column: str, value: Any) -> bool:
            found = entry(column)
            if found is None or not _matches_kind(found[0], value):
                return True
            return found[1].might_contain(value)

        def has_token(column: str, token: str) -> bool:
            found = entry(column)
            return found is None or found[0] != TOKEN_KIND or found[1].might_contain(token)

        return evaluate(predicate, block_stats[i], might_contain, has_token)

    return [i for i in keep if block_keeps(i)]
