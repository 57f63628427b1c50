"""Helpers for the maintenance tests: a client on a temp dir, small appends, checks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import shoal
from shoal.client import Shoal
from shoal.types import Column, parse_type

COLUMNS = [Column("svc", parse_type("string")), Column("n", parse_type("long")),
           Column("trace", parse_type("string")), Column("msg", parse_type("string"))]


def open_db(tmp_path: Path, catalog_url: str | None = None) -> Shoal:
    return shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url,
                         spark_master="local[2]")


def make_table(db: Shoal, name: str = "ev", **properties: Any) -> None:
    db.create_table(name, COLUMNS, properties={k: str(v) for k, v in properties.items()})


def append_rows(db: Shoal, table: str, rows: list[dict[str, Any]]):
    """One extent (one snapshot) of `rows`, shaped to the table's current schema."""
    schema = db.catalog.load_table(table).schema
    full = [{c.name: r.get(c.name) for c in schema.columns} for r in rows]
    return db.append(table, pa.Table.from_pylist(full, schema=schema.arrow()))


def row(i: int, j: int = 0, *, ts: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"_timestamp": ts if ts is not None else time.time_ns(), "svc": f"svc{i % 7}",
            "n": i * 10 + j, "trace": f"t{i:05d}x{j}", "msg": f"request {i} step {j} ok",
            **extra}


def referenced_objects_exist(db: Shoal, table: str) -> bool:
    """Every manifest row the catalog still has (any retained snapshot) has its object."""
    info = db.catalog.load_table(table)
    paths = set()
    for s in db.catalog.snapshots(table):
        paths |= {e.object_path for e in db.catalog.manifests(table, s.snapshot_id)}
    assert info.current_snapshot_id in {s.snapshot_id for s in db.catalog.snapshots(table)}
    return all(db.store.exists(p) for p in paths)


def object_count(db: Shoal) -> int:
    return sum(1 for _ in db.store.list("tables/"))
