"""A DELETE too big for the process's budget runs as Spark tasks, one per extent, with the
same answer and the same commit as the in-process path."""

from __future__ import annotations

import json

import pytest

import shoal
from shoal.types import Column, parse_type
from tests.support.fixtures import SPARK_MASTER

pytestmark = pytest.mark.slow


def test_a_delete_past_the_local_budget_runs_on_spark(tmp_path, spark):
    db = shoal.connect(data_dir=str(tmp_path / "data"), spark_master=SPARK_MASTER,
                       local_scan_max_bytes=1)
    try:
        db.create_table("ev", [Column("n", parse_type("long")),
                               Column("tag", parse_type("string"))])
        for b in range(3):
            db.ingest_ndjson("ev", "\n".join(json.dumps({"n": b * 100 + i, "tag": f"t{i % 4}"})
                                             for i in range(100)).encode())
        [row] = db.sql("DELETE FROM ev WHERE tag = 't1' OR n >= 200").table.to_pylist()
        assert row["engine"] == "spark"
        assert row["rows_deleted"] == 25 + 25 + 100 and row["extents_rewritten"] == 2
        assert row["extents_removed"] == 1
        left = sorted(r["n"] for r in db.sql("SELECT n FROM ev").table.to_pylist())
        assert left == [n for n in range(200) if n % 4 != 1]
    finally:
        db.close()
