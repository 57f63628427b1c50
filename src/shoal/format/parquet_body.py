"""The Parquet body of a tlm v3 extent: how blocks are encoded, and how one is read back
(docs/storage.md).

A v3 body is one complete Parquet file with one row group per block, written by
`pyarrow.parquet` with the Arrow schema stored in its footer, so field metadata (`shoal.type`),
timestamp units and zones, int widths and fixed-size vector lists come back exactly as
written. Encodings are chosen per column when the writer sees the extent's first block,
from measurements on log-like rows (BENCHMARKS.md, "Extent format v3"):

- strings, binary and ints whose values repeat (at most a quarter of the block's first
  `SAMPLE_ROWS` values distinct: levels, services, status codes, templated JSON):
  dictionary, falling back to plain encoding in a later column chunk whose dictionary
  outgrows `DICTIONARY_PAGE_LIMIT` -- so the choice still holds per block;
- ints whose values do not repeat (durations, counters, ids): DELTA_BINARY_PACKED (smaller
  than plain and than a dictionary that overflows, and faster to decode than either);
- strings and binary whose values do not repeat (trace ids, messages, JSON documents):
  plain. A dictionary attempt cost write time for nothing; delta-length encoding saved 1-2%
  of bytes but did not decode faster;
- timestamps: DELTA_BINARY_PACKED (rows arrive nearly in time order);
- floats, bools and nested columns: plain. Byte-stream split helped only noise-like floats
  and hurt rounded measurements;
- zstd at level 1 (level 3 bought under 1% of size for about half more write time), data
  page v2, no Parquet statistics (block stats live in the extent's JSON footer) and no page
  index (a block is read whole or by column, never by page).

Reading goes through `ParquetBlocks`, built over a file view whose position 0 is the
body's first byte, with the footer metadata parsed from bytes the caller already holds
(normally inside the extent's speculative tail read), so opening costs no further read.
`read_block` fetches only the projected column chunks of one row group, coalesced into few
range reads (`pre_buffer`), and returns the stored Arrow types (dictionary-coded strings are
read as dictionaries and cast back: the cast is cheaper than the reader's dense decoding).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PARQUET_MAGIC = b"PAR1"
PARQUET_TRAILER = 8                      # u32 metadata length + PAR1
DICTIONARY_PAGE_LIMIT = 256 * 1024
ZSTD_LEVEL = 1
SAMPLE_ROWS = 8192
_PARQUET_CODECS = {"zstd": "zstd", "lz4": "lz4", None: "none"}


def repeats(values: pa.Array) -> bool:
    """Whether a column's values repeat enough for a dictionary: at most a quarter of the
    first `SAMPLE_ROWS` are distinct."""
    sample = values.slice(0, SAMPLE_ROWS)
    return len(sample) == 0 or pc.count_distinct(sample, mode="all").as_py() * 4 <= len(sample)


def write_options(schema: pa.Schema, compression: str | None,
                  first: pa.RecordBatch | None = None) -> dict[str, Any]:
    """`pq.ParquetWriter` keyword options for a v3 body of `schema` (see the module doc);
    `first` is the extent's first block, which picks dictionary or delta encoding for its
    string, binary and int columns (without it: dictionary)."""
    dictionary: list[str] = []
    encodings: dict[str, str] = {}
    for i, f in enumerate(schema):
        t = f.type
        if pa.types.is_timestamp(t):
            encodings[f.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_binary(t):
            if first is None or repeats(first.column(i)):
                dictionary.append(f.name)
            elif pa.types.is_integer(t):
                encodings[f.name] = "DELTA_BINARY_PACKED"
    options: dict[str, Any] = {
        "compression": _PARQUET_CODECS[compression],
        "use_dictionary": dictionary,
        "column_encoding": encodings or None,
        "dictionary_pagesize_limit": DICTIONARY_PAGE_LIMIT,
        "data_page_version": "2.0",
        "write_statistics": False,
        "write_page_index": False,
        "store_schema": True,
        # Arrow's list child name ("item") is kept, so lists read back with the schema
        # they were written with (the compliant name would come back as "element").
        "use_compliant_nested_type": False,
    }
    if compression == "zstd":
        options["compression_level"] = ZSTD_LEVEL
    return options


def new_writer(sink: pa.NativeFile, schema: pa.Schema, compression: str | None,
               first: pa.RecordBatch | None = None) -> pq.ParquetWriter:
    return pq.ParquetWriter(sink, schema, **write_options(schema, compression, first))


def write_block(writer: pq.ParquetWriter, block: pa.RecordBatch) -> None:
    """Append `block` as exactly one row group."""
    writer.write_batch(block, row_group_size=block.num_rows)


def metadata_length(trailer: bytes) -> int:
    """The footer metadata length from the body's last 8 bytes; ValueError if they are not
    a Parquet trailer."""
    if len(trailer) != PARQUET_TRAILER or trailer[4:] != PARQUET_MAGIC:
        raise ValueError("the body does not end in Parquet's footer length and magic")
    (n,) = struct.unpack("<I", trailer[:4])
    return int(n)


def parse_metadata(footer: bytes) -> pq.FileMetaData:
    """Parquet `FileMetaData` from the footer's serialised bytes (without length and magic)."""
    framed = b"".join([PARQUET_MAGIC, footer, struct.pack("<I", len(footer)), PARQUET_MAGIC])
    return pq.read_metadata(pa.BufferReader(framed))


class ParquetBlocks:
    """The blocks of one v3 body: `source` is a file whose position 0 is the body's start,
    `metadata` its parsed footer. Arrow errors propagate to the caller."""

    def __init__(self, source: pa.NativeFile, metadata: pq.FileMetaData) -> None:
        self._file = pq.ParquetFile(source, metadata=metadata, pre_buffer=True)
        self.schema: pa.Schema = self._file.schema_arrow
        self._coded = dictionary_columns(self.schema, metadata)
        if self._coded:     # the same file, its dictionary-coded columns read as such
            self._file = pq.ParquetFile(source, metadata=metadata, pre_buffer=True,
                                        read_dictionary=sorted(self._coded))
        self.block_count: int = metadata.num_row_groups
        self.row_count: int = metadata.num_rows

    def read(self, block: int, names: Sequence[str] | None) -> pa.RecordBatch:
        """Block `block` with the columns `names` (all when None) in that order; no names
        gives the block's row count and no columns."""
        columns = None if names is None else list(names) or self.schema.names[:1]
        table = self._file.read_row_group(block, columns=columns, use_threads=True)
        if self._coded.intersection(table.schema.names):
            table = self._decoded(table)
        batches = table.to_batches()
        batch = (batches[0] if len(batches) == 1 else pa.concat_batches(batches) if batches
                 else pa.RecordBatch.from_pylist([], schema=table.schema))
        if names is not None and batch.schema.names != list(names):
            batch = batch.select(list(names))
        return batch

    def _decoded(self, table: pa.Table) -> pa.Table:
        """`table` with its dictionary-read columns cast back to the stored type."""
        fields = [self.schema.field(n) for n in table.schema.names]
        columns = [c.cast(f.type) if n in self._coded else c
                   for n, c, f in zip(table.schema.names, table.columns, fields, strict=True)]
        return pa.Table.from_arrays(columns, schema=pa.schema(fields,
                                                              metadata=self.schema.metadata))

    def close(self) -> None:
        self._file.close()


def dictionary_columns(schema: pa.Schema, metadata: pq.FileMetaData) -> set[str]:
    """Top-level string/binary columns dictionary-coded in every row group: read as
    dictionaries, then cast to their type (about twice as fast as Parquet's own decoding
    into plain strings). A chunk bigger than a full dictionary page plus 3 bytes of index a
    value may have fallen back to plain pages, which a dictionary read would hash value by
    value: such a column is read plain."""
    if metadata.num_row_groups == 0:
        return set()
    leaves = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    out = set()
    for f in schema:
        j = leaves.get(f.name)
        if j is None or not (pa.types.is_string(f.type) or pa.types.is_binary(f.type)):
            continue
        chunks = [metadata.row_group(i).column(j) for i in range(metadata.num_row_groups)]
        if all(c.has_dictionary_page and c.total_uncompressed_size
               <= DICTIONARY_PAGE_LIMIT + 3 * c.num_values for c in chunks):
            out.add(f.name)
    return out

