"""Keys chosen to collide in the C extensions' hash tables (their hashes are not keyed), as
an attacker would choose them: the scanner's key set (FNV-1a, tests/ingest/test_scan.py) and
the token set (`add_token` in _kernels.c, tests/format/test_tokens.py)."""

from __future__ import annotations


def fnv1a(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


M64 = 2**64 - 1


def token_hash(token: bytes) -> int:
    """The token set's hash of a token of ASCII letters and digits (`add_token` in
    _kernels.c, little-endian machines): its lower-cased bytes 8 at a time."""
    low = token.lower()

    def word(at: int) -> int:
        return int.from_bytes(low[at:at + 8], "little")

    h = ((word(0) ^ (len(low) * 0x9E3779B97F4A7C15 & M64)) * 0xBF58476D1CE4E5B9) & M64
    for at in range(8, len(low), 8):
        h = (((h ^ (h >> 29)) ^ word(at)) * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def colliding(count: int, bits: int, token: bool = False, prefix: str = "k") -> list[str]:
    """Keys whose hashes share their low `bits` bits: FNV-1a (the scanner's key set), or with
    `token` the token set's `token_hash`."""
    out, i = [], 0
    while len(out) < count:
        key = f"{prefix}{i}"
        h = token_hash(key.encode()) if token else fnv1a(key.encode())
        if h & ((1 << bits) - 1) == 0:
            out.append(key)
        i += 1
    return out
