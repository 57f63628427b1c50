"""The tlm format: round trips over every column type, blocks, projection, v1, corruption."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import ExtentFormatError, ObjectNotFoundError
from shoal.format import ExtentReader, ExtentWriter, SegmentFormat, TimeRange, get_format
from shoal.format.tlm import MAGIC_V1, MAGIC_V2, MAGIC_V3, TlmFormat, encode_footer
from shoal.storage import LocalObjectStore
from shoal.types import (BOOL, BYTES, DYNAMIC, HEADERS, INT, LONG, REAL, STRING, TIMESTAMP,
                         Column, Schema, vector)

ALL_TYPES = Schema.create([
    Column("b", BOOL), Column("i", INT), Column("l", LONG), Column("r", REAL),
    Column("s", STRING), Column("t", TIMESTAMP), Column("v", vector(3)), Column("d", DYNAMIC),
    Column("y", BYTES), Column("h", HEADERS, header="*"),
]).arrow()

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
LONG_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=200,
                    max_size=300)
JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)


def _nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s)


ROW_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "_timestamp": _nullable(st.integers(-2**62, 2**62)),
    "props": _nullable(JSON_VALUE.map(lambda v: json.dumps(v).encode())),
    "b": _nullable(st.booleans()),
    "i": _nullable(st.integers(-2**31, 2**31 - 1)),
    "l": _nullable(st.integers(-2**63, 2**63 - 1)),
    "r": _nullable(st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1e308,
                                                                          -5e-324]))),
    "s": _nullable(st.one_of(TEXT, LONG_TEXT)),
    "t": _nullable(st.integers(-2**62, 2**62)),
    "v": _nullable(st.lists(st.floats(width=32, allow_nan=False), min_size=3, max_size=3)),
    "d": _nullable(JSON_VALUE.map(lambda v: json.dumps(v, ensure_ascii=False).encode())),
    "y": _nullable(st.binary(max_size=20)),
    "h": _nullable(st.lists(st.fixed_dictionaries({"key": _nullable(TEXT),
                                                   "value": _nullable(st.binary(max_size=8))}),
                            max_size=3)),
}
ROW = st.fixed_dictionaries(ROW_VALUES)


def _read_all(reader: ExtentReader, projection: list[str] | None = None) -> pa.Table:
    meta = reader.metadata()
    batches = [reader.read_block(i, projection) for i in range(meta.block_count)]
    schema = meta.schema if projection is None else pa.schema(
        [meta.schema.field(n) for n in projection if n in meta.schema.names],
        metadata=meta.schema.metadata)
    return pa.Table.from_batches(batches, schema=schema)


def _float_bits(table: pa.Table, name: str) -> list[int | None]:
    return table.column(name).combine_chunks().view(pa.int64()).to_pylist()


def test_tlm_implements_the_protocols(store) -> None:
    fmt = TlmFormat()
    assert isinstance(fmt, SegmentFormat) and fmt.name == "tlm"
    assert isinstance(get_format("tlm"), TlmFormat)
    writer = fmt.start_extent(store, "t", ALL_TYPES)
    assert isinstance(writer, ExtentWriter)
    writer.append(pa.RecordBatch.from_pylist([{}], schema=ALL_TYPES))
    reader = fmt.open_extent(store, writer.finish().object_path)
    assert isinstance(reader, ExtentReader)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(ROW, max_size=30), block_rows=st.integers(1, 8),
       cuts=st.lists(st.integers(0, 30), max_size=4),
       compression=st.sampled_from(["zstd", "lz4", None]), version=st.sampled_from([2, 3]))
def test_round_trip_every_type(rows: list[dict[str, Any]], block_rows: int, cuts: list[int],
                               compression: str | None, version: Any) -> None:
    from tests.format.conftest import MemoryObjectStore

    store = MemoryObjectStore()
    table = pa.Table.from_pylist(rows, schema=ALL_TYPES)
    fmt = TlmFormat(compression=compression, version=version)
    writer = fmt.start_extent(store, "tables/7/extents", ALL_TYPES, block_rows=block_rows)
    bounds = sorted({0, len(rows), *[min(c, len(rows)) for c in cuts]})
    for lo, hi in zip(bounds, bounds[1:]):
        writer.append(table.slice(lo, hi - lo))        # Tables and uneven pieces are fine
    result = writer.finish()

    assert store.puts == 1 and result.object_path.startswith("tables/7/extents/")
    assert result.object_path == f"tables/7/extents/{result.extent_id}.tlm"
    assert len(result.extent_id) == 32 and result.byte_size == len(store.objects[
        result.object_path])
    assert result.row_count == len(rows)
    assert result.block_count == math.ceil(len(rows) / block_rows)

    reader = fmt.open_extent(store, result.object_path)
    meta = reader.metadata()
    assert (meta.version, meta.row_count, meta.block_count) == (version, len(rows),
                                                                result.block_count)
    assert meta.schema.equals(ALL_TYPES, check_metadata=True)
    sizes = [reader.read_block(i).num_rows for i in range(meta.block_count)]
    assert all(0 < n <= block_rows for n in sizes) and sum(sizes) == len(rows)
    assert sizes[:-1] == [block_rows] * (len(sizes) - 1)       # only the last may be short
    back = _read_all(reader)
    assert back.equals(table, check_metadata=True)
    assert _float_bits(back, "r") == _float_bits(table, "r")   # -0.0 stays -0.0
    ts = [r["_timestamp"] for r in rows if r["_timestamp"] is not None]
    assert (result.min_ts, result.max_ts) == ((min(ts), max(ts)) if ts else (None, None))


# Every column kind with the strategy of its values: random schemas are drawn from these.
KINDS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "bool": (BOOL, ROW_VALUES["b"]), "int": (INT, ROW_VALUES["i"]),
    "long": (LONG, ROW_VALUES["l"]), "real": (REAL, ROW_VALUES["r"]),
    "string": (STRING, ROW_VALUES["s"]),
    "timestamp": (TIMESTAMP, ROW_VALUES["t"]),
    "vector": (vector(3), ROW_VALUES["v"]),
    "dynamic": (DYNAMIC, ROW_VALUES["d"]), "bytes": (BYTES, ROW_VALUES["y"]),
    "headers": (HEADERS, ROW_VALUES["h"]),
}


@st.composite
def _schema_and_rows(draw: st.DrawFn) -> tuple[pa.Schema, list[dict[str, Any]]]:
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), max_size=6))
    if kinds.count("headers") > 1:                       # a table has at most one
        kinds = [k for k in kinds if k != "headers"] + ["headers"]
    columns = [Column(f"c{i}_{k}", KINDS[k][0], header="*" if k == "headers" else None)
               for i, k in enumerate(kinds)]
    schema = Schema.create(columns).arrow()
    values = {c.name: KINDS[k][1] for c, k in zip(columns, kinds, strict=True)}
    values["_timestamp"] = ROW_VALUES["_timestamp"]
    values["props"] = ROW_VALUES["props"]
    rows = draw(st.lists(st.fixed_dictionaries(values), max_size=25))
    return schema, rows


def _without_offsets(stats: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Block stats with the filters' object offsets left out."""
    return [{**b, "filters": {c: {k: v for k, v in f.items() if k != "at"}
                              for c, f in b.get("filters", {}).items()}} for b in stats or []]


@settings(max_examples=60, deadline=None)
@given(case=_schema_and_rows(), block_rows=st.integers(1, 8), data=st.data())
def test_v3_reads_exactly_what_v2_reads(case: tuple[pa.Schema, list[dict[str, Any]]],
                                        block_rows: int, data: st.DataObject) -> None:
    from tests.format.conftest import MemoryObjectStore

    schema, rows = case
    store = MemoryObjectStore()
    table = pa.Table.from_pylist(rows, schema=schema)
    readers = {}
    for version in (2, 3):
        w = TlmFormat(version=version).start_extent(store, "t", schema, block_rows=block_rows)
        w.append(table)
        readers[version] = TlmFormat().open_extent(store, w.finish().object_path)
    v2, v3 = readers[2].metadata(), readers[3].metadata()
    assert (v2.version, v3.version) == (2, 3)
    assert v3.schema.equals(v2.schema, check_metadata=True)
    # the same stats, but for where each filter sits (the bodies differ in size)
    assert _without_offsets(v3.block_stats) == _without_offsets(v2.block_stats)
    assert v3.block_count == v2.block_count
    projection = data.draw(st.one_of(st.none(), st.lists(
        st.sampled_from([*schema.names, "missing"]), max_size=4)))
    for i in range(v2.block_count):
        a, b = readers[2].read_block(i, projection), readers[3].read_block(i, projection)
        assert b.equals(a, check_metadata=True) and b.schema.equals(a.schema,
                                                                    check_metadata=True)
    assert _read_all(readers[3]).equals(table, check_metadata=True)


def test_projection_order_unknown_names_and_empty(store) -> None:
    fmt = TlmFormat()
    schema = Schema.create([Column("a", LONG), Column("s", STRING)]).arrow()
    w = fmt.start_extent(store, "t", schema, block_rows=4)
    w.append(pa.RecordBatch.from_pydict({"_timestamp": list(range(10)), "props": [None] * 10,
                                         "a": list(range(10)),
                                         "s": [str(i) for i in range(10)]}, schema=schema))
    reader = fmt.open_extent(store, w.finish().object_path)
    b = reader.read_block(1, ["s", "missing", "a", "s"])
    assert b.schema.names == ["s", "a"]
    assert b.column(0).to_pylist() == ["4", "5", "6", "7"]
    assert b.schema.field("s").metadata == schema.field("s").metadata
    empty = reader.read_block(2, [])
    assert (empty.num_columns, empty.num_rows) == (0, 2)
    assert reader.read_block(0, ["nope"]).num_rows == 4
    with pytest.raises(IndexError):
        reader.read_block(3)


def test_append_conforms_batches(store) -> None:
    schema = Schema.create([Column("a", LONG)]).arrow()
    w = TlmFormat().start_extent(store, "t", schema)
    # Columns in another order and without field metadata are accepted.
    w.append(pa.record_batch({"a": [1], "props": pa.array([None], pa.binary()),
                              "_timestamp": pa.array([1], pa.timestamp("ns", "UTC"))}))
    w.append(pa.RecordBatch.from_pylist([], schema=schema))       # empty: ignored
    with pytest.raises(ValueError):
        w.append(pa.record_batch({"a": ["x"], "props": pa.array([None], pa.binary()),
                                  "_timestamp": pa.array([1], pa.timestamp("ns", "UTC"))}))
    with pytest.raises(ValueError):
        w.append(pa.record_batch({"zzz": [1]}))
    r = w.finish()
    assert (r.row_count, r.block_count) == (1, 1)
    back = TlmFormat().open_extent(store, r.object_path).read_block(0)
    assert back.schema.equals(schema, check_metadata=True)
    with pytest.raises(ValueError):
        w.append(pa.RecordBatch.from_pylist([{}], schema=schema))
    with pytest.raises(ValueError):
        w.finish()


def test_abort_and_empty_extent(store) -> None:
    schema = Schema.create([]).arrow()
    w = TlmFormat().start_extent(store, "t", schema)
    w.append(pa.RecordBatch.from_pylist([{"_timestamp": 1}], schema=schema))
    w.abort()
    assert store.objects == {}
    with pytest.raises(ValueError):
        w.finish()
    r = TlmFormat().start_extent(store, "t/", schema).finish()
    assert (r.row_count, r.block_count, r.min_ts) == (0, 0, None)
    assert r.object_path.startswith("t/") and "//" not in r.object_path
    reader = TlmFormat().open_extent(store, r.object_path)
    assert reader.metadata().block_count == 0 and reader.pruned_blocks(None) == []


def test_many_small_appends_make_full_blocks(store) -> None:
    schema = Schema.create([Column("a", LONG)]).arrow()
    w = TlmFormat().start_extent(store, "t", schema, block_rows=100)
    for i in range(1234):
        w.append(pa.RecordBatch.from_pylist([{"_timestamp": i, "a": i}], schema=schema))
    r = w.finish()
    reader = TlmFormat().open_extent(store, r.object_path)
    assert [reader.read_block(i).num_rows for i in range(r.block_count)] == [100] * 12 + [34]
    assert _read_all(reader).column("a").to_pylist() == list(range(1234))


# ---- v1 ---------------------------------------------------------------------------------------

def _ipc_file(table: pa.Table, block_rows: int) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=block_rows):
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def test_v1_extent_reads_without_stats(store) -> None:
    schema = Schema.create([Column("a", LONG)]).arrow()
    table = pa.Table.from_pydict({"_timestamp": list(range(10)), "props": [None] * 10,
                                  "a": list(range(10))}, schema=schema)
    store.put("old/x.tlm", MAGIC_V1 + _ipc_file(table, 3))     # a hand-made v1 extent
    reader = TlmFormat().open_extent(store, "old/x.tlm")
    meta = reader.metadata()
    assert (meta.version, meta.block_count, meta.row_count, meta.block_stats) == (1, 4, 10, None)
    assert reader.pruned_blocks(TimeRange(100, 200)) == [0, 1, 2, 3]
    assert _read_all(reader).equals(table)
    assert reader.read_block(3, ["a"]).column(0).to_pylist() == [9]


# ---- corruption -------------------------------------------------------------------------------

@pytest.fixture
def good(store) -> bytes:
    schema = Schema.create([Column("a", LONG)]).arrow()
    w = TlmFormat(version=2).start_extent(store, "t", schema, block_rows=5)
    w.append(pa.RecordBatch.from_pydict({"_timestamp": list(range(20)), "props": [None] * 20,
                                         "a": list(range(20))}, schema=schema))
    return store.objects[w.finish().object_path]


def _footer(data: bytes) -> tuple[int, bytes]:
    (n,) = struct.unpack("<I", data[-9:-5])
    return n, data[-9 - n:-9]


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: b"", "shorter than the magic"),
    (lambda d: b"KYM", "shorter than the magic"),
    (lambda d: b"XXXX\x02" + d[5:], "bad leading magic"),
    (lambda d: b"KYMA\x04" + d[5:], "bad leading magic"),
    (lambda d: b"KYMA\x03" + d[5:], "bad trailing magic"),
    (lambda d: d[:-1], "bad trailing magic"),
    (lambda d: d[:len(d) // 2], "bad trailing magic"),
    (lambda d: MAGIC_V2 + b"\x00" * 4 + MAGIC_V2[:4], "truncated"),
    (lambda d: d[:-9] + struct.pack("<I", len(d)) + MAGIC_V2, "points outside"),
    (lambda d: d[:-9] + struct.pack("<I", 2**32 - 1) + MAGIC_V2, "points outside"),
    (lambda d: d[:-9] + struct.pack("<I", _footer(d)[0] + 3) + MAGIC_V2, "JSON"),
    (lambda d: d[:-9 - _footer(d)[0]] + b"{}" + struct.pack("<I", 2) + MAGIC_V2,
     "not a list of block entries"),
    (lambda d: d[:-9 - _footer(d)[0]] + b"[]" + struct.pack("<I", 2) + MAGIC_V2,
     "the footer describes 0 blocks"),
    (lambda d: d[:-15 - _footer(d)[0]] + b"XXXXXX" + d[-9 - _footer(d)[0]:],
     "IPC body is invalid"),                                    # Arrow's own end magic
    (lambda d: MAGIC_V1 + b"not arrow at all", "IPC body is invalid"),
])
def test_corrupt_extents_raise_format_errors(store, good: bytes, mutate, reason: str) -> None:
    store.put("bad.tlm", mutate(good))
    with pytest.raises(ExtentFormatError) as info:
        TlmFormat().open_extent(store, "bad.tlm")
    assert reason in str(info.value) and info.value.path == "bad.tlm"


@pytest.fixture
def good_v3(store) -> bytes:
    schema = Schema.create([Column("a", LONG), Column("s", STRING)]).arrow()
    w = TlmFormat(version=3).start_extent(store, "t", schema, block_rows=5)
    w.append(pa.RecordBatch.from_pydict({"_timestamp": list(range(20)), "props": [None] * 20,
                                         "a": list(range(20)),
                                         "s": [f"v{i % 3}" for i in range(20)]}, schema=schema))
    return store.objects[w.finish().object_path]


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d[:-1], "bad trailing magic"),
    (lambda d: d[:-9] + struct.pack("<I", len(d)) + MAGIC_V3, "points outside"),
    (lambda d: d[:-9 - _footer(d)[0]] + b"[]" + struct.pack("<I", 2) + MAGIC_V3,
     "the footer describes 0 blocks"),
    (lambda d: d[:-13 - _footer(d)[0]] + b"XXXX" + d[-9 - _footer(d)[0]:],
     "Parquet body is invalid"),                                # Parquet's own end magic
    (lambda d: d[:-17 - _footer(d)[0]] + struct.pack("<I", 2**31) + d[-13 - _footer(d)[0]:],
     "Parquet body is invalid"),                                # footer length too big
    (lambda d: d[:-17 - _footer(d)[0]] + struct.pack("<I", 7) + d[-13 - _footer(d)[0]:],
     "Parquet body is invalid"),                                # footer is not Thrift
    (lambda d: MAGIC_V3 + b"PAR1" + encode_footer([], MAGIC_V3), "Parquet body is invalid"),
])
def test_corrupt_v3_extents_raise_format_errors(store, good_v3: bytes, mutate,
                                                reason: str) -> None:
    assert good_v3[:5] == good_v3[-5:] == MAGIC_V3
    store.put("bad.tlm", mutate(good_v3))
    with pytest.raises(ExtentFormatError) as info:
        TlmFormat().open_extent(store, "bad.tlm")
    assert reason in str(info.value) and info.value.path == "bad.tlm"


def test_corrupt_v3_block_body_raises_on_read(store, good_v3: bytes) -> None:
    n, _ = _footer(good_v3)
    body = good_v3[5:-9 - n]
    meta = pq.ParquetFile(pa.py_buffer(body)).metadata
    assert meta.num_row_groups == 4
    # Garbage over a column chunk (footer intact): the extent opens, its block does not
    # decode.
    at = meta.row_group(2).column(2).data_page_offset
    ruined = body[:at] + b"\xff" * 16 + body[at + 16:]
    store.put("bad.tlm", good_v3[:5] + ruined + good_v3[-9 - n:])
    reader = TlmFormat().open_extent(store, "bad.tlm")
    with pytest.raises(ExtentFormatError):
        for i in range(4):
            reader.read_block(i)


def test_corrupt_block_body_raises_on_read(store, good: bytes) -> None:
    n, _ = _footer(good)
    ipc = good[5:-9 - n]
    blocks = pa.ipc.open_file(pa.py_buffer(ipc))
    assert blocks.num_record_batches == 4
    # Garbage over the middle of the body (sizes intact): the footer still opens, the block
    # holding the garbage does not decode.
    mid = len(ipc) // 2
    store.put("bad.tlm", good[:5] + ipc[:mid] + b"\xff" * 16 + ipc[mid + 16:] + good[-9 - n:])
    reader = TlmFormat().open_extent(store, "bad.tlm")
    with pytest.raises(ExtentFormatError):
        for i in range(4):
            reader.read_block(i)


def test_missing_object(store) -> None:
    with pytest.raises(ObjectNotFoundError):
        TlmFormat().open_extent(store, "nope.tlm")


# ---- reading only what is needed ------------------------------------------------------------

def _big_extent(store, compression: str | None = "zstd", version: Any = 3) -> tuple[str, int]:
    schema = Schema.create([Column("a", LONG), Column("s", STRING), Column("r", REAL)]).arrow()
    rng = np.random.default_rng(1)
    n = 100_000
    w = TlmFormat(compression=compression, version=version).start_extent(
        store, "t", schema, block_rows=10_000)
    w.append(pa.RecordBatch.from_pydict({
        "_timestamp": np.arange(n), "props": [None] * n, "a": rng.integers(0, 2**60, n),
        "s": [f"{x:x}" for x in rng.integers(0, 2**60, n)], "r": rng.random(n)},
        schema=schema))
    r = w.finish()
    return r.object_path, r.byte_size


@pytest.mark.parametrize("version", [2, 3])
def test_reading_one_block_reads_a_fraction(store, version) -> None:
    path, size = _big_extent(store, version=version)
    reader = TlmFormat().open_extent(store, path)
    opened = reader.bytes_read
    assert opened <= 5 + 64 * 1024                    # head + one speculative tail read
    assert reader.pruned_blocks(TimeRange(55_000, 55_010)) == [5]
    reader.read_block(5)
    one_block = reader.bytes_read - opened
    assert reader.bytes_read < size / 5
    assert size / 10 * 0.8 < one_block < size / 10 * 1.2
    before = reader.bytes_read
    reader.read_block(6, ["a"])                       # a projection fetches only its buffers
    assert reader.bytes_read - before < one_block / 2


def test_local_store_memory_map_round_trip(tmp_path) -> None:
    # LocalObjectStore hands out memory maps: zero-copy slices at odd offsets (the 5-byte
    # magic), uncompressed, must still read back correctly.
    store = LocalObjectStore(str(tmp_path))
    path, size = _big_extent(store, compression=None)
    reader = TlmFormat().open_extent(store, path)
    table = _read_all(reader)
    assert table.num_rows == 100_000 and reader.metadata().byte_size == size
    assert table.column("_timestamp").combine_chunks().view(pa.int64()).to_pylist() == list(
        range(100_000))
    reader.close()


def test_v3_encodings_follow_the_first_block(store) -> None:
    """Repeating strings and ints get a dictionary, distinct ints and timestamps delta
    encoding, distinct strings plain; the Parquet body says so in its own metadata."""
    schema = Schema.create([Column("level", STRING), Column("trace", STRING),
                            Column("status", INT), Column("duration", LONG),
                            Column("r", REAL)]).arrow()
    n = 20_000
    rng = np.random.default_rng(2)
    w = TlmFormat().start_extent(store, "t", schema, block_rows=10_000)
    table = pa.Table.from_pydict({
        "_timestamp": np.arange(n) * 1000, "props": [None] * n,
        "level": [None if i % 17 == 0 else ("info", "warn", "error")[i % 3] for i in range(n)],
        "trace": [f"{x:016x}" for x in rng.integers(0, 2**62, n)],
        "status": rng.choice([200, 404], n).astype(np.int32),
        "duration": rng.integers(0, 2**40, n), "r": rng.random(n)}, schema=schema)
    w.append(table)
    path = w.finish().object_path
    reader = TlmFormat().open_extent(store, path)
    assert _read_all(reader).equals(table, check_metadata=True)   # dictionaries read back plain
    assert _read_all(reader, ["level"]).column(0).type == pa.string()
    data = store.objects[path]
    n_json, _ = _footer(data)
    meta = pq.ParquetFile(pa.py_buffer(data[5:-9 - n_json])).metadata
    encodings = {meta.schema.column(i).name: set(meta.row_group(1).column(i).encodings)
                 for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in encodings["level"] and "RLE_DICTIONARY" in encodings["status"]
    assert "DELTA_BINARY_PACKED" in encodings["duration"]
    assert "DELTA_BINARY_PACKED" in encodings["_timestamp"]
    assert "RLE_DICTIONARY" not in encodings["trace"] and "PLAIN" in encodings["trace"]
    assert "RLE_DICTIONARY" not in encodings["r"]
