"""Membership (bloom) filters for high-cardinality columns (SPEC §6.1 "going further").

A string or int column whose distinct set overflowed its cap gets a bloom filter over its
distinct values, so that needle lookups (`Equals`/`InSet` on a trace id) still prune extents
in the catalog. Contract:

- No false negatives: `might_contain(v)` is True for every value the filter was built from.
  False positives occur at about `fp_rate` (1% by default) for absent values.
- Stable hashing, the same in every process and on every machine: the 128-bit xxh3 hash of
  the value's canonical bytes -- an int as 8 bytes little-endian two's complement with seed 1,
  a string as its UTF-8 bytes with seed 2 (so the int 5 and the string "5" differ). Its high
  and low 64-bit halves `h1`, `h2` give the k probe positions `((h1 + i*h2) mod 2^64) mod m`,
  i = 0..k-1 (Kirsch-Mitzenmacher double hashing).
- Sized to the number of distinct values n: m = ceil(-n ln p / ln(2)^2) bits (at least 64),
  k = round(m/n ln 2).
- Self-describing bytes (`to_bytes`/`from_bytes`): `b"SHBF"`, u8 version (1), u8 k, u16 zero,
  u64 m (little-endian), then ceil(m/8) bytes of bits: bit j is byte j>>3, mask 1<<(j&7).

`hash_array()` hashes an Arrow int/string array with the same result as `hash_value()` per
value; the writer uses it and `BloomFilter.from_hashes()`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

INT_SEED = 1
STR_SEED = 2
_MAGIC = b"SHBF"
_VERSION = 1
_HEADER = struct.Struct("<4sBBHQ")
_MASK64 = (1 << 64) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_CHUNK = 1 << 16           # values per vectorised step (bounds temporaries)


def hash_value(value: int | str) -> tuple[int, int]:
    """(h1, h2) of one value; TypeError for anything but int (not bool) or str."""
    if isinstance(value, str):
        h = xxhash.xxh3_128_intdigest(value.encode("utf-8"), STR_SEED)
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"int {value} is outside the int64 range")
        h = xxhash.xxh3_128_intdigest(value.to_bytes(8, "little", signed=True), INT_SEED)
    else:
        raise TypeError(f"membership filters hold int or str values, not {type(value).__name__}")
    return h >> 64, h & _MASK64


def hash_array(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) as uint64 arrays for the non-null values of an integer or string array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        arr = pc.drop_null(arr)
    t = arr.type
    digest = xxhash.xxh3_128_digest
    if len(arr) == 0 or pa.types.is_null(t):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    if pa.types.is_integer(t):
        raw = arr.cast(pa.int64()).to_numpy(zero_copy_only=False).astype("<i8").tobytes()
        digests = b"".join([digest(raw[i:i + 8], INT_SEED) for i in range(0, len(raw), 8)])
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        width = np.int64 if pa.types.is_large_string(t) else np.int32
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, dtype=width, count=len(arr) + 1,
                                offset=arr.offset * np.dtype(width).itemsize)
        lo, hi = int(offsets[0]), int(offsets[-1])
        data = data_buf[lo:hi].to_pybytes() if data_buf is not None and hi > lo else b""
        bounds = (offsets - lo).tolist()
        digests = b"".join([digest(data[a:b], STR_SEED) for a, b in zip(bounds, bounds[1:])])
    else:
        raise TypeError(f"membership filters hold int or string columns, not {t}")
    halves = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)   # canonical: high64, low64
    return halves[:, 0].astype(np.uint64), halves[:, 1].astype(np.uint64)


def count_distinct_hashes(h1: np.ndarray) -> int:
    """Distinct values among hashed ones, up to 64-bit collisions (used for sizing only)."""
    if h1.size == 0:
        return 0
    s = np.sort(h1)
    return 1 + int(np.count_nonzero(s[1:] != s[:-1]))


class BloomFilter:
    """A bloom filter with m bits and k probes; see the module docstring for the layout."""

    __slots__ = ("_m", "_k", "_bits")

    def __init__(self, m: int, k: int, bits: np.ndarray) -> None:
        if not (1 <= m < 2**64 and 1 <= k <= 255):
            raise ValueError(f"bad bloom filter shape m={m} k={k}")
        if bits.dtype != np.uint8 or bits.size != (m + 7) // 8:
            raise ValueError("bloom filter bits must be ceil(m/8) uint8")
        self._m, self._k, self._bits = m, k, bits

    # ---- construction ------------------------------------------------------------------------
    @staticmethod
    def shape_for(n: int, fp_rate: float = 0.01) -> tuple[int, int]:
        """(m, k) for n distinct values at false-positive rate `fp_rate`."""
        if not 0.0 < fp_rate < 1.0:
            raise ValueError("fp_rate must be in (0, 1)")
        if n <= 0:
            return 64, 1
        m = max(64, math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2))
        k = max(1, min(255, round(m / n * math.log(2))))
        return m, k

    @classmethod
    def build(cls, values: Iterable[int | str] | pa.Array | pa.ChunkedArray, *,
              fp_rate: float = 0.01) -> BloomFilter:
        """A filter over `values` (duplicates and nulls ignored)."""
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            h1, h2 = hash_array(pc.unique(values))
        else:
            distinct = {v for v in values if v is not None}
            pairs = [hash_value(v) for v in distinct]
            h1 = np.array([p[0] for p in pairs], dtype=np.uint64)
            h2 = np.array([p[1] for p in pairs], dtype=np.uint64)
        return cls.from_hashes(h1, h2, n_distinct=len(h1), fp_rate=fp_rate)

    @classmethod
    def from_hashes(cls, h1: np.ndarray, h2: np.ndarray, *, n_distinct: int | None = None,
                    fp_rate: float = 0.01) -> BloomFilter:
        """A filter over pre-hashed values; repeated hashes are fine. `n_distinct` sizes it
        (counted from `h1` when not given)."""
        h1 = np.ascontiguousarray(h1, dtype=np.uint64)
        h2 = np.ascontiguousarray(h2, dtype=np.uint64)
        n = count_distinct_hashes(h1) if n_distinct is None else n_distinct
        m, k = cls.shape_for(n, fp_rate)
        bits = np.zeros(m, dtype=np.bool_)
        m64 = np.uint64(m)
        for lo in range(0, h1.size, _CHUNK):
            g = h1[lo:lo + _CHUNK].copy()
            step = h2[lo:lo + _CHUNK]
            for _ in range(k):
                bits[g % m64] = True
                g += step                # wraps mod 2^64, like the scalar probe
        return cls(m, k, np.packbits(bits, bitorder="little"))

    # ---- queries -----------------------------------------------------------------------------
    @property
    def m(self) -> int:
        return self._m

    @property
    def k(self) -> int:
        return self._k

    def might_contain(self, value: Any) -> bool:
        """False only if `value` was certainly not added. Raises TypeError for types other than
        int/str. An int outside int64 cannot be in an int column: False."""
        try:
            h1, h2 = hash_value(value)
        except ValueError:
            return False
        bits = self._bits
        for i in range(self._k):
            j = ((h1 + i * h2) & _MASK64) % self._m
            if not bits[j >> 3] & (1 << (j & 7)):
                return False
        return True

    def __repr__(self) -> str:
        return f"BloomFilter(m={self._m}, k={self._k}, bytes={self._bits.size})"

    # ---- bytes -------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return _HEADER.pack(_MAGIC, _VERSION, self._k, 0, self._m) + self._bits.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BloomFilter:
        """Parse `to_bytes()` output; ValueError if it is not a filter this code can read."""
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ValueError("membership filter: truncated header")
        magic, version, k, _reserved, m = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("membership filter: bad magic")
        if version != _VERSION:
            raise ValueError(f"membership filter: unsupported version {version}")
        body = data[_HEADER.size:]
        if m < 1 or k < 1 or len(body) != (m + 7) // 8:
            raise ValueError(f"membership filter: {len(body)} bytes of bits do not fit m={m}")
        return cls(m, k, np.frombuffer(body, dtype=np.uint8))
