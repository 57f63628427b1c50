"""Keys chosen to collide in the C extensions' hash tables (their FNV-1a hash is not keyed),
as an attacker would choose them: tests/ingest/test_scan.py, tests/format/test_tokens.py."""

from __future__ import annotations


def fnv1a(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


def colliding(count: int, bits: int, mix: bool = False, prefix: str = "k") -> list[str]:
    """Keys whose (unkeyed) FNV-1a hashes share their low `bits` bits, as an attacker would
    choose them (`mix`: the token kernel's h ^ h >> 29)."""
    out, i = [], 0
    while len(out) < count:
        key = f"{prefix}{i}"
        h = fnv1a(key.encode())
        if mix:
            h ^= h >> 29
        if h & ((1 << bits) - 1) == 0:
            out.append(key)
        i += 1
    return out
