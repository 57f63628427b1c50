"""The `tlm` extent format: v3 (written by default), v2 (written on request) and v1 (read
only) (docs/storage.md).

Byte layout of one extent object:

    v3:  b"KYMA\\x03" || Parquet file || [filter section] || block_stats_json || stats_len
         (u32 LE) || b"KYMA\\x03"
    v2:  b"KYMA\\x02" || Arrow IPC file || block_stats_json || stats_len (u32 LE) || b"KYMA\\x02"
    v1:  b"KYMA\\x01" || Arrow IPC file

v3 keeps v2's envelope and JSON block stats; its body is one complete Parquet file, one row
group per block, encoded as `shoal.format.parquet_body` describes (dictionary strings, delta
timestamps, zstd). Its filter section, if any, sits inside the Parquet file just before
Parquet's footer metadata, as v2's sits before Arrow's footer: Parquet finds its footer from
the end and its column chunks by absolute offsets, so any Parquet reader opens the body as
it is and never reads the section. What is said below of the IPC file holds for the
Parquet file alike.

An extent whose columns have per-block membership filters holds them in a filter section
inside the Arrow IPC file, just before Arrow's footer, located by the `"filters"` entries of
the block stats (see `shoal.format.blockfilters`); the IPC file stays one that any Arrow
reader opens as it is, and a v2 reader that does not know the section never reads it.

The Arrow IPC part is a complete IPC *file* on its own (its offsets are relative to its own
start); each record batch is one block of at most `block_rows` rows, never empty. IPC buffer
compression (zstd by default, lz4, or none) is a writer option. `block_stats_json` is compact
UTF-8 JSON, one entry per block (see `shoal.format.stats`); `stats_len` is its byte length.

Writer: blocks are cut as rows arrive; each block's Arrow serialisation runs on a background
thread while its stats are computed on the caller's (extent stats, membership filters
included, are finished while the last blocks are still being serialised), and `finish()`
writes the object with a single `store.put` under `f"{prefix}/{extent_id}.tlm"` (extent_id =
uuid4 hex). The object is assembled in one buffer without copying the IPC body again: the
leading magic goes first, Arrow writes behind it through a view whose positions start at 0
(Arrow records absolute stream positions in its footer, and the IPC file must be valid on
its own), and the JSON footer, its length and the trailing magic follow. With block filters,
what Arrow writes when the IPC file is closed is held back, and the filter section goes in
before Arrow's footer (whose length and magic end the IPC file).

Shredded paths: a `dynamic` column's common JSON paths may be stored beside it as hidden
utf8 columns of the body (`shoal.format.shred`): the writer appends them to each block
(their schema fixed by the first block), and the reader keeps them out of the extent schema
and of whole blocks, reading one only when a projection names it.

Reader: reads the 5-byte head and one speculative tail range (the last `tail_prefetch`
bytes: trailing magic, stats_len, the JSON and normally Arrow's own footer), checks the
framing, then opens the IPC slice through a range-reading file view, so `read_block` fetches
only that block's bytes -- and with a projection only the projected columns' buffers.
`pruned_blocks` reads a column's block filters (one range) only when min/max keep a block
that has one for a column the predicate looks up.
`bytes_read` counts every byte fetched from the store. Bad framing, a footer that does not
match the body, or an unreadable body raise `ExtentFormatError`.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import uuid
from collections import deque
from collections.abc import Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from shoal.errors import ExtentFormatError
from shoal.format.base import BlockPredicate, ExtentMetadata, ExtentWriteResult
from shoal.format.blockfilters import (FILTERS_KEY, BlockFilter, column_span, decode_column,
                                       layout_section, prune_blocks)
from shoal.format.membership import DEFAULT_FP_RATE
from shoal.format.parquet_body import (PARQUET_TRAILER, ParquetBlocks, metadata_length,
                                       new_writer, parse_metadata, write_block)
from shoal.format.shred import DEFAULT_SHRED, Shredder, ShredOptions, is_hidden
from shoal.format.stats import ExtentStatsBuilder
from shoal.storage.base import ObjectStore

log = logging.getLogger("shoal.format")

MAGIC_V1 = b"KYMA\x01"
MAGIC_V2 = b"KYMA\x02"
MAGIC_V3 = b"KYMA\x03"
MAGIC_LEN = 5
_STATS_LEN = struct.Struct("<I")
TAIL_LEN = _STATS_LEN.size + MAGIC_LEN          # u32 stats_len + trailing magic
DEFAULT_BLOCK_ROWS = 65536
DEFAULT_TAIL_PREFETCH = 64 * 1024
Compression = Literal["zstd", "lz4"] | None
_COMPRESSIONS = ("zstd", "lz4", None)
Version = Literal[2, 3]
_VERSIONS = (2, 3)
DEFAULT_VERSION: Version = 3
_ARROW_MAGIC = b"ARROW1"
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, pa.ArrowNotImplementedError,
                 pa.ArrowTypeError, pa.ArrowKeyError, pa.ArrowIndexError, OSError)


class TlmFormat:
    """`SegmentFormat` for tlm extents. Options apply to every extent it starts or opens.

    `membership_filters`: True (default) builds a bloom filter for an overflowing int column
    or identifier-like string column (no whitespace in any value; see `shoal.format.stats`),
    False builds none, and a collection of column names builds them for exactly those
    columns whatever their values look like. `fp_rate` is the filters' false-positive rate.
    `block_filters`: those columns also get a filter per block (see
    `shoal.format.blockfilters`). `version` is the layout new extents are written in (3, or
    2); extents of every version are read.
    `shred`: dynamic columns get hidden sub-columns of their common paths
    (`shoal.format.shred`); None writes none.
    """

    name = "tlm"

    def __init__(self, *, compression: Compression = "zstd",
                 membership_filters: bool | Collection[str] = True,
                 fp_rate: float = DEFAULT_FP_RATE, block_filters: bool = True,
                 tail_prefetch: int = DEFAULT_TAIL_PREFETCH,
                 version: Version = DEFAULT_VERSION,
                 shred: ShredOptions | None = DEFAULT_SHRED) -> None:
        if version not in _VERSIONS:
            raise ValueError(f"version must be one of {_VERSIONS}, got {version!r}")
        if compression not in _COMPRESSIONS:
            raise ValueError(f"compression must be one of {_COMPRESSIONS}, got {compression!r}")
        if tail_prefetch < TAIL_LEN:
            raise ValueError(f"tail_prefetch must be at least {TAIL_LEN}")
        self.compression = compression
        self.membership_filters = (membership_filters if isinstance(membership_filters, bool)
                                   else frozenset(membership_filters))
        self.fp_rate = fp_rate
        self.block_filters = block_filters
        self.tail_prefetch = tail_prefetch
        self.version: Version = version
        self.shred = shred

    def with_shred(self, shred: ShredOptions | None) -> TlmFormat:
        """This format with other shredding options."""
        return TlmFormat(compression=self.compression,
                         membership_filters=self.membership_filters, fp_rate=self.fp_rate,
                         block_filters=self.block_filters, tail_prefetch=self.tail_prefetch,
                         version=self.version, shred=shred)

    def open_extent(self, store: ObjectStore, path: str) -> TlmReader:
        return TlmReader(store, path, tail_prefetch=self.tail_prefetch)

    def start_extent(self, store: ObjectStore, prefix: str, schema: pa.Schema, *,
                     block_rows: int = DEFAULT_BLOCK_ROWS) -> TlmWriter:
        return TlmWriter(store, prefix, schema, block_rows=block_rows,
                         compression=self.compression,
                         membership_filters=self.membership_filters, fp_rate=self.fp_rate,
                         block_filters=self.block_filters, version=self.version,
                         shred=self.shred)

    def read_block_filters(self, store: ObjectStore, path: str,
                           block_stats: Sequence[dict[str, Any]], column: str
                           ) -> tuple[list[BlockFilter | None] | None, int]:
        """Each block's filter of `column` (None: the extent has none) from the block stats
        of the extent at `path` (one range read), and the bytes read."""
        span = column_span(block_stats, column)
        if span is None:
            return None, 0
        data = store.get_range(path, span[0], span[1] - span[0])
        return decode_column(block_stats, column, data, span[0], path=path), len(data)


def extent_key(prefix: str, extent_id: str) -> str:
    prefix = prefix.rstrip("/")
    return f"{prefix}/{extent_id}.tlm" if prefix else f"{extent_id}.tlm"


def encode_footer(stats: list[dict[str, Any]], magic: bytes = MAGIC_V2) -> bytes:
    """`block_stats_json || stats_len || magic`: what ends a v2 (or v3) extent."""
    footer = json.dumps(stats, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(footer) >= 1 << 32:
        raise ValueError("block stats footer exceeds 4 GiB")
    return b"".join([footer, _STATS_LEN.pack(len(footer)), magic])


def encode_v2(ipc_file: bytes | pa.Buffer | Sequence[bytes | pa.Buffer],
              stats: list[dict[str, Any]]) -> bytes:
    """Frame an Arrow IPC file (or the pieces it is written in, back to back) and its block
    stats as a v2 extent."""
    pieces = [ipc_file] if isinstance(ipc_file, bytes | pa.Buffer) else list(ipc_file)
    return b"".join([MAGIC_V2, *pieces, encode_footer(stats)])


def parquet_body_span(data: pa.Buffer, path: str) -> tuple[int, int] | None:
    """Where the Parquet body of the extent whose whole bytes are `data` lies (start, end),
    or None when it is not a v3 extent. Only the framing is checked: the envelope's magics
    and the stats length (an unreadable body surfaces when it is read)."""
    size = data.size
    if size < MAGIC_LEN:
        raise ExtentFormatError(path, f"{size} bytes is shorter than the magic")
    head = data[:MAGIC_LEN].to_pybytes()
    if head != MAGIC_V3:
        if head in (MAGIC_V1, MAGIC_V2):
            return None
        raise ExtentFormatError(path, f"bad leading magic {head!r}")
    if size < MAGIC_LEN + TAIL_LEN:
        raise ExtentFormatError(path, f"truncated: {size} bytes leave no room for the footer")
    tail = data[size - TAIL_LEN:].to_pybytes()
    if tail[_STATS_LEN.size:] != head:
        raise ExtentFormatError(path, "bad trailing magic (truncated object?)")
    (stats_len,) = _STATS_LEN.unpack(tail[:_STATS_LEN.size])
    if stats_len > size - MAGIC_LEN - TAIL_LEN:
        raise ExtentFormatError(path, f"stats_len {stats_len} points outside the "
                                      f"{size}-byte object")
    return MAGIC_LEN, size - TAIL_LEN - stats_len


# ---- writer -------------------------------------------------------------------------------

def warm_up(batch: pa.RecordBatch) -> None:
    """The statistics of `batch`, its compressed IPC and its Parquet body, in memory and
    thrown away: the kernels, Arrow's compute functions, the encoders and the codec a
    process's first extent would otherwise set up (`shoal serve` runs this before it
    listens)."""
    builder = ExtentStatsBuilder(batch.schema)
    builder.add_block(batch)
    builder.finish()
    with pa.ipc.new_file(pa.BufferOutputStream(), batch.schema,
                         options=pa.ipc.IpcWriteOptions(compression="zstd")) as ipc:
        ipc.write_batch(batch)
    body = new_writer(pa.BufferOutputStream(), batch.schema, "zstd", batch)
    write_block(body, batch)
    body.close()


class TlmWriter:
    """`ExtentWriter` for tlm v3 (or v2). Not thread-safe: one caller appends, then
    finishes."""

    def __init__(self, store: ObjectStore, prefix: str, schema: pa.Schema, *,
                 block_rows: int = DEFAULT_BLOCK_ROWS, compression: Compression = "zstd",
                 membership_filters: bool | Collection[str] = True,
                 fp_rate: float = DEFAULT_FP_RATE, block_filters: bool = True,
                 version: Version = DEFAULT_VERSION,
                 shred: ShredOptions | None = None) -> None:
        if version not in _VERSIONS:
            raise ValueError(f"version must be one of {_VERSIONS}, got {version!r}")
        if block_rows < 1:
            raise ValueError("block_rows must be at least 1")
        if compression not in _COMPRESSIONS:
            raise ValueError(f"compression must be one of {_COMPRESSIONS}, got {compression!r}")
        self._store = store
        self._schema = schema
        self._block_rows = block_rows
        self.extent_id = uuid.uuid4().hex
        self.object_path = extent_key(prefix, self.extent_id)
        self._pending: deque[pa.RecordBatch] = deque()
        self._pending_rows = 0
        self._rows = 0
        self._block_stats: list[dict[str, Any]] = []
        self._stats = ExtentStatsBuilder(schema, membership_filters=membership_filters,
                                         fp_rate=fp_rate, block_filters=block_filters)
        # Arrow writes the body into a stream of its own (native: no Python call per
        # buffer, so the serialising thread never waits for the GIL); `finish` frames it.
        self.version: Version = version
        self._sink = pa.BufferOutputStream()
        self._compression: Compression = compression
        # The body writer starts with the first block: its values pick v3's encodings, and
        # with shredding its hidden sub-columns are part of the blocks' schema.
        self._body: pa.ipc.RecordBatchFileWriter | pq.ParquetWriter | None = None
        self._shredder = Shredder(schema, shred) if shred is not None else None
        if self._shredder is not None and not self._shredder.active:
            self._shredder = None
        self._pool: ThreadPoolExecutor | None = None
        self._last_write: Future[dict[str, Any] | None] | None = None
        self._shredded: list[tuple[dict[str, Any], Future[dict[str, Any] | None]]] = []
        self._state: Literal["open", "finished", "aborted"] = "open"

    def append(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._check_open()
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            if b.num_rows == 0:
                continue
            self._pending.append(self._conform(b))
            self._pending_rows += b.num_rows
            while self._pending_rows >= self._block_rows:
                self._emit(self._take(self._block_rows))

    def finish(self) -> ExtentWriteResult:
        self._check_open()
        try:
            if self._pending_rows:
                self._emit(self._take(self._pending_rows))
            stats = self._stats.finish()        # overlaps the last blocks' serialisation
            if self._last_write is not None:
                self._last_write.result()
            self._merge_shredded()
            self._started(None).close()
            body = self._sink.getvalue()
            data = (self._frame_v3(body, stats.block_filters) if self.version == 3
                    else self._frame(body, stats.block_filters))
            self._store.put(self.object_path, data)
        except BaseException:
            self.abort()
            raise
        self._state = "finished"
        self._shutdown()
        return ExtentWriteResult(
            extent_id=self.extent_id, object_path=self.object_path, byte_size=len(data),
            row_count=self._rows, block_count=len(self._block_stats),
            min_ts=stats.min_ts, max_ts=stats.max_ts, present_paths=stats.present_paths,
            column_stats=stats.column_stats, membership_filters=stats.membership_filters)

    def abort(self) -> None:
        if self._state == "finished":
            return
        self._state = "aborted"
        self._shutdown()
        self._pending.clear()
        self._block_stats = []
        self._sink = pa.BufferOutputStream()

    # ---- internals ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"extent writer is {self._state}")

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` with exactly the extent schema (names, order, types, field metadata)."""
        schema = self._schema
        if batch.schema.names != schema.names:
            if sorted(batch.schema.names) != sorted(schema.names):
                raise ValueError(f"batch columns {batch.schema.names} do not match the extent "
                                 f"schema {schema.names}")
            batch = batch.select(schema.names)
        if batch.schema.equals(schema, check_metadata=True):
            return batch
        for f, g in zip(batch.schema, schema, strict=False):
            if not f.type.equals(g.type):
                raise ValueError(f'column "{g.name}" is {f.type}, the extent schema has {g.type}')
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    def _frame(self, ipc: pa.Buffer,
               block_filters: list[dict[str, tuple[str, bytes]]]) -> bytes:
        """The extent (`encode_v2`): Arrow's IPC file, with the filter section, if any,
        before Arrow's footer and the block stats pointing at it."""
        if not block_filters:
            return encode_v2(ipc, self._block_stats)
        tail = ipc.slice(max(0, ipc.size - 10)).to_pybytes()
        footer_len = int.from_bytes(tail[-10:-6], "little", signed=True) if len(tail) >= 10 \
            else -1
        cut = ipc.size - 10 - footer_len
        if tail[-6:] != _ARROW_MAGIC or footer_len <= 0 or cut < 0:
            raise ValueError("Arrow's IPC file does not end in its footer, length and magic")
        section = self._place_filters(block_filters, len(MAGIC_V2) + cut)
        return encode_v2([ipc.slice(0, cut), section, ipc.slice(cut)], self._block_stats)

    def _place_filters(self, block_filters: list[dict[str, tuple[str, bytes]]], at: int
                       ) -> bytes:
        """The filter section placed at object offset `at`, each block's stats entry
        pointing at its filters."""
        section, refs = layout_section(block_filters, at)
        if len(refs) != len(self._block_stats):
            raise ValueError(f"{len(refs)} blocks of filters for {len(self._block_stats)} "
                             "blocks")
        for entry, ref in zip(self._block_stats, refs, strict=True):
            if ref:
                entry[FILTERS_KEY] = ref
        return section

    def _frame_v3(self, body: pa.Buffer,
                  block_filters: list[dict[str, tuple[str, bytes]]]) -> bytes:
        """The v3 extent (`encode_footer` after the Parquet file), with the filter section,
        if any, before Parquet's footer metadata (v2's placement, for the same reason: the
        metadata stays next to the JSON, inside the reader's tail read)."""
        if not block_filters:
            return b"".join([MAGIC_V3, body, encode_footer(self._block_stats, MAGIC_V3)])
        meta_len = metadata_length(body.slice(body.size - PARQUET_TRAILER).to_pybytes())
        cut = body.size - PARQUET_TRAILER - meta_len
        if cut < 4:
            raise ValueError("the Parquet footer length points before the file")
        section = self._place_filters(block_filters, MAGIC_LEN + cut)
        return b"".join([MAGIC_V3, body.slice(0, cut), section, body.slice(cut),
                         encode_footer(self._block_stats, MAGIC_V3)])

    def _take(self, n: int) -> pa.RecordBatch:
        """Remove the first n pending rows as one batch."""
        parts = []
        need = n
        while need:
            head = self._pending[0]
            if head.num_rows <= need:
                parts.append(self._pending.popleft())
                need -= head.num_rows
            else:
                parts.append(head.slice(0, need))
                self._pending[0] = head.slice(need)
                need = 0
        self._pending_rows -= n
        return parts[0] if len(parts) == 1 else pa.concat_batches(parts)

    def _emit(self, block: pa.RecordBatch) -> None:
        """Serialise one block (in the background) and fold in its stats (here)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tlm-body")
        previous = self._last_write
        shredder = self._shredder

        def write() -> dict[str, Any] | None:
            if previous is not None:
                previous.result()       # keep blocks in order; surface an earlier failure
            # -- shredded dynamic paths (shoal.format.shred): the hidden sub-columns go into
            # the block before it is serialised, on this thread (off the caller's); a block
            # where one is not valid says so in its stats.
            shredded = None
            full = block
            if shredder is not None:
                full, shredded = shredder.extend(block)
            body = self._started(full)
            if isinstance(body, pq.ParquetWriter):
                write_block(body, full)
            else:
                body.write_batch(full)
            return shredded

        future = self._pool.submit(write)
        self._last_write = future
        entry = self._stats.add_block(block)
        self._block_stats.append(entry)
        if shredder is not None:
            self._shredded.append((entry, future))
        self._rows += block.num_rows

    def _merge_shredded(self) -> None:
        """The sub-columns' stats, and where they are not valid, into their blocks' entries
        (every block is written by now)."""
        for entry, future in self._shredded:
            shredded = future.result()
            if shredded:
                entry["columns"].update(shredded.pop("columns"))
                entry.update(shredded)
        self._shredded = []

    def _started(self, first: pa.RecordBatch | None
                 ) -> pa.ipc.RecordBatchFileWriter | pq.ParquetWriter:
        """The body writer, started (v3) with `first`, the extent's first block, if none
        is yet."""
        if self._body is None:
            schema = self._schema if first is None else first.schema
            if self.version == 2:
                self._body = pa.ipc.new_file(self._sink, schema, options=pa.ipc.IpcWriteOptions(
                    compression=self._compression))
            else:
                self._body = new_writer(self._sink, schema, self._compression, first)
        return self._body

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# ---- reader -------------------------------------------------------------------------------

class _Fetcher:
    """Range reads on the object, counting bytes; serves reads inside cached ranges."""

    def __init__(self, source: pa.NativeFile) -> None:
        self.source = source
        self.bytes_read = 0
        self._cache: list[tuple[int, pa.Buffer]] = []
        self._lock = threading.Lock()

    def fetch(self, offset: int, length: int) -> pa.Buffer:
        for start, buf in self._cache:
            if start <= offset and offset + length <= start + buf.size:
                return buf.slice(offset - start, length)
        with self._lock:                # seek + read_buffer: zero-copy on memory maps
            self.source.seek(offset)
            data = self.source.read_buffer(length)
            self.bytes_read += data.size
        return data

    def keep(self, offset: int, buf: pa.Buffer) -> None:
        self._cache.append((offset, buf))


class _RangeView:
    """A read-only file over bytes [base, base + size) of the object, for `pa.PythonFile`."""

    def __init__(self, fetcher: _Fetcher, base: int, size: int) -> None:
        self._fetcher = fetcher
        self._base = base
        self._size = size
        self._pos = 0
        self.closed = False

    def read(self, nbytes: int | None = None) -> pa.Buffer:
        end = self._size if nbytes is None or nbytes < 0 else min(self._size, self._pos + nbytes)
        if end <= self._pos:
            return pa.py_buffer(b"")
        data = self._fetcher.fetch(self._base + self._pos, end - self._pos)
        self._pos = end
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._size)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


class TlmReader:
    """`ExtentReader` over one tlm object (v1, v2 or v3)."""

    def __init__(self, store: ObjectStore, path: str, *,
                 tail_prefetch: int = DEFAULT_TAIL_PREFETCH) -> None:
        self._path = path
        source = store.open_input(path)
        self._fetcher = _Fetcher(source)
        try:
            self._size = source.size()
            self._open(tail_prefetch)
        except ExtentFormatError:
            source.close()
            raise
        except _ARROW_ERRORS as e:
            source.close()
            raise ExtentFormatError(path, f"unreadable: {e}") from e
        self._row_count: int | None = (None if self._stats is None
                                       else sum(s["rows"] for s in self._stats))
        self._block_filters: dict[str, list[BlockFilter | None] | None] = {}

    def _open(self, tail_prefetch: int) -> None:
        size, fetch = self._size, self._fetcher
        if size < MAGIC_LEN:
            raise ExtentFormatError(self._path, f"{size} bytes is shorter than the magic")
        if size <= tail_prefetch:                     # small object: one read
            whole = fetch.fetch(0, size)
            fetch.keep(0, whole)
        head = fetch.fetch(0, MAGIC_LEN).to_pybytes()
        if head == MAGIC_V1:
            self.version = 1
            ipc_start, ipc_end = MAGIC_LEN, size
            self._prefetch_tail(size, tail_prefetch)
            self._stats: list[dict[str, Any]] | None = None
        elif head in (MAGIC_V2, MAGIC_V3):
            self.version = 2 if head == MAGIC_V2 else 3
            if size < MAGIC_LEN + TAIL_LEN:
                raise ExtentFormatError(self._path, f"truncated: {size} bytes leave no room "
                                                    "for the footer")
            self._prefetch_tail(size, tail_prefetch)
            tail = fetch.fetch(size - TAIL_LEN, TAIL_LEN).to_pybytes()
            if tail[_STATS_LEN.size:] != head:
                raise ExtentFormatError(self._path, "bad trailing magic (truncated object?)")
            (stats_len,) = _STATS_LEN.unpack(tail[:_STATS_LEN.size])
            if stats_len > size - MAGIC_LEN - TAIL_LEN:
                raise ExtentFormatError(self._path, f"stats_len {stats_len} points outside the "
                                                    f"{size}-byte object")
            ipc_start, ipc_end = MAGIC_LEN, size - TAIL_LEN - stats_len
            self._stats = self._parse_stats(fetch.fetch(ipc_end, stats_len).to_pybytes())
        else:
            raise ExtentFormatError(self._path, f"bad leading magic {head!r}")
        self._readers: dict[tuple[int, ...] | None, pa.ipc.RecordBatchFileReader] = {}
        self._blocks: ParquetBlocks | None = None
        self._schema: pa.Schema
        self._block_count: int
        if self.version == 3:
            assert self._stats is not None
            self._open_parquet(ipc_end)
            assert self._blocks is not None
            full = self._blocks.schema
            self._block_count = self._blocks.block_count
        else:
            self._view = pa.PythonFile(_RangeView(fetch, ipc_start, ipc_end - ipc_start),
                                       mode="r")
            try:
                first = self._ipc_reader(None)
            except _ARROW_ERRORS as e:
                raise ExtentFormatError(self._path,
                                        f"the Arrow IPC body is invalid: {e}") from e
            full = first.schema
            self._block_count = first.num_record_batches
        # -- shredded dynamic paths (shoal.format.shred): the hidden sub-columns are not in
        # the extent's schema; a projection naming one reads it
        self._schema = pa.schema([f for f in full if not is_hidden(f.name)],
                                 metadata=full.metadata)
        self._width = len(full)
        self._index = {name: i for i, name in reversed(list(enumerate(full.names)))}
        if self._stats is not None and len(self._stats) != self._block_count:
            raise ExtentFormatError(self._path, f"the footer describes {len(self._stats)} "
                                                f"blocks, the body has {self._block_count}")

    def _open_parquet(self, body_end: int) -> None:
        """The v3 body [MAGIC_LEN, body_end): its footer from the bytes already fetched (the
        tail read normally covers it), then the row groups through a range view."""
        fetch = self._fetcher
        try:
            if body_end - MAGIC_LEN < 2 * PARQUET_TRAILER:
                raise ValueError(f"{body_end - MAGIC_LEN} bytes are too short for Parquet")
            meta_len = metadata_length(
                fetch.fetch(body_end - PARQUET_TRAILER, PARQUET_TRAILER).to_pybytes())
            meta_at = body_end - PARQUET_TRAILER - meta_len
            if meta_at < MAGIC_LEN + 4:
                raise ValueError(f"footer length {meta_len} points before the body")
            metadata = parse_metadata(fetch.fetch(meta_at, meta_len).to_pybytes())
            view = pa.PythonFile(_RangeView(fetch, MAGIC_LEN, body_end - MAGIC_LEN), mode="r")
            self._blocks = ParquetBlocks(view, metadata)
        except (ValueError, *_ARROW_ERRORS) as e:
            raise ExtentFormatError(self._path, f"the Parquet body is invalid: {e}") from e

    def _prefetch_tail(self, size: int, tail_prefetch: int) -> None:
        if size > tail_prefetch:
            start = size - tail_prefetch
            self._fetcher.keep(start, self._fetcher.fetch(start, tail_prefetch))

    def _parse_stats(self, raw: bytes) -> list[dict[str, Any]]:
        try:
            stats = json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise ExtentFormatError(self._path, f"block stats are not UTF-8 JSON: {e}") from e
        if not isinstance(stats, list) or not all(
                isinstance(s, dict) and isinstance(s.get("rows"), int)
                and isinstance(s.get("columns", {}), dict) for s in stats):
            raise ExtentFormatError(self._path, "block stats are not a list of block entries")
        return stats

    def _ipc_reader(self, fields: tuple[int, ...] | None) -> pa.ipc.RecordBatchFileReader:
        reader = self._readers.get(fields)
        if reader is None:
            options = pa.ipc.IpcReadOptions(
                included_fields=list(fields) if fields is not None else None,
                ensure_alignment=pa.ipc.Alignment.DataTypeSpecific)
            reader = pa.ipc.open_file(self._view, options=options)
            if len(self._readers) >= 8:
                self._readers.pop(next(k for k in self._readers if k is not None))
            self._readers[fields] = reader
        return reader

    # ---- ExtentReader ------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def bytes_read(self) -> int:
        return self._fetcher.bytes_read

    def metadata(self) -> ExtentMetadata:
        if self._row_count is None:
            self._row_count = self._ipc_reader(None).count_rows()
        return ExtentMetadata(version=self.version, schema=self._schema,
                              block_count=self._block_count, row_count=self._row_count,
                              block_stats=self._stats, byte_size=self._size)

    def pruned_blocks(self, predicate: BlockPredicate | None) -> list[int]:
        if self._stats is None or predicate is None:
            return list(range(self._block_count))
        return prune_blocks(predicate, self._stats, self.read_block_filters)

    def read_block_filters(self, column: str) -> list[BlockFilter | None] | None:
        """Each block's filter of `column` (one range read, kept by this reader), or None
        if it has none."""
        if self._stats is None:
            return None
        if column not in self._block_filters:
            self._block_filters[column] = self._fetch_block_filters(column)
        return self._block_filters[column]

    def _fetch_block_filters(self, column: str) -> list[BlockFilter | None] | None:
        assert self._stats is not None
        span = column_span(self._stats, column)
        if span is None:
            return None
        start, end = span
        if end > self._size:
            log.warning("extent %s: block filters of %s point past its end; not used",
                        self._path, column)
            return None
        data = self._fetcher.fetch(start, end - start).to_pybytes()
        return decode_column(self._stats, column, data, start, path=self._path)

    def read_block(self, block: int, projection: Sequence[str] | None = None) -> pa.RecordBatch:
        if not 0 <= block < self._block_count:
            raise IndexError(f"block {block} out of range (extent has {self._block_count})")
        if projection is None and len(self._schema) < self._width:
            projection = self._schema.names         # not the hidden sub-columns
        if self._blocks is not None:
            wanted = (None if projection is None
                      else list(dict.fromkeys(n for n in projection if n in self._index)))
            try:
                return self._blocks.read(block, wanted)
            except _ARROW_ERRORS as e:
                raise ExtentFormatError(self._path, f"block {block} is unreadable: {e}") from e
        names = None
        fields: tuple[int, ...] | None = None
        if projection is not None:
            names = list(dict.fromkeys(n for n in projection if n in self._index))
            if names:
                fields = tuple(sorted(self._index[n] for n in names))
                if len(fields) == self._width:
                    fields = None
            else:
                # Arrow reads every field for an empty selection; read the narrowest one.
                fields = (0,) if len(self._schema) else None
        try:
            batch = self._ipc_reader(fields).get_batch(block)
        except _ARROW_ERRORS as e:
            raise ExtentFormatError(self._path, f"block {block} is unreadable: {e}") from e
        return batch if names is None else batch.select(names)

    def close(self) -> None:
        self._readers.clear()
        if self._blocks is not None:
            self._blocks.close()
        self._fetcher.source.close()

    def __enter__(self) -> TlmReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
