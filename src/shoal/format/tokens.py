"""The word tokenizer behind token sets and `StringHas` (docs/storage.md).

A token is a maximal run of ASCII letters and digits, at least 2 characters long, lower-cased.
Every other character, including every non-ASCII one, separates tokens:
`"Connection-FAILED: timeout42 ü x"` -> `{"connection", "failed", "timeout42"}`.

`tokenize(text)` is the reference for one string; `tokenize_array(arr)` is the vectorised
form the extent writer uses (numpy over the Arrow string buffers, no per-row Python). Both
must agree exactly: the union of `tokenize(v)` over the non-null values of `arr` equals the
set of values of `tokenize_array(arr)`.

`tokenize_array` first cuts the values into pieces after every ASCII whitespace or control
byte and keeps the distinct pieces (numpy finds the cuts, the pieces are views of the values'
own bytes, Arrow's hash kernel dedups them): such bytes separate tokens, so the tokens of the
values are the tokens of their pieces, and free text repeats its pieces ("word ") far more
often than whole values.
"""

from __future__ import annotations

import logging
import re
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.format._buffers import string_buffers as _string_buffers

from shoal.format._ext import kernels as _kernels

logger = logging.getLogger(__name__)

MIN_TOKEN_LEN = 2

_TOKEN_RE = re.compile(r"[A-Za-z0-9]{2,}")


def tokenize(text: str) -> set[str]:
    """The tokens of one string."""
    # Extract first, lower after: str.lower() maps some non-ASCII characters (the Kelvin sign)
    # to ASCII letters, which must stay separators.
    return {m.lower() for m in _TOKEN_RE.findall(text)}


def tokenize_array(arr: pa.Array | pa.ChunkedArray, cap: int | None = None) -> pa.Array:
    """The distinct tokens of every non-null value of a string array, as a string array.

    Unordered. Feed it the distinct values of a column (`pc.unique`) so repeated values are
    tokenized once. With `cap`, the work may stop once there are more than `cap` distinct
    tokens: the array returned then only tells that (its length is over `cap`).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise TypeError(f"tokenize_array needs a string array, got {arr.type}")
    if arr.null_count:
        arr = pc.drop_null(arr)
    if len(arr) == 0:
        return pa.array([], type=pa.string())
    if _kernels is None:
        return _tokenize_distinct(_distinct_pieces(arr))
    offsets, data = _string_buffers(arr)
    found = _kernels.tokens(offsets, data, sys.maxsize if cap is None else cap)
    if found is None:  # tokens chosen to collide in the kernel's (unkeyed) hash set
        logger.info("tokens collide in the C kernel's hash set: numpy tokenizes these values")
        return _tokenize_distinct(_distinct_pieces(arr))
    token_offsets, token_data = found
    return pa.StringArray.from_buffers(len(token_offsets) // 4 - 1, pa.py_buffer(token_offsets),
                                       pa.py_buffer(token_data))


def numpy_tokenize_array(arr: pa.Array) -> pa.Array:
    """`tokenize_array` by numpy alone (the reference the C kernel is tested against)."""
    if arr.null_count:
        arr = pc.drop_null(arr)
    if len(arr) == 0:
        return pa.array([], type=pa.string())
    return _tokenize_distinct(_distinct_pieces(arr))


def _distinct_pieces(arr: pa.Array) -> pa.Array:
    """The distinct pieces of the values of a string array without nulls, cut after every
    byte <= 0x20 (ASCII whitespace and control bytes) and at the start of every value: a
    binary array whose tokens are exactly those of the values.

    No cut is inside a token (a cut follows a byte that is not token material, or starts a
    value), so the tokens of the values are the tokens of their pieces. The pieces are
    offsets into the values' own data buffer (no copy), and free text repeats its pieces
    ("word ") far more often than whole values; Arrow's hash kernel keeps the distinct ones.
    """
    offsets, data = _string_buffers(arr)
    size = data.size
    if size == 0:
        return pa.array([], type=pa.binary())
    starts = np.empty(size + 1, dtype=np.bool_)
    starts[0] = True
    np.less_equal(data, np.uint8(0x20), out=starts[1:])
    starts[offsets[:-1]] = True
    starts[size] = True
    bounds = np.flatnonzero(starts)
    large = size >= 2**31
    pieces = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), bounds.size - 1,
        [None, pa.py_buffer(bounds if large else bounds.astype(np.int32)), pa.py_buffer(data)])
    return pc.unique(pieces)


def _tokenize_distinct(arr: pa.Array) -> pa.Array:
    """`tokenize_array` of a string array without nulls (distinct words, ideally)."""
    if len(arr) == 0:
        return pa.array([], type=pa.string())
    offsets, data = _string_buffers(arr)
    if data.size == 0:
        return pa.array([], type=pa.string())
    # Token bytes: ASCII digits, and ASCII letters (b | 0x20 folds A-Z onto a-z and nothing
    # else onto a-z); uint8 wrap-around turns each range test into one comparison.
    is_tok = (data - np.uint8(48)) < 10
    is_tok |= ((data | np.uint8(0x20)) - np.uint8(97)) < 26
    # Runs of token bytes; a run also ends at the end of a value: values never run together.
    edges = np.diff(is_tok.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = edges == 1, edges == -1
    cuts = offsets[1:-1]
    cuts = cuts[(cuts > 0) & (cuts < data.size)]
    cuts = cuts[is_tok[cuts] & is_tok[cuts - 1]]
    starts[cuts] = True
    ends[cuts] = True
    run_start, run_end = np.flatnonzero(starts), np.flatnonzero(ends)
    if run_start.size == 0:
        return pa.array([], type=pa.string())
    # Runs cover exactly the token bytes, in order: lengths give the offsets of every run.
    token_bytes = data[is_tok] | np.uint8(0x20)   # digits already have bit 0x20 set
    large = token_bytes.size >= 2**31
    token_offsets = np.zeros(run_start.size + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(run_end - run_start, out=token_offsets[1:])
    runs = (pa.LargeStringArray if large else pa.StringArray).from_buffers(
        run_start.size, pa.py_buffer(token_offsets), pa.py_buffer(token_bytes))
    tokens = runs.filter(pc.greater_equal(pc.binary_length(runs), MIN_TOKEN_LEN))
    return pc.unique(tokens)
