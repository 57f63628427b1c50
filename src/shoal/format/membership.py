"""Membership (bloom) filters for high-cardinality columns (docs/storage.md).

An int column, or a string column whose values look like identifiers, gets a bloom filter
over its distinct values once its distinct set overflows, so that needle lookups
(`Equals`/`InSet` on a trace id) still prune extents in the catalog. Which columns qualify is
decided by `shoal.format.stats`. Contract:

- No false negatives: `might_contain(v)` is True for every value the filter was built from.
  False positives occur at about `fp_rate` (`DEFAULT_FP_RATE`, 0.1%, by default) for absent
  values: at 1% a needle over 1,500 extents would still read ~15 of them for nothing.
- Stable hashing, the same in every process and on every machine (version 2, below). It is
  computed with numpy over whole Arrow arrays (`hash_array`); one value (`hash_value`,
  `might_contain`) goes through the same code as a 1-element array, so the two always agree.
- Sized to the number of distinct values n: m = ceil(-n ln p / ln(2)^2) bits (at least 64),
  k = round(m/n ln 2). Large hash sets are counted with a HyperLogLog estimate (+3%).
- Probes (Kirsch-Mitzenmacher double hashing): with `g_i = (h1 + i*h2) mod 2^64`,
  i = 0..k-1, bit `((g_i >> 32) * m) >> 32` (version 2 with m < 2^32: a multiply instead of
  a division), else bit `g_i mod m` (version 1, and version 2 filters of 2^32 bits or more).
- Self-describing bytes (`to_bytes`/`from_bytes`): `b"SHBF"`, u8 version, u8 k, u16 zero,
  u64 m (little-endian), then ceil(m/8) bytes of bits: bit j is byte j>>3, mask 1<<(j&7).
  The version names the hash; both are readable, only version 2 is written.

Hash, version 2. All arithmetic is on unsigned 64-bit integers, wrapping mod 2^64;
`mix(z)` is the splitmix64 finaliser
`z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31`.

- int (int32 widened to int64): u = the value as 64-bit two's complement;
  `h1 = mix(u ^ INT_K1)`, `h2 = mix(u ^ INT_K2) | 1`.
- str: its UTF-8 bytes, length L, cut into w = max(1, ceil(L/8)) little-endian 64-bit words
  (the last one zero-padded); `acc = sum over words j of mix(word_j ^ (STR_POS * (j+1)))`,
  `base = acc + L * STR_LEN`; `h1 = mix(base ^ STR_K1)`, `h2 = mix(base ^ STR_K2) | 1`.
  The word loop is vectorised over all strings of an array at once (O(total bytes)); where
  the C kernels are built (`_kernels.c`) one C pass computes the same hashes, and sets a
  filter's bits (this numpy code is their reference in the tests).

Hash, version 1 (read only): the 128-bit xxh3 hash of the value's canonical bytes -- an int
as 8 bytes little-endian two's complement with seed 1, a string as its UTF-8 bytes with seed
2; its high and low 64-bit halves are h1 and h2.
"""

from __future__ import annotations

import functools
import logging
import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.format._buffers import string_buffers as _string_buffers
from shoal.format._ext import kernels as _kernels
from shoal.format.tokens import tokenize_array

# Needle cost grows with extents x fp_rate; 0.1% costs ~14.4 bits a value (1%: ~9.6).
DEFAULT_FP_RATE = 0.001

_MAGIC = b"SHBF"
_VERSION = 2                        # written; 1 (xxh3) stays readable
_HEADER = struct.Struct("<4sBBHQ")
_MASK64 = (1 << 64) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_CHUNK = 1 << 16                    # values per vectorised step (bounds temporaries)

# Version 2 constants (hex digits of pi).
INT_K1 = 0x243F6A8885A308D3
INT_K2 = 0x13198A2E03707344
_log = logging.getLogger("shoal.format")

STR_K1 = 0xA4093822299F31D0
STR_K2 = 0x082EFA98EC4E6C89
STR_POS = 0x452821E638D01377
STR_LEN = 0xBE5466CF34E90C6C
_U = np.uint64
_M1, _M2 = _U(0xBF58476D1CE4E5B9), _U(0x94D049BB133111EB)
_S30, _S27, _S31 = _U(30), _U(27), _U(31)
_ONE = _U(1)
_S32 = _U(32)
_SMALL_M = 1 << 32
# _TAIL[r]: mask of the first r bytes of a little-endian word, r = 0..8.
_TAIL = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)

# Version 1 (xxh3) seeds.
INT_SEED = 1
STR_SEED = 2


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on a uint64 array (which it returns)."""
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


def _finish(base: np.ndarray, k1: int, k2: int) -> tuple[np.ndarray, np.ndarray]:
    h1 = _mix(base ^ _U(k1))
    h2 = _mix(base ^ _U(k2))
    h2 |= _ONE
    return h1, h2


def _pos_keys(n: int) -> np.ndarray:
    """STR_POS * (j+1) for word positions j < n."""
    return np.arange(1, n + 1, dtype=np.uint64) * _U(STR_POS)


def _string_bases(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """`base` (see the module docstring) of each string; offsets int64 from 0 into data."""
    n = offsets.size - 1
    lens = np.diff(offsets)
    nw = np.maximum((lens + 7) >> 3, 1)
    lo, hi = int(lens.min()), int(lens.max())
    if lo == hi:                                   # fixed width (ids): a 2-D view, no gather
        width = int(nw[0])
        if hi == 8 * width:
            words = data[:n * hi].reshape(n, hi).view("<u8")
        else:
            padded = np.zeros((n, 8 * width), dtype=np.uint8)
            if hi:
                padded[:, :hi] = data[:n * hi].reshape(n, hi)
            words = padded.view("<u8")
        contrib = _mix(words ^ _pos_keys(width))
        acc = contrib[:, 0].copy()
        for col in range(1, width):
            acc += contrib[:, col]
    else:
        first = np.zeros(n, dtype=np.int64)
        np.cumsum(nw[:-1], out=first[1:])
        total = int(first[-1] + nw[-1])
        j = np.arange(total, dtype=np.int64) - np.repeat(first, nw)   # word index in string
        starts = np.repeat(offsets[:-1], nw) + 8 * j
        flat = np.zeros(data.size + 8, dtype=np.uint8)
        flat[:data.size] = data
        # element i of `unaligned` is the 8 bytes at offset i
        unaligned = np.ndarray((data.size + 1,), dtype="<u8", buffer=flat, strides=(1,))
        words = unaligned[starts]
        last = first + nw - 1
        words[last] &= _TAIL[lens - 8 * (nw - 1)]
        words ^= _pos_keys(int(nw.max()))[j]
        acc = np.add.reduceat(_mix(words), first)
    return acc + lens.astype(np.uint64) * _U(STR_LEN)



def hash_array(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) as uint64 arrays for the non-null values of an integer or string array
    (hash version 2)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        arr = pc.drop_null(arr)
    t = arr.type
    if len(arr) == 0 or pa.types.is_null(t):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t) and pc.max(arr).as_py() > _INT64_MAX:
            raise ValueError("uint64 values above the int64 range cannot be hashed")
        u = arr.cast(pa.int64()).to_numpy(zero_copy_only=False).astype("<i8").view(np.uint64)
        return _finish(u, INT_K1, INT_K2)
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise TypeError(f"membership filters hold int or string columns, not {t}")
    offsets, data = _string_buffers(arr)
    n = len(arr)
    if _kernels is not None:  # the same hashes in one C pass
        h1, h2 = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
        _kernels.string_hashes(offsets, data, h1, h2, STR_POS, STR_LEN, STR_K1, STR_K2)
        return h1, h2
    if n <= _CHUNK:
        return _finish(_string_bases(offsets, data), STR_K1, STR_K2)
    bases = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        a, b = int(offsets[lo]), int(offsets[hi])
        bases[lo:hi] = _string_bases(offsets[lo:hi + 1] - a, data[a:b])
    return _finish(bases, STR_K1, STR_K2)


def token_hashes(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) of the distinct tokens of a string array's non-null values (hash version 2):
    `hash_array(tokenize_array(arr))` in another order. The C kernel keeps only each token's
    hash, not the token (what a token filter needs once the token set has overflowed)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        arr = pc.drop_null(arr)
    if len(arr) == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    if _kernels is not None and hasattr(_kernels, "token_hashes"):
        offsets, data = _string_buffers(arr)
        found = _kernels.token_hashes(offsets, data, STR_POS, STR_LEN, STR_K1, STR_K2)
        if found is not None:
            return (np.frombuffer(found[0], dtype=np.uint64),
                    np.frombuffer(found[1], dtype=np.uint64))
        _log.info("token hashes collide in the C kernel's set: tokens are hashed as strings")
    return hash_array(tokenize_array(arr))


@functools.lru_cache(maxsize=1 << 14, typed=True)
def hash_value(value: int | str) -> tuple[int, int]:
    """(h1, h2) of one value (version 2): `hash_array` on a 1-element array. TypeError for
    anything but int (not bool) or str, ValueError for an int outside int64. Cached: the
    catalog asks every candidate extent's filter about the same few values."""
    if isinstance(value, str):
        arr = pa.array([value], type=pa.string())
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"int {value} is outside the int64 range")
        arr = pa.array([value], type=pa.int64())
    else:
        raise TypeError(f"membership filters hold int or str values, not {type(value).__name__}")
    h1, h2 = hash_array(arr)
    return int(h1[0]), int(h2[0])


def hash_value_v1(value: int | str) -> tuple[int, int]:
    """(h1, h2) of one value under hash version 1 (xxh3-128), for filters written by it."""
    import xxhash

    if isinstance(value, str):
        h = xxhash.xxh3_128_intdigest(value.encode("utf-8"), STR_SEED)
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"int {value} is outside the int64 range")
        h = xxhash.xxh3_128_intdigest(value.to_bytes(8, "little", signed=True), INT_SEED)
    else:
        raise TypeError(f"membership filters hold int or str values, not {type(value).__name__}")
    return h >> 64, h & _MASK64


def count_distinct_hashes(h1: np.ndarray) -> int:
    """Distinct values among hashed ones, up to 64-bit collisions."""
    if h1.size == 0:
        return 0
    s = np.sort(h1)
    return 1 + int(np.count_nonzero(s[1:] != s[:-1]))


_HLL_P = 14
_EXACT_COUNT_UP_TO = 1 << 17


class DistinctCounter:
    """Counts distinct values among hashes fed part by part, for sizing a filter: exact up
    to 2^17 hashes, beyond a HyperLogLog estimate (2^14 registers, ~0.8% standard error)
    raised by 3%, never more than the number of hashes. Feeding it as the hashes arrive
    keeps that work out of the moment the filter is built."""

    def __init__(self) -> None:
        self.total = 0
        self._small: list[np.ndarray] | None = []
        self._registers = np.zeros(1 << _HLL_P, dtype=np.uint8)

    def add(self, h: np.ndarray) -> None:
        self.total += int(h.size)
        if self._small is not None:
            self._small.append(h)
            if self.total <= _EXACT_COUNT_UP_TO:
                return
            pending, self._small = self._small, None
        else:
            pending = [h]
        p = _HLL_P
        for part in pending:
            idx = (part >> _U(64 - p)).astype(np.intp)
            # rank = leading zeros + 1 of the next 32 bits (1..33): smear the top set bit
            # downwards, count the bits
            x = ((part << _U(p)) >> _U(32)).astype(np.uint32)
            for shift in (1, 2, 4, 8, 16):
                x |= x >> np.uint32(shift)
            np.maximum.at(self._registers, idx, (33 - np.bitwise_count(x)).astype(np.uint8))

    def estimate(self) -> int:
        if self._small is not None:
            return count_distinct_hashes(np.concatenate(self._small) if self._small
                                         else np.zeros(0, dtype=np.uint64))
        regs = self._registers.size
        m = self._registers.astype(np.int64)
        alpha = 0.7213 / (1 + 1.079 / regs)
        est = alpha * regs * regs / float(np.sum(np.ldexp(1.0, -m)))
        zeros = int(np.count_nonzero(m == 0))
        if est <= 2.5 * regs and zeros:
            est = regs * math.log(regs / zeros)
        return min(self.total, math.ceil(est * 1.03))


def estimate_distinct_hashes(h: np.ndarray | Sequence[np.ndarray]) -> int:
    """`DistinctCounter`'s estimate over one array of hashes or several parts."""
    counter = DistinctCounter()
    for part in ([h] if isinstance(h, np.ndarray) else h):
        counter.add(np.ascontiguousarray(part, dtype=np.uint64))
    return counter.estimate()


class BloomFilter:
    """A bloom filter with m bits and k probes; see the module docstring for the layout."""

    __slots__ = ("_bits", "_k", "_m", "_version")

    def __init__(self, m: int, k: int, bits: np.ndarray, version: int = _VERSION) -> None:
        if not (1 <= m < 2**64 and 1 <= k <= 255):
            raise ValueError(f"bad bloom filter shape m={m} k={k}")
        if bits.dtype != np.uint8 or bits.size != (m + 7) // 8:
            raise ValueError("bloom filter bits must be ceil(m/8) uint8")
        if version not in (1, 2):
            raise ValueError(f"unknown bloom filter hash version {version}")
        self._m, self._k, self._bits, self._version = m, k, bits, version

    # ---- construction ------------------------------------------------------------------------
    @staticmethod
    def shape_for(n: int, fp_rate: float = DEFAULT_FP_RATE) -> tuple[int, int]:
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
              fp_rate: float = DEFAULT_FP_RATE) -> BloomFilter:
        """A filter over `values` (duplicates and nulls ignored)."""
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            distinct = [v for v in dict.fromkeys(values) if v is not None]
            for v in distinct:
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    raise TypeError("membership filters hold int or str values, "
                                    f"not {type(v).__name__}")
            if distinct and all(isinstance(v, str) for v in distinct):
                values = pa.array(distinct, type=pa.string())
            elif all(isinstance(v, int) for v in distinct):
                values = pa.array(distinct, type=pa.int64())
            else:   # a mix: hash each kind on its own
                h = [hash_array(pa.array([v for v in distinct if isinstance(v, kind)],
                                         type=t))
                     for kind, t in ((str, pa.string()), (int, pa.int64()))]
                h1, h2 = np.concatenate([h[0][0], h[1][0]]), np.concatenate([h[0][1], h[1][1]])
                return cls.from_hashes(h1, h2, n_distinct=len(h1), fp_rate=fp_rate)
        h1, h2 = hash_array(pc.unique(values))
        return cls.from_hashes(h1, h2, n_distinct=len(h1), fp_rate=fp_rate)

    @classmethod
    def from_hashes(cls, h1: np.ndarray, h2: np.ndarray, *, n_distinct: int | None = None,
                    fp_rate: float = DEFAULT_FP_RATE) -> BloomFilter:
        """A filter over pre-hashed (version 2) values; repeated hashes are fine. `n_distinct`
        sizes it (estimated from `h1` when not given, see `estimate_distinct_hashes`)."""
        return cls.from_hash_parts([(h1, h2)], n_distinct=n_distinct, fp_rate=fp_rate)

    @classmethod
    def from_hash_parts(cls, parts: Sequence[tuple[np.ndarray, np.ndarray]], *,
                        n_distinct: int | None = None,
                        fp_rate: float = DEFAULT_FP_RATE) -> BloomFilter:
        """`from_hashes` over several (h1, h2) parts, without concatenating them."""
        parts = [(np.ascontiguousarray(a, dtype=np.uint64),
                  np.ascontiguousarray(b, dtype=np.uint64)) for a, b in parts]
        n = (estimate_distinct_hashes([a for a, _ in parts]) if n_distinct is None
             else n_distinct)
        m, k = cls.shape_for(n, fp_rate)
        if _kernels is not None:  # the same bits, set in one C pass per part
            packed = np.zeros((m + 7) // 8, dtype=np.uint8)
            for h1, h2 in parts:
                _kernels.bloom_insert(packed, m, k, h1, h2, m < _SMALL_M)
            return cls(m, k, packed)
        bits = np.zeros(m, dtype=np.bool_)
        m64 = np.uint64(m)

        def insert(h1: np.ndarray, h2: np.ndarray) -> None:
            g = h1.copy()
            for _ in range(k):
                if m < _SMALL_M:         # ((g >> 32) * m) >> 32: the probe of version 2
                    j = g >> _S32
                    j *= m64
                    j >>= _S32
                else:
                    j = g % m64
                bits[j.view(np.int64)] = True     # j < m < 2^63: the view is exact
                g += h2                  # wraps mod 2^64, like the scalar probe

        for h1, h2 in parts:
            for lo in range(0, h1.size, _CHUNK):
                insert(h1[lo:lo + _CHUNK], h2[lo:lo + _CHUNK])
        return cls(m, k, np.packbits(bits, bitorder="little"))

    # ---- queries -----------------------------------------------------------------------------
    @property
    def m(self) -> int:
        return self._m

    @property
    def k(self) -> int:
        return self._k

    @property
    def version(self) -> int:
        return self._version

    def might_contain(self, value: Any) -> bool:
        """False only if `value` was certainly not added. Raises TypeError for types other than
        int/str. An int outside int64 cannot be in an int column: False."""
        try:
            h1, h2 = (hash_value if self._version == 2 else hash_value_v1)(value)
        except ValueError:
            return False
        bits, m = self._bits, self._m
        scaled = self._version == 2 and m < _SMALL_M
        for i in range(self._k):
            g = (h1 + i * h2) & _MASK64
            j = ((g >> 32) * m) >> 32 if scaled else g % m
            if not bits[j >> 3] & (1 << (j & 7)):
                return False
        return True

    def __repr__(self) -> str:
        return (f"BloomFilter(m={self._m}, k={self._k}, bytes={self._bits.size}, "
                f"version={self._version})")

    # ---- bytes -------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return _HEADER.pack(_MAGIC, self._version, self._k, 0, self._m) + self._bits.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BloomFilter:
        """Parse `to_bytes()` output; ValueError if it is not a filter this code can read."""
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ValueError("membership filter: truncated header")
        magic, version, k, _reserved, m = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("membership filter: bad magic")
        if version not in (1, 2):
            raise ValueError(f"membership filter: unsupported version {version}")
        body = data[_HEADER.size:]
        if m < 1 or k < 1 or len(body) != (m + 7) // 8:
            raise ValueError(f"membership filter: {len(body)} bytes of bits do not fit m={m}")
        return cls(m, k, np.frombuffer(body, dtype=np.uint8), version)
