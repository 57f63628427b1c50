"""Cutting an NDJSON byte stream into chunks at line boundaries, for bulk ingest paths
(`shoal ingest`, file-drop): each chunk is one coercion request, and line numbers stay those
of the whole stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from shoal.ingest._ext import scan as _scan  # light: no numpy or pyarrow (`shoal --help`)


def count_lines(body: bytes) -> int:
    """The newline bytes of `body`."""
    return body.count(b"\n") if _scan is None else int(_scan.count_lines(body))


def iter_chunks(stream: IO[bytes], chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(chunk, number of lines before it); chunks of about `chunk_bytes` end at a newline
    (except the last, which is dropped when it holds only whitespace)."""
    carry = b""
    lines_before = 0
    while True:
        block = stream.read(chunk_bytes)
        if not block:
            break
        cut = block.rfind(b"\n")  # the carry never holds a newline
        if cut < 0:
            carry += block
            continue
        chunk = b"".join((carry, memoryview(block)[:cut + 1]))  # one copy of the block
        carry = block[cut + 1:]
        yield chunk, lines_before
        lines_before += count_lines(chunk)
    if carry.strip():
        yield carry, lines_before
