"""Fixtures of the query lane: one Spark session for the whole run (Spark takes seconds to
start; every test's client reuses it), and embedded clients over temporary data dirs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import shoal
from shoal.client import Shoal

from tests.support.fixtures import SPARK_MASTER


@pytest.fixture
def db(tmp_path, spark) -> Iterator[Shoal]:
    client = shoal.connect(data_dir=str(tmp_path / "data"), spark_master=SPARK_MASTER)
    yield client
    client.close()


T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def ns(dt: datetime) -> int:
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1_000


def ndjson(rows: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode()


def rows_at(minute: int, count: int, **fields: Any) -> list[dict[str, Any]]:
    """`count` rows one second apart starting `minute` minutes after T0."""
    base = T0 + timedelta(minutes=minute)
    return [{"_timestamp": (base + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
             **{k: (v(i) if callable(v) else v) for k, v in fields.items()}}
            for i in range(count)]


def sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())
