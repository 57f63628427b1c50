"""Golden v2 extent: framing and footer are pinned byte for byte, so format drift is caught.

`golden/v2_small.tlm` was written by `TlmFormat(compression=None, version=2,
shred=None)` (no hidden sub-columns) from
`golden_table()` with `block_rows=4`; `golden/expected_stats.json` is its footer, byte for
byte. The Arrow IPC body is not compared byte for byte (pyarrow may lay it out differently
across versions), only checked to be a valid IPC file holding the same data. Regenerate
deliberately with `SHOAL_REGEN_GOLDEN=1 pytest tests/format/test_golden.py` -- and only for a
new format version.

`golden/v3_small.tlm` is the same table written as v3 (`version=3`, compression None):
its JSON footer (`golden/expected_stats_v3.json`) holds the same block stats as v2's but
for the filters' object offsets (the bodies differ in size), and the file must keep reading;
its Parquet body is checked for content, not bytes. Regenerate both with
`SHOAL_REGEN_GOLDEN=3`.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal.format.tlm import MAGIC_V2, MAGIC_V3, TlmFormat
from shoal.types import BOOL, DYNAMIC, INT, LONG, STRING, Column, Schema

GOLDEN = Path(__file__).parent / "golden"
EXTENT = GOLDEN / "v2_small.tlm"
EXTENT_V3 = GOLDEN / "v3_small.tlm"
FOOTER = GOLDEN / "expected_stats.json"
FOOTER_V3 = GOLDEN / "expected_stats_v3.json"
SCHEMA = Schema.create([Column("service", STRING), Column("status", INT), Column("n", LONG),
                        Column("ok", BOOL), Column("attrs", DYNAMIC)]).arrow()


def golden_table() -> pa.Table:
    base = 1_700_000_000_000_000_000
    return pa.Table.from_pydict({
        "_timestamp": [base + i * 1_000_000_000 if i != 5 else None for i in range(10)],
        "props": [None] * 10,
        "service": ["auth", "auth", "pay", None, "pay", "auth", "Zed",
                    "x" * 300, "\u00fcber", "pay"],
        "status": [200, 404, 200, 500, None, None, None, None, 201, 200],
        "n": [-(2**40), 0, 1, 2, 3, 4, 5, 6, 7, 2**62],
        "ok": [True, False, None, True, True, False, True, None, True, True],
        "attrs": [b'{"http":{"method":"GET"}}', None, b'[1,2]', b'{"e":null}', None, None,
                  None, None, b'"s"', b'{"http":{"status":200}}'],
    }, schema=SCHEMA)


def _split(data: bytes) -> tuple[bytes, bytes, bytes, int, bytes]:
    (n,) = struct.unpack("<I", data[-9:-5])
    return data[:5], data[5:-9 - n], data[-9 - n:-9], n, data[-5:]


def _write(store, version: int = 2) -> bytes:
    w = TlmFormat(compression=None, version=version, shred=None).start_extent(
        store, "golden", SCHEMA, block_rows=4)
    w.append(golden_table())
    r = w.finish()
    return store.objects[r.object_path]


def test_writer_matches_golden_footer(store) -> None:
    data = _write(store)
    if os.environ.get("SHOAL_REGEN_GOLDEN") == "1":        # pragma: no cover
        GOLDEN.mkdir(exist_ok=True)
        EXTENT.write_bytes(data)
        FOOTER.write_bytes(_split(data)[2])
    head, ipc, footer, n, tail = _split(data)
    assert head == tail == MAGIC_V2 == b"KYMA\x02"
    assert n == len(footer) and data[-9:-5] == len(footer).to_bytes(4, "little")
    assert footer == FOOTER.read_bytes()
    assert pa.ipc.open_file(pa.py_buffer(ipc)).read_all().equals(golden_table(),
                                                                 check_metadata=True)


def test_golden_footer_content() -> None:
    stats = json.loads(FOOTER.read_bytes())
    assert [s["rows"] for s in stats] == [4, 4, 2]
    assert stats[0]["columns"] == {
        "_timestamp": {"min": 1_700_000_000_000_000_000, "max": 1_700_000_003_000_000_000,
                       "nulls": 0},
        "service": {"min": "auth", "max": "pay", "nulls": 1},
        "status": {"min": 200, "max": 500, "nulls": 0},
        "n": {"min": -(2**40), "max": 2, "nulls": 0},
    }
    assert stats[1]["columns"]["service"] == {"min": None, "max": None, "nulls": 0}  # 300 bytes
    assert stats[1]["columns"]["status"] == {"min": None, "max": None, "nulls": 4}
    assert stats[2]["columns"]["service"] == {"min": "pay", "max": "\u00fcber", "nulls": 0}
    assert FOOTER.read_bytes().decode("utf-8").count("\u00fcber") == 1   # UTF-8, not \\u escapes


def test_golden_file_still_reads(store) -> None:
    data = EXTENT.read_bytes()
    head, ipc, footer, _, tail = _split(data)
    assert head == tail == MAGIC_V2 and footer == FOOTER.read_bytes()
    assert pa.ipc.open_file(pa.py_buffer(ipc)).num_record_batches == 3
    store.put("golden/v2_small.tlm", data)
    reader = TlmFormat().open_extent(store, "golden/v2_small.tlm")
    meta = reader.metadata()
    assert (meta.version, meta.block_count, meta.row_count) == (2, 3, 10)
    assert meta.block_stats == json.loads(footer)
    table = pa.Table.from_batches([reader.read_block(i) for i in range(3)])
    assert table.equals(golden_table(), check_metadata=True)


def test_v3_writer_frames_the_same_footer(store) -> None:
    data = _write(store, version=3)
    if os.environ.get("SHOAL_REGEN_GOLDEN") == "3":        # pragma: no cover
        EXTENT_V3.write_bytes(data)
        FOOTER_V3.write_bytes(_split(data)[2])
    head, body, footer, n, tail = _split(data)
    assert head == tail == MAGIC_V3 == b"KYMA\x03"
    assert footer == FOOTER_V3.read_bytes()
    assert _without_offsets(json.loads(footer)) == _without_offsets(json.loads(
        FOOTER.read_bytes()))
    assert body[:4] == body[-4:] == b"PAR1"
    parquet = pq.ParquetFile(pa.py_buffer(body))
    assert parquet.num_row_groups == 3
    assert parquet.read().equals(golden_table(), check_metadata=True)


def test_golden_v3_file_still_reads(store) -> None:
    data = EXTENT_V3.read_bytes()
    head, body, footer, _, tail = _split(data)
    assert head == tail == MAGIC_V3 and footer == FOOTER_V3.read_bytes()
    store.put("golden/v3_small.tlm", data)
    reader = TlmFormat().open_extent(store, "golden/v3_small.tlm")
    meta = reader.metadata()
    assert (meta.version, meta.block_count, meta.row_count) == (3, 3, 10)
    assert meta.block_stats == json.loads(footer)
    table = pa.Table.from_batches([reader.read_block(i) for i in range(3)])
    assert table.equals(golden_table(), check_metadata=True)


def _without_offsets(stats: list[dict]) -> list[dict]:
    """Block stats with the filters' object offsets left out."""
    return [{**b, "filters": {c: {k: v for k, v in f.items() if k != "at"}
                              for c, f in b.get("filters", {}).items()}} for b in stats]


@pytest.mark.parametrize("name", ["v2_small.tlm", "v3_small.tlm", "expected_stats.json",
                                  "expected_stats_v3.json"])
def test_golden_files_are_committed(name: str) -> None:
    assert (GOLDEN / name).is_file(), "run SHOAL_REGEN_GOLDEN=1 once to create them"
