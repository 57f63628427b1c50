"""The query lane over an S3-compatible object store (moto's server): Spark's Python workers
open extents by HTTP range reads, pruning skips them the same way."""

from __future__ import annotations

import json

import pytest

import shoal
from shoal.types import STRING, Column
from tests.query.conftest import SPARK_MASTER

pytestmark = pytest.mark.s3


def test_sql_over_an_s3_store(tmp_path, spark, s3_store_url):
    db = shoal.connect(data_dir=str(tmp_path / "data"), storage_url=s3_store_url,
                       spark_master=SPARK_MASTER)
    try:
        db.create_table("logs", [Column("service", STRING)])
        for k, svc in enumerate(["api", "web", "db"]):
            body = "\n".join(json.dumps({"_timestamp": f"2026-03-01T0{k}:00:0{i}Z",
                                         "service": svc, "n": i}) for i in range(5))
            db.ingest_ndjson("logs", body.encode())
        assert db.config.resolved_storage_url.startswith("s3://")
        r = db.sql("SELECT service, count(*) AS c FROM logs WHERE service = 'web' "
                   "GROUP BY service")
        assert r.table.to_pylist() == [{"service": "web", "c": 5}]
        stats = r.stats.to_json()
        assert (stats["extents_read"], stats["extents_pruned"]) == (1, 2)
        assert stats["bytes_read"] > 0
        assert db.query("SELECT count(*) AS c FROM logs").to_pylist() == [{"c": 15}]
    finally:
        db.close()
