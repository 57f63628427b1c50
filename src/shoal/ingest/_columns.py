"""Vectorised coercion of whole columns, with the exact results of `_values.convert()`.

Two inputs:
- `from_arrow()`: a column Arrow's JSON reader produced against the read schema
  (`read_type()`): scalars come out typed; timestamps are read as strings and parsed here
  (Arrow's parser accepts more than RFC 3339); vectors are read as `list<double>` and checked.
- `from_raw()`: a column of raw JSON texts picked out by `_lines.raw_pass`. Strings, numbers
  and literals are converted with Arrow kernels and numpy; the odd leftovers (strings with
  escapes, 19-digit integers, vectors, base64) go through `_values.convert()` one by one.

Both return the column plus a per-row `flags` mask: rows whose value is not acceptable. A
flagged row's value is null here; the caller re-runs that line through the per-line path,
which produces the precise error. JSON `null` gives an Arrow null and is not flagged.
Values kept as JSON (`dynamic`, non-strings in `string`) over a `jsonlimits` limit are
flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.ingest._ext import scan as _scan
from shoal.ingest._values import (INT_RANGES, RFC3339_PATTERN, RFC3339_RE, ValueProblem,
                                  convert, days_from_civil, days_in_month, minify, rfc3339_ns)
from shoal.types.columns import ColumnType
from shoal.types.jsonlimits import exceeding

_RFC3339_FULL = "^" + RFC3339_PATTERN + "$"
_SHORT_INT = r"^-?[0-9]{1,18}$"
_PLAIN_DECIMAL = r"^-?(0|[1-9][0-9]{0,11})\.[0-9]{1,60}$"
# Whitespace outside every string: a run of non-quote non-space bytes and whole strings,
# then a space. Values that only have spaces inside strings are already canonical.
_LOOSE_WS = r'^(?:[^"\s]|"(?:[^"\\]|\\.)*")*\s'
_DATE_POS = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18])
_FRAC_SCALE = 10 ** np.arange(8, -1, -1, dtype=np.int64)
_SAFE_SEC = 9_223_372_035  # |seconds| below this cannot overflow int64 nanoseconds


def read_type(ctype: ColumnType) -> pa.DataType:
    """The type a column is read as by Arrow's JSON reader."""
    if ctype.kind == "timestamp":
        return pa.string()
    if ctype.kind == "vector":
        return pa.list_(pa.float64())
    return ctype.arrow()


@dataclass
class Converted:
    array: pa.Array
    flags: np.ndarray            # bool per row: value rejected
    present: np.ndarray | None   # bool per row: key present (raw columns only)


def _np_bool(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy bools, null as False (unpacks the bitmaps: several times
    faster than `fill_null` + `to_numpy` on the small arrays of a REST body)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n, off = len(arr), arr.offset
    if n == 0:
        return np.zeros(0, bool)
    validity, data = arr.buffers()[:2]
    out = _bits(data, off, n)
    if arr.null_count and validity is not None:
        out &= _bits(validity, off, n)
    return out


def _bits(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits offset .. offset+n of an Arrow bitmap (LSB first) as numpy bools."""
    skip, bit = divmod(offset, 8)
    raw = np.frombuffer(buf, np.uint8, count=(bit + n + 7) // 8, offset=skip)
    return np.unpackbits(raw, bitorder="little", count=bit + n)[bit:].view(bool)


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64 of len(arr)+1, data uint8) of a binary/string array."""
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, np.int32, count=len(arr) + 1,
                            offset=arr.offset * 4).astype(np.int64)
    data = (np.frombuffer(data_buf, np.uint8) if data_buf is not None
            else np.zeros(0, np.uint8))
    return offsets, data


def minify_array(arr: pa.Array) -> pa.Array:
    """`minify()` of every value; only values with whitespace outside strings are touched."""
    if len(arr) == 0 or arr.null_count == len(arr):
        return arr
    offsets, data = _buffers(arr)
    data = data[offsets[0]:offsets[-1]]
    # In valid JSON text a byte <= 0x20 is whitespace (raw controls are invalid in strings).
    if len(data) == 0 or data.min() > 0x20:
        return arr
    low = data <= 0x20
    starts = offsets[:-1] - offsets[0]
    nonempty = offsets[1:] > offsets[:-1]
    candidates = np.zeros(len(arr), bool)
    candidates[nonempty] = np.logical_or.reduceat(low, starts[nonempty])
    idx = np.flatnonzero(candidates)
    loose = _np_bool(pc.match_substring_regex(arr.take(pa.array(idx)), _LOOSE_WS))
    if not loose.any():
        return arr
    idx = idx[loose]
    mask = np.zeros(len(arr), bool)
    mask[idx] = True
    new = [minify(v) for v in arr.take(pa.array(idx)).to_pylist()]
    return pc.replace_with_mask(arr, pa.array(mask), pa.array(new, pa.binary()))


def rfc3339_array(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(epoch ns, ok) per value of a string/binary array: `_values.rfc3339_ns()` vectorised.

    One pass of the C scanner's `rfc3339` where it is built. Else (`_rfc3339_numpy`, also
    the reference the C pass is tested against): the shape check (one byte matrix when every
    value looks like the first, else RE2) admits RFC 3339 text only; Arrow's cast then does
    the arithmetic. Arrow rejects exactly the shaped strings our rules reject (bad month, day,
    hour, minute, second or offset, out of range) but also a few we accept (`t`/`z`, the
    first nanoseconds of 1677): when the cast fails, numpy redoes the arithmetic of
    `rfc3339_ns()` row by row, vectorised.
    """
    n = len(arr)
    ns = np.zeros(n, np.int64)
    if n == 0:
        return ns, np.zeros(0, bool)
    offsets, data = _buffers(arr)
    if _scan is not None:  # the same rules in one C pass (`rfc3339` in _scan.c)
        ok = np.zeros(n, np.uint8)
        _scan.rfc3339(offsets, data, ns, ok)
        good = ok.view(bool)
        if arr.null_count:
            good &= _np_bool(arr.is_valid())
            ns[~good] = 0
        return ns, good
    return _rfc3339_numpy(arr, ns, offsets, data)


def _rfc3339_numpy(arr: pa.Array, ns: np.ndarray, offsets: np.ndarray, data: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """`rfc3339_array` by numpy, Arrow and RE2 (the stand-in where the scanner is not built,
    and its reference in the tests)."""
    n = len(arr)
    ok = _uniform_shape(arr, offsets, data)
    if ok is None:
        ok = _np_bool(pc.match_substring_regex(arr, _RFC3339_FULL))
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return ns, ok
    shaped = arr if len(idx) == n else arr.take(pa.array(idx))
    if pa.types.is_binary(shaped.type):
        shaped = shaped.view(pa.string())
    try:
        parsed = pc.cast(shaped, pa.timestamp("ns", tz="UTC")).view(pa.int64())
        ns[idx] = parsed.to_numpy(zero_copy_only=False)
        return ns, ok
    except pa.ArrowInvalid:
        pass
    o = offsets[idx]
    end = offsets[idx + 1]
    tail = data[end[:, None] + np.arange(-6, 0)]
    zulu = (tail[:, 5] | 0x20) == ord("z")
    offset = (tail[:, 0] == ord("+")) | (tail[:, 0] == ord("-"))  # else no zone: UTC
    n_frac = np.maximum(end - o - 20 - np.where(zulu, 1, np.where(offset, 6, 0)), 0)
    frac_pos = np.minimum(o[:, None] + 20 + np.arange(9), len(data) - 1)
    frac = ((data[frac_pos].astype(np.int64) - 48) * (np.arange(9) < n_frac[:, None])
            ) @ _FRAC_SCALE
    digits = data[o[:, None] + _DATE_POS].astype(np.int64) - 48
    good, out, near_edge = _civil_ns(digits, frac, ~offset, tail)
    ok[idx] = good
    ns[idx] = out
    # Near the ends of the nanosecond range (years 1677 and 2262): exact Python integers.
    for j in np.flatnonzero(near_edge).tolist():
        i = int(idx[j])
        text = arr[i].as_py()
        try:
            ns[i] = rfc3339_ns(text if isinstance(text, str) else text.decode())
            ok[i] = True
        except ValueError:
            pass
    return ns, ok


def _uniform_shape(arr: pa.Array, offsets: np.ndarray, data: np.ndarray) -> np.ndarray | None:
    """The common case: every value has the shape of the first (same length, same literals,
    digits where it has digits). Then all are RFC 3339-shaped: checked on one (n, length)
    byte matrix, no regex. None when the values do not share one RFC 3339 shape.
    """
    n = len(arr)
    lengths = offsets[1:] - offsets[:-1]
    width = int(lengths[0])
    if arr.null_count or not 19 <= width <= 35 or not (lengths == width).all():
        return None
    first = bytes(data[offsets[0]:offsets[0] + width])
    if not first.isascii() or RFC3339_RE.fullmatch(first.decode()) is None:
        return None
    mat = data[offsets[0]:offsets[0] + n * width].reshape(n, width)
    shape = np.frombuffer(first, np.uint8)
    is_digit = (shape - 48) < 10
    low = np.where(is_digit, 48, shape).astype(np.uint8)
    span = np.where(is_digit, 9, 0).astype(np.uint8)
    if not ((mat - low) <= span).all():  # uint8 wrap-around: one test per byte
        return None
    return np.ones(n, bool)


def _civil_ns(digits: np.ndarray, frac: np.ndarray, zulu: np.ndarray, tail: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, ns, near_edge) from the date digits, fraction (ns) and last 6 bytes (offset);
    `zulu`: the time is UTC (`Z`, or no zone at all).

    near_edge: a valid date-time whose seconds are too close to the int64 nanosecond range
    for int64 arithmetic; the caller decides those with Python integers.
    """
    y = digits[:, 0] * 1000 + digits[:, 1] * 100 + digits[:, 2] * 10 + digits[:, 3]
    mo, d = digits[:, 4] * 10 + digits[:, 5], digits[:, 6] * 10 + digits[:, 7]
    hh, mi = digits[:, 8] * 10 + digits[:, 9], digits[:, 10] * 10 + digits[:, 11]
    ss = digits[:, 12] * 10 + digits[:, 13]
    t = tail.astype(np.int64) - 48
    oh = np.where(zulu, 0, t[:, 1] * 10 + t[:, 2])
    om = np.where(zulu, 0, t[:, 4] * 10 + t[:, 5])
    sign = np.where(tail[:, 0] == ord("-"), -1, 1)
    valid = ((mo >= 1) & (mo <= 12) & (d >= 1) & (d <= days_in_month(y, np.clip(mo, 1, 12)))
             & (hh <= 23) & (mi <= 59) & (ss <= 59) & (oh <= 23) & (om <= 59))
    sec = (days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss
           - sign * (oh * 3600 + om * 60))
    safe = valid & (np.abs(sec) <= _SAFE_SEC)
    ns = np.where(safe, sec * 1_000_000_000 + frac, 0)
    return safe, ns, valid & ~safe


# -- Arrow reader output -------------------------------------------------------------------

def from_arrow(ctype: ColumnType, arr: pa.Array) -> Converted:
    """Finish a column read by Arrow as `read_type(ctype)`."""
    k = ctype.kind
    if k == "timestamp":
        ns, ok = rfc3339_array(arr)  # ok is False for nulls
        return Converted(_timestamps(ns, ok), valid_mask(arr) & ~ok, None)
    if k == "vector":
        return _vector_from_lists(ctype, arr, valid_mask(arr))
    if k == "real":
        flags = valid_mask(arr) & ~_np_bool(pc.is_finite(arr))
        if flags.any():
            arr = pc.if_else(pa.array(flags), pa.scalar(None, pa.float64()), arr)
        return Converted(arr, flags, None)
    return Converted(arr.cast(ctype.arrow()) if not arr.type.equals(ctype.arrow()) else arr,
                     np.zeros(len(arr), bool), None)


def valid_mask(arr: pa.Array) -> np.ndarray:
    """Per row: not null (no kernel call when the array has no nulls)."""
    return np.ones(len(arr), bool) if arr.null_count == 0 else _np_bool(arr.is_valid())


def _timestamps(ns: np.ndarray, good: np.ndarray) -> pa.Array:
    return pa.array(ns, pa.int64(), mask=~good).view(pa.timestamp("ns", tz="UTC"))


def _vector_from_lists(ctype: ColumnType, arr: pa.Array, valid: np.ndarray) -> Converted:
    dim = ctype.dim
    assert dim is not None
    n = len(arr)
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
    child = arr.values
    lengths = offsets[1:] - offsets[:-1]
    shaped = valid & (lengths == dim)
    idx = np.flatnonzero(shaped)
    take = offsets[idx][:, None] + np.arange(dim)
    child_vals = np.asarray(child.to_numpy(zero_copy_only=False), np.float64)
    child_null = ~_np_bool(child.is_valid())
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = child_vals[take].astype(np.float32) if len(idx) else np.zeros((0, dim), np.float32)
    fine = ~child_null[take].any(axis=1) & np.isfinite(f32).all(axis=1)
    good = np.zeros(n, bool)
    good[idx[fine]] = True
    out = np.zeros((n, dim), np.float32)
    out[idx[fine]] = f32[fine]
    vec = pa.FixedSizeListArray.from_arrays(pa.array(out.ravel(), pa.float32()), dim,
                                            mask=pa.array(~good))
    return Converted(vec.cast(ctype.arrow()), valid & ~good, None)


# -- raw JSON texts ------------------------------------------------------------------------

def from_raw(ctype: ColumnType, raw: pa.BinaryArray, unit_ns: int = 1) -> Converted:
    """Convert raw JSON texts (binary, null = absent) to `ctype`; `unit_ns`: nanoseconds
    per unit of an epoch number in a timestamp column (`_values.convert`)."""
    n = len(raw)
    present = _np_bool(raw.is_valid())
    offsets, data = _buffers(raw)
    first = np.zeros(n, np.uint8)
    if len(data):
        first[present] = data[offsets[:-1][present]]
    json_null = first == ord("n")
    value_rows = present & ~json_null
    k = ctype.kind
    if k == "string":
        arr, flags = _strings(raw, first, value_rows)
    elif k == "dynamic":
        flags = exceeding(raw)
        arr = minify_array(raw)
        if json_null.any() or flags.any():
            arr = pc.if_else(pa.array(value_rows & ~flags), arr, pa.scalar(None, pa.binary()))
    elif k in ("bool", "int", "long", "real", "timestamp"):
        arr, flags = _scalars(ctype, raw, first, value_rows, unit_ns)
    else:  # vector, bytes: one by one
        arr, flags = _one_by_one(ctype, raw, value_rows)
    return Converted(arr, flags, present)


def _decimal_epochs(raw: pa.Array, unit_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(ns, ok) of epoch numbers written as plain decimals (`1795929000.123456`, what
    `time.time()` gives) in a unit of `unit_ns` nanoseconds (10**3, 10**6 or 10**9): the
    nanoseconds rounded half to even, as `_values.epoch_ns` computes them. ok is False for
    any other spelling (exponents, long integer parts), left to it."""
    n = len(raw)
    ns = np.zeros(n, np.int64)
    texts = raw.cast(pa.string()) if pa.types.is_binary(raw.type) else raw
    ok = _np_bool(pc.match_substring_regex(texts, _PLAIN_DECIMAL))
    if not ok.any():
        return ns, ok
    idx = np.flatnonzero(ok)
    sub = texts.take(pa.array(idx))
    negative = _np_bool(pc.starts_with(sub, "-"))
    parts = pc.split_pattern(pc.utf8_ltrim(sub, "-"), ".", max_splits=1)
    whole = np.asarray(pc.list_element(parts, 0).cast(pa.int64()), np.int64)
    frac = pc.list_element(parts, 1)
    digits = len(str(unit_ns)) - 1
    head = np.asarray(pc.utf8_rpad(pc.utf8_slice_codeunits(frac, 0, digits), digits, "0")
                      .cast(pa.int64()), np.int64)
    tail = pc.utf8_slice_codeunits(frac, digits, 64)
    first = np.asarray(pc.utf8_rpad(pc.utf8_slice_codeunits(tail, 0, 1), 1, "0")
                       .cast(pa.int64()), np.int64)
    beyond = _np_bool(pc.match_substring_regex(pc.utf8_slice_codeunits(tail, 1, 64), "[1-9]"))
    up = (first > 5) | ((first == 5) & (beyond | (head % 2 == 1)))
    fits = whole < (2**63 - 1) // unit_ns  # leaves room for the fraction: no overflow
    magnitude = np.where(fits, whole, 0) * unit_ns + head + up
    ns[idx] = np.where(negative, -magnitude, magnitude)
    ok[idx] = fits
    ns[~ok] = 0
    return ns, ok


def _one_by_one(ctype: ColumnType, raw: pa.Array, rows: np.ndarray
                ) -> tuple[pa.Array, np.ndarray]:
    out: list[Any] = [None] * len(raw)
    flags = np.zeros(len(raw), bool)
    texts = raw.to_pylist()
    for i in np.flatnonzero(rows).tolist():
        try:
            out[i] = convert(ctype, texts[i])
        except ValueProblem:
            flags[i] = True
    return pa.array(out, ctype.arrow()), flags


def _strings(raw: pa.Array, first: np.ndarray, rows: np.ndarray
             ) -> tuple[pa.Array, np.ndarray]:
    is_str = rows & (first == ord('"'))
    escaped = is_str & _np_bool(pc.match_substring(raw, "\\"))
    plain = is_str & ~escaped
    nested = rows & ((first == ord("{")) | (first == ord("[")))
    out = raw
    if plain.any():
        out = pc.if_else(pa.array(plain), pc.binary_slice(raw, 1, -1), out)
    if nested.any():
        mask = pa.array(nested)
        out = pc.replace_with_mask(out, mask, minify_array(raw.filter(mask)))
    if escaped.any():
        idx = np.flatnonzero(escaped)
        texts = raw.take(pa.array(idx)).to_pylist()
        decoded = [msgspec.json.decode(t).encode() for t in texts]
        out = pc.replace_with_mask(out, pa.array(escaped), pa.array(decoded, pa.binary()))
    flags = exceeding(raw) if nested.any() or (rows & ~is_str).any() else np.zeros(len(raw), bool)
    out = pc.if_else(pa.array(rows & ~flags), out, pa.scalar(None, pa.binary()))
    return out.view(pa.string()), flags


def _scalars(ctype: ColumnType, raw: pa.Array, first: np.ndarray, rows: np.ndarray,
             unit_ns: int = 1) -> tuple[pa.Array, np.ndarray]:
    n = len(raw)
    k = ctype.kind
    number = rows & ((first == ord("-")) | ((first >= ord("0")) & (first <= ord("9"))))
    good = np.zeros(n, bool)
    if k == "bool":
        values = _np_bool(pc.equal(raw, pa.scalar(b"true", pa.binary())))
        good = rows & ((first == ord("t")) | (first == ord("f")))
        return pa.array(values, pa.bool_(), mask=~good), rows & ~good
    if k == "real":
        values = np.zeros(n, np.float64)
        if number.any():
            idx = np.flatnonzero(number)
            parsed = pc.cast(raw.take(pa.array(idx)).view(pa.string()), pa.float64())
            vals = np.asarray(parsed.to_numpy(zero_copy_only=False), np.float64)
            values[idx] = vals
            good[idx] = np.isfinite(vals)
        return pa.array(values, pa.float64(), mask=~good), rows & ~good
    values = np.zeros(n, np.int64)
    short = number & _np_bool(pc.match_substring_regex(raw, _SHORT_INT))
    if short.any():
        idx = np.flatnonzero(short)
        values[idx] = pc.cast(raw.take(pa.array(idx)).view(pa.string()),
                              pa.int64()).to_numpy(zero_copy_only=False)
        good[idx] = True
        if k in INT_RANGES:
            lo, hi = INT_RANGES[k]
            good[idx] &= (values[idx] >= lo) & (values[idx] <= hi)
        elif unit_ns != 1:  # epoch numbers in a coarser unit: scaled, if int64 holds them
            fits = (values[idx] >= -((2**63) // unit_ns)) & (values[idx] <= (2**63 - 1) // unit_ns)
            good[idx] &= fits
            values[idx] = np.where(fits, values[idx], 0) * unit_ns
    rest = number & ~short  # long digit strings, fractions: one by one
    if k == "timestamp":
        is_str = rows & (first == ord('"'))
        escaped = is_str & _np_bool(pc.match_substring(raw, "\\"))
        plain = is_str & ~escaped
        if plain.any():
            idx = np.flatnonzero(plain)
            ns, ok = rfc3339_array(pc.binary_slice(raw.take(pa.array(idx)), 1, -1))
            values[idx] = ns
            good[idx] = ok
        rest |= escaped
    if k == "timestamp" and unit_ns != 1 and rest.any():
        idx = np.flatnonzero(rest)
        ns, ok = _decimal_epochs(raw.take(pa.array(idx)), unit_ns)
        values[idx[ok]] = ns[ok]
        good[idx[ok]] = True
        rest[idx[ok]] = False
    texts = raw.to_pylist() if rest.any() else []
    for i in np.flatnonzero(rest).tolist():
        try:
            values[i] = convert(ctype, texts[i], unit_ns)
            good[i] = True
        except ValueProblem:
            pass
    values[~good] = 0
    if k == "timestamp":
        return _timestamps(values, good), rows & ~good
    return pa.array(values, pa.int64(), mask=~good).cast(ctype.arrow()), rows & ~good
