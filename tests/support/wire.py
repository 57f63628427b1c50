"""Hand-built protobuf bytes for hostile bodies no SDK would build (millions of repeated
fields), shared by the tests and bench/bench_limits.py."""

from __future__ import annotations


def length_delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: its tag (wire type 2), a varint length, `payload`."""
    n, size = len(payload), bytearray()
    while True:
        size.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    return bytes([field << 3 | 2]) + bytes(size) + payload
