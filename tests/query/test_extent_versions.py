"""A table whose extents are of every tlm version (v1, v2, v3) answers like the same rows
all in v2, on the embedded engine; compaction rewrites v2 extents as v3."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import shoal
from shoal.client import Shoal
from shoal.format.tlm import MAGIC_V1, TlmFormat
from shoal.maintenance.compaction import compact_table
from shoal.types import Column, parse_type

COLUMNS = [Column("service", parse_type("string")), Column("level", parse_type("string")),
           Column("status", parse_type("int")), Column("duration", parse_type("long")),
           Column("ratio", parse_type("real")), Column("ok", parse_type("bool")),
           Column("attrs", parse_type("dynamic")), Column("emb", parse_type("vector(2)"))]

QUERIES = [
    "SELECT level, count(*) AS c FROM ev GROUP BY level ORDER BY level",
    "SELECT service, sum(duration) AS d, max(status) AS s, min(ratio) AS r FROM ev "
    "GROUP BY service ORDER BY service",
    "SELECT count(*) AS c FROM ev WHERE level = 'error' AND ok",
    "SELECT duration FROM ev WHERE service = 'svc-3' AND status = 500 ORDER BY duration",
    "SELECT count(*) AS c FROM ev WHERE get_json_object(attrs, '$.user') = 'u7'",
    "SELECT _timestamp, emb FROM ev WHERE duration = 4242",
    "SELECT count(*) AS c, count(ratio) AS r, min(_timestamp) AS t FROM ev",
]


class InlineRunner:
    """`TaskRunner` that runs each compaction task in this process, one after another."""

    def map(self, fn: Callable[[Any], Any], payloads: Sequence[Any], *,
            description: str = "") -> list[Any]:
        return [fn(p) for p in payloads]


def _rows(part: int, n: int = 300) -> list[dict[str, Any]]:
    base = 1_780_000_000_000_000_000 + part * n * 1_000_000_000
    return [{"_timestamp": base + i * 1_000_000_000, "service": f"svc-{(i + part) % 5}",
             "level": ("debug", "info", "warn", "error")[(i * 7 + part) % 4],
             "status": (200, 404, 500)[i % 3] if i % 11 else None,
             "duration": part * 1000 + i * 7 if i % 13 else 4242,
             "ratio": i / 7 if i % 5 else None, "ok": i % 3 == 0,
             "attrs": f'{{"user":"u{i % 9}","n":{i}}}'.encode() if i % 4 else None,
             "emb": [float(i), float(part)] if i % 6 else None} for i in range(n)]


def _db(path: Path) -> Shoal:
    db = shoal.connect(data_dir=str(path))
    db.create_table("ev", COLUMNS)
    return db


def _append(db: Shoal, rows: list[dict[str, Any]], version: int) -> str:
    db.coordinator.extents.format = TlmFormat(version=version)  # type: ignore[assignment]
    arrow = db.catalog.load_table("ev").schema.arrow()
    outcome = db.append("ev", pa.Table.from_pylist(rows, schema=arrow))
    db.coordinator.extents.format = TlmFormat()
    (entry,) = outcome.added
    return entry.object_path


def _as_v1(db: Shoal, path: str) -> None:
    """Rewrite the v2 extent at `path` as the v1 extent an old writer would have made: the
    same Arrow IPC file after the v1 magic, no block stats."""
    data = db.store.get(path)
    (n,) = struct.unpack("<I", data[-9:-5])
    db.store.put(path, MAGIC_V1 + data[5:-9 - n])


def _answers(db: Shoal) -> list[list[dict[str, Any]]]:
    return [db.sql(q, engine="local").table.to_pylist() for q in QUERIES]


def _versions(db: Shoal) -> list[int]:
    fmt = TlmFormat()
    out = []
    for e in db.catalog.manifests("ev"):
        with fmt.open_extent(db.store, e.object_path) as reader:
            out.append(reader.metadata().version)
    return sorted(out)


def test_mixed_versions_answer_like_all_v2_and_compaction_writes_v3(tmp_path: Path) -> None:
    parts = [_rows(p) for p in range(6)]
    reference = _db(tmp_path / "ref")
    for rows in parts:
        _append(reference, rows, version=2)
    expected = _answers(reference)
    assert expected[0] and expected[3] and expected[5]
    reference.close()

    db = _db(tmp_path / "mixed")
    for i, rows in enumerate(parts):
        path = _append(db, rows, version=(2, 2, 3, 3, 2, 3)[i])
        if i == 4:
            _as_v1(db, path)
    assert _versions(db) == [1, 2, 2, 3, 3, 3]
    assert _answers(db) == expected
    assert [db.sql(q, engine="local", prune=False).table.to_pylist()
            for q in QUERIES] == expected

    report = compact_table(db.catalog, db.coordinator, InlineRunner(), "ev",
                           storage_url=db.config.resolved_storage_url, s3_endpoint=None,
                           formats=db.formats)
    assert report.live_extents_after < report.live_extents_before
    versions = _versions(db)
    assert versions.count(3) >= 1 and 2 not in versions
    assert _answers(db) == expected
    db.close()
