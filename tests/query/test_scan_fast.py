"""The embedded engine's fast read of v3 extents (`shoal.query.scan_fast`) gives exactly what
the block-by-block reader gives, over extents of every tlm version and several schema
versions; reads only the projected columns; and, with a selective filter, fetches the other
columns only of the blocks whose filter columns may match (late materialization)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pytest

import shoal
from shoal.client import Shoal
from shoal.format.tlm import MAGIC_V1, TlmFormat
from shoal.query.embedded.local_engine import ScanStream
from shoal.query.scan_fast import BodyCache, FastScan
from shoal.query.scan_plan import FooterCache, build_scan_spec
from shoal.types import Column, parse_type

COLUMNS = [Column("service", parse_type("string")), Column("level", parse_type("string")),
           Column("status", parse_type("int")), Column("duration", parse_type("long")),
           Column("ratio", parse_type("real")), Column("ok", parse_type("bool")),
           Column("attrs", parse_type("dynamic")), Column("emb", parse_type("vector(2)"))]

def _at(part: int, row: int) -> str:
    """The wall time (whole seconds, UTC) of row `row` of `_rows(part)`, µs-truncated."""
    seconds = (1_780_000_000_000_000_000 + part * 300 * 1_000_000_000) // 10**9 + row
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


QUERIES = [
    "SELECT level, count(*) AS c FROM ev GROUP BY level ORDER BY level",
    "SELECT service, sum(duration) AS d, max(status) AS s, min(ratio) AS r FROM ev "
    "GROUP BY service ORDER BY service",
    "SELECT count(*) AS c FROM ev WHERE level = 'error' AND ok",
    "SELECT duration FROM ev WHERE service = 'svc-3' AND status = 500 ORDER BY duration",
    "SELECT _timestamp, emb, attrs FROM ev WHERE duration = 4242 ORDER BY _timestamp",
    "SELECT region, count(*) AS c, count(code) AS k FROM ev GROUP BY region ORDER BY region",
    "SELECT date_trunc('minute', _timestamp) AS m, count(*) AS n FROM ev GROUP BY 1 "
    "ORDER BY 1",
    "SELECT * FROM ev WHERE has(level, 'warn') AND status = 404 ORDER BY _timestamp",
    "SELECT count(*) AS c, count(ratio) AS r, min(_timestamp) AS t FROM ev",
    # rows 70 ns past the upper bound: as Spark sees them (µs), inside it
    f"SELECT duration, _timestamp FROM ev WHERE _timestamp <= TIMESTAMP '{_at(3, 10)}' "
    f"AND _timestamp > TIMESTAMP '{_at(3, 3)}' ORDER BY duration",
    "SELECT count(*) AS c FROM ev WHERE duration >= 2000 AND duration <= 2100",
    "SELECT service, ok FROM ev WHERE duration = 4242 OR level = 'debug' ORDER BY 1, 2",
]


def _rows(part: int, n: int = 300, *, region: bool = False, text: bool = False
          ) -> list[dict[str, Any]]:
    # nanosecond timestamps that are not whole microseconds: the cast to µs must truncate
    base = 1_780_000_000_000_000_000 + part * n * 1_000_000_000
    out = []
    for i in range(n):
        row = {"_timestamp": base + i * 1_000_000_007, "service": f"svc-{(i + part) % 5}",
               "level": ("debug", "info", "warn", "error")[(i * 7 + part) % 4],
               "status": (200, 404, 500)[i % 3] if i % 11 else None,
               "duration": part * 1000 + i * 7 if i % 13 else 4242,
               "ratio": i / 7 if i % 5 else None, "ok": i % 3 == 0,
               "attrs": f'{{"user":"u{i % 9}","n":{i}}}'.encode() if i % 4 else None,
               "emb": [float(i), float(part)] if i % 6 else None}
        if region:
            row["region"] = ("eu", "us")[i % 2]
            code = i % 17 if i % 2 else None
            row["code"] = str(code) if text and code is not None else code
        out.append(row)
    return out


def _append(db: Shoal, rows: list[dict[str, Any]], version: Literal[2, 3]) -> str:
    db.coordinator.extents.format = TlmFormat(version=version)
    arrow = db.catalog.load_table("ev").schema.arrow()
    outcome = db.append("ev", pa.Table.from_pylist(rows, schema=arrow))
    db.coordinator.extents.format = TlmFormat()
    (entry,) = outcome.added
    return entry.object_path


def _as_v1(db: Shoal, path: str) -> None:
    data = db.store.get(path)
    (n,) = struct.unpack("<I", data[-9:-5])
    db.store.put(path, MAGIC_V1 + data[5:-9 - n])


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shoal]:
    """Extents of v1, v2 and v3 under three schema versions: `region` and `code` added
    (absent from the older extents), then `status` widened int -> long and `code` int ->
    string."""
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("mixed")))
    db.create_table("ev", COLUMNS)
    _append(db, _rows(0), 3)
    _as_v1(db, _append(db, _rows(1), 2))
    _append(db, _rows(2), 2)
    db.add_columns("ev", [Column("region", parse_type("string")),
                          Column("code", parse_type("int"))])
    _append(db, _rows(3, region=True), 3)
    db.add_columns("ev", [Column("status", parse_type("long")),
                          Column("code", parse_type("string"))])
    _append(db, _rows(4, region=True, text=True), 3)
    _append(db, _rows(5, region=True, text=True), 2)
    yield db
    db.close()


def _slow(db: Shoal) -> None:
    db.query_engine.local.bodies = None


def _fast(db: Shoal) -> None:
    db.query_engine.local.bodies = BodyCache()


@pytest.mark.parametrize("prune", [True, False])
def test_answers_equal_the_block_reader_over_mixed_versions(mixed: Shoal, prune: bool) -> None:
    _slow(mixed)
    expected = [mixed.sql(q, engine="local", prune=prune).table for q in QUERIES]
    _fast(mixed)
    got = [mixed.sql(q, engine="local", prune=prune).table for q in QUERIES]
    for q, want, have in zip(QUERIES, expected, got, strict=True):
        assert have.num_rows > 0, q
        assert have.equals(want), (q, have.to_pylist()[:3], want.to_pylist()[:3])


def _spec(db: Shoal, columns: list[str] | None = None) -> Any:
    spec, _ = build_scan_spec(db.catalog, db.store, db.formats, FooterCache(), "ev",
                              predicate=None, columns=columns, snapshot_id=None,
                              storage_url="", s3_endpoint=None, parallelism=1)
    return spec


def _decoded(table: pa.Table) -> pa.Table:
    return pa.table({n: c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
                     for n, c in zip(table.column_names, table.columns, strict=True)})


@pytest.mark.parametrize("columns", [None, ["level", "_timestamp_ns", "code"], ["region"]])
def test_stream_holds_the_block_readers_values(mixed: Shoal, columns: list[str] | None
                                               ) -> None:
    spec = _spec(mixed, columns)
    fast = ScanStream(spec, mixed.store, mixed.formats, lambda n: None, 2, bodies=BodyCache())
    table = pa.Table.from_batches(list(fast.batches()), schema=fast.reader().schema)
    assert len(FastScan(spec, mixed.store, BodyCache()).fast) == 3     # the v3 extents
    slow = ScanStream(spec, mixed.store, mixed.formats, lambda n: None, 2)
    want = pa.Table.from_batches(list(slow.batches()), schema=slow.reader().schema)
    a = _decoded(table)
    b = _decoded(want)
    assert a.schema == b.schema
    order = [c for c in a.column_names if not pa.types.is_list(a.schema.field(c).type)]
    sort = [(c, "ascending") for c in order]
    assert a.num_rows == b.num_rows > 0
    assert a.sort_by(sort).equals(b.sort_by(sort))


def test_all_v3_keeps_dictionaries_of_unchanged_strings(tmp_path: Path) -> None:
    db = shoal.connect(data_dir=str(tmp_path))
    db.create_table("ev", COLUMNS)
    for p in range(3):
        _append(db, _rows(p), 3)
    scan = FastScan(_spec(db, ["service", "level", "status"]), db.store, BodyCache())
    assert not scan.slow and scan.kept == {"service", "level"}
    db.close()


def _bytes(db: Shoal, sql: str) -> tuple[pa.Table, int]:
    result = db.sql(sql, engine="local")
    return result.table, result.stats.to_json()["bytes_read"]


BLOCK_ROWS = 4096
WORDS = ["request", "served", "cache", "hit", "miss", "user", "login", "upstream", "retry"]


@pytest.fixture(scope="module")
def rare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shoal]:
    """Three extents of eight blocks without block filters (stage 2 prunes no block of a
    word), the word `deadlock` in two rows of one block, two decoys in another; wide other
    columns."""
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("rare")))
    db.create_table("logs", [Column("service", parse_type("string")),
                             Column("message", parse_type("string")),
                             Column("trace_id", parse_type("string")),
                             Column("attrs", parse_type("dynamic"))])
    db.coordinator.extents.format = TlmFormat(block_filters=False)
    rng = np.random.default_rng(5)
    info = db.catalog.load_table("logs")
    for part in range(3):
        rows = 8 * BLOCK_ROWS
        message = [" ".join(w) for w in rng.choice(WORDS, size=(rows, 5))]
        if part == 1:
            message[3 * BLOCK_ROWS + 17] = "tx 9 hit a DEADLOCK, retrying"
            message[3 * BLOCK_ROWS + 900] = "deadlock;"
            # other tokens holding the word: candidates the engine must still turn down
            message[5 * BLOCK_ROWS + 3] = "deadlocked writer"
            message[5 * BLOCK_ROWS + 4] = "Deadlock2 found"
        t = pa.table({
            "_timestamp": pa.array(1_780_000_000_000_000_000 + part * 10**15
                                   + np.arange(rows) * 10**9, pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(rows, pa.binary()),
            "service": [f"svc-{i % 7}" for i in range(rows)],
            "message": message,
            "trace_id": [f"{x:032x}" for x in rng.integers(0, 2**62, rows)],
            "attrs": [f'{{"n":{x},"pad":"{x:x}"}}'.encode() for x in range(rows)],
        }).cast(info.schema.arrow())
        entry = db.coordinator.write_extent(info, t.to_batches(), block_rows=BLOCK_ROWS)
        db.coordinator.append("logs", [entry])
    yield db
    db.close()


def test_late_materialization_fetches_only_matching_blocks(rare: Shoal) -> None:
    sql = "SELECT * FROM logs WHERE has(message, 'deadlock') ORDER BY _timestamp"
    _slow(rare)
    want, slow_bytes = _bytes(rare, sql)
    _fast(rare)
    got, fast_bytes = _bytes(rare, sql)
    assert got.equals(want) and got.num_rows == 2
    _, message_bytes = _bytes(rare, "SELECT message FROM logs")
    # every block's message, and the other columns of the two blocks of 24 with candidates
    assert fast_bytes < message_bytes + slow_bytes / 6, (fast_bytes, message_bytes, slow_bytes)
    assert fast_bytes < slow_bytes / 2
    # an equality on a string the blocks hold nowhere reads no other column at all (run
    # twice: the first run also reads the extents' footers and filters for stage 2)
    _bytes(rare, "SELECT * FROM logs WHERE message = 'no such text'")
    none, nothing = _bytes(rare, "SELECT * FROM logs WHERE message = 'no such text'")
    assert none.num_rows == 0 and nothing <= message_bytes


def test_late_materialization_of_a_common_word_reads_each_column_once(rare: Shoal) -> None:
    sql = "SELECT * FROM logs WHERE has(message, 'Cache') AND service = 'svc-3'"
    _slow(rare)
    want = rare.sql(sql, engine="local").table
    _fast(rare)
    got, common = _bytes(rare, sql)
    _, star = _bytes(rare, "SELECT * FROM logs")
    assert got.num_rows > 1000
    assert got.sort_by("_timestamp").equals(want.sort_by("_timestamp"))
    assert common <= star


def test_projection_reads_only_its_columns(rare: Shoal) -> None:
    _fast(rare)
    one_table, one = _bytes(rare, "SELECT service FROM logs")
    star_table, star = _bytes(rare, "SELECT * FROM logs")
    assert one_table.num_rows == star_table.num_rows == 3 * 8 * BLOCK_ROWS
    assert 0 < one < star / 20, (one, star)


def test_bytes_of_a_column_leave_out_its_shredded_paths(tmp_path: Path) -> None:
    db = shoal.connect(data_dir=str(tmp_path))
    db.create_table("ev", COLUMNS)
    db.coordinator.extents.format = TlmFormat()  # shreds
    arrow = db.catalog.load_table("ev").schema.arrow()
    rows = _rows(0, 2000)
    for r in rows:
        r["attrs"] = b'{"user":"u1","http":{"method":"GET"}}'
    info = db.catalog.load_table("ev")
    entry = db.coordinator.write_extent(info, pa.Table.from_pylist(rows, schema=arrow)
                                        .to_batches())
    db.coordinator.append("ev", [entry])
    scan = FastScan(_spec(db), db.store, BodyCache())
    (extent,) = scan.fast
    hidden = [n for n in extent.body.schema.names if n.startswith("attrs.$")]
    assert hidden, extent.body.schema.names
    meta = extent.body.metadata
    (j,) = [j for j in range(meta.num_columns) if meta.schema.column(j).path == "attrs"]
    assert extent.body.column_bytes([0], ["attrs"]) == meta.row_group(0).column(j) \
        .total_compressed_size
    db.close()
