"""Extent formats behind the SegmentFormat protocols (docs/storage.md).

`base` holds the protocols, predicates and the write result; `tlm` is the shipping format.
Callers outside `shoal.format` name only the protocols; `get_format(name)` picks an
implementation by the name recorded in the catalog's manifest rows.
"""

from __future__ import annotations

from shoal.format.base import (And, BlockPredicate, DynamicPathEquals, DynamicPathExists, Equals,
                               ExtentMetadata, ExtentReader, ExtentWriter, ExtentWriteResult,
                               InSet, Not, Or, SegmentFormat, StringHas, TimeRange)
from shoal.format.membership import BloomFilter
from shoal.format.predicates import evaluate
from shoal.format.shred import DEFAULT_SHRED
from shoal.format.tlm import TlmFormat
from shoal.format.tokens import tokenize

__all__ = [
    "And", "BlockPredicate", "BloomFilter", "DynamicPathEquals", "DynamicPathExists", "Equals",
    "ExtentMetadata", "ExtentReader", "ExtentWriteResult", "ExtentWriter", "InSet", "Not", "Or",
    "SegmentFormat", "StringHas", "TimeRange", "TlmFormat", "default_formats", "evaluate",
    "get_format", "rewrite_format", "tokenize",
]


def default_formats(*, shred_on_write: bool = False) -> dict[str, SegmentFormat]:
    """Every shipping format by the name manifest rows record: what a process (a Spark task
    included) needs to read and write extents, with nothing of the client. With
    `shred_on_write`, the extents it writes carry shredded dynamic paths."""
    tlm = TlmFormat(shred=DEFAULT_SHRED if shred_on_write else None)
    return {tlm.name: tlm}


def rewrite_format(fmt: SegmentFormat) -> SegmentFormat:
    """The format compaction writes with: `fmt`, plus the work ingest may skip to keep its
    speed (shredded dynamic paths), since a rewrite runs in the background."""
    if isinstance(fmt, TlmFormat) and fmt.shred is None:
        return fmt.with_shred(DEFAULT_SHRED)
    return fmt


def get_format(name: str) -> SegmentFormat:
    """The format registered under `name` (as stored in manifest rows), default options."""
    if name == "tlm":
        return TlmFormat()
    raise ValueError(f"unknown extent format {name!r}")
