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
from shoal.format.tlm import TlmFormat
from shoal.format.tokens import tokenize

__all__ = [
    "And", "BlockPredicate", "BloomFilter", "DynamicPathEquals", "DynamicPathExists", "Equals",
    "ExtentMetadata", "ExtentReader", "ExtentWriteResult", "ExtentWriter", "InSet", "Not", "Or",
    "SegmentFormat", "StringHas", "TimeRange", "TlmFormat", "default_formats", "evaluate",
    "get_format", "tokenize",
]


def default_formats() -> dict[str, SegmentFormat]:
    """Every shipping format by the name manifest rows record: what a process (a Spark task
    included) needs to read and write extents, with nothing of the client."""
    tlm = TlmFormat()
    return {tlm.name: tlm}


def get_format(name: str) -> SegmentFormat:
    """The format registered under `name` (as stored in manifest rows), default options."""
    if name == "tlm":
        return TlmFormat()
    raise ValueError(f"unknown extent format {name!r}")
