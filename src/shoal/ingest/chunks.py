"""Cutting an NDJSON byte stream into chunks at line boundaries, for bulk ingest paths
(`shoal ingest`, file-drop): each chunk is one coercion request, and line numbers stay those
of the whole stream."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import IO

# The C scanner's newline count (memchr, GIL released); this module stays light (no numpy or
# pyarrow: `shoal --help` imports it), so it takes the extension itself, not `_lines`.
try:
    from shoal.ingest._scan import count_lines as _count_lines
except ImportError:  # not built: bytes.count (_lines warns once it is imported)
    _count_lines = None
    logging.getLogger(__name__).debug("shoal.ingest._scan is not built: bytes.count counts")


def count_lines(body: bytes) -> int:
    """The newline bytes of `body`."""
    return body.count(b"\n") if _count_lines is None else int(_count_lines(body))


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
