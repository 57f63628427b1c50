"""Cutting an NDJSON byte stream into chunks at line boundaries, for bulk ingest paths
(`shoal ingest`, file-drop): each chunk is one coercion request, and line numbers stay those
of the whole stream."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from typing import IO, cast

from shoal.ingest._ext import scan as _scan  # light: no numpy or pyarrow (`shoal --help`)


def count_lines(body: bytes) -> int:
    """The newline bytes of `body`."""
    return body.count(b"\n") if _scan is None else int(_scan.count_lines(body))


def record_lines(body: bytes) -> Sequence[int]:
    """The 0-based numbers of the lines of `body` that are not blank: the lines the write
    path answers for, as rows or rejected lines (`IngestAck.rows + rejected_count`). A
    numpy array (one C pass over the body)."""
    from shoal.ingest._lines import BLANK, LineIndex

    return cast("Sequence[int]", (LineIndex.build(body).kind != BLANK).nonzero()[0])


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


_TAIL_BYTES = 1 << 16   # a window's last newline is looked for this many bytes at a time


def iter_file_chunks(fd: int, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """`iter_chunks` of a regular file (its descriptor): the same chunks, each read with
    `os.pread` straight into its own bytes object, so the kernel's copy runs with the GIL
    released. `iter_chunks` joins the previous block's tail and this block's head into the
    chunk under the GIL: 32 MB copied per chunk, 40-80 ms of GIL each in `shoal ingest`
    (py-spy `--gil`), while the write path's threads wait for it. The file's size is taken
    once, when reading starts."""
    size = os.fstat(fd).st_size
    start = window = lines_before = 0
    while window < size:
        end = min(window + chunk_bytes, size)
        cut = _last_newline(fd, window, end)
        window = end
        if cut < 0:         # no newline in this window: it joins the next chunk
            continue
        chunk = _pread(fd, start, cut + 1)
        start = cut + 1
        yield chunk, lines_before
        lines_before += count_lines(chunk)
    if start < size:
        rest = _pread(fd, start, size)
        if rest.strip():
            yield rest, lines_before


def is_regular_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _last_newline(fd: int, lo: int, hi: int) -> int:
    """The offset of the last newline in bytes [lo, hi) of the file, or -1."""
    pos = hi
    while pos > lo:
        piece_lo = max(lo, pos - _TAIL_BYTES)
        at = _pread(fd, piece_lo, pos).rfind(b"\n")
        if at >= 0:
            return piece_lo + at
        pos = piece_lo
    return -1


def _pread(fd: int, lo: int, hi: int) -> bytes:
    """Bytes [lo, hi) of the file (fewer only if it was cut short meanwhile)."""
    data = os.pread(fd, hi - lo, lo)
    if len(data) == hi - lo or not data:
        return data
    pieces = [data]
    got = len(data)
    while got < hi - lo:
        more = os.pread(fd, hi - lo - got, lo + got)
        if not more:
            break
        pieces.append(more)
        got += len(more)
    return b"".join(pieces)
