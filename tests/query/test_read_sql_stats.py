"""`db.read` and `db.sql` share one scan path: the same scan, planned cold by
either, reports the same pruning stats and the same rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import shoal
from shoal.format.predicates import Equals
from shoal.types import LONG, STRING, Column
from tests.query.conftest import T0, ns

ROWS = 5_000


def _db(path: str) -> shoal.Shoal:
    return shoal.connect(data_dir=path, query_engine="local")


def test_read_and_sql_report_the_same_stats_for_the_same_scan(tmp_path):
    db = _db(str(tmp_path))
    db.create_table("t", [Column("service", STRING), Column("n", LONG)])
    info = db.catalog.load_table("t")
    for k in range(6):   # services svc-k and svc-(k+1): an equality prunes extents and blocks
        t = pa.table({
            "_timestamp": pa.array([ns(T0) + (k * ROWS + i) * 1_000 for i in range(ROWS)],
                                   pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(ROWS, pa.binary()),
            "service": [f"svc-{k + (i * 2 // ROWS)}" for i in range(ROWS)],
            "n": pa.array(range(ROWS), pa.int64()),
        }).cast(info.schema.arrow())
        db.coordinator.append("t", [db.coordinator.write_extent(info, t.to_batches())])
    db.close()

    by_read = _db(str(tmp_path))     # both cold: no footer or filter cached yet
    table, read_stats = by_read.read("t", Equals("service", "svc-3"))
    by_sql = _db(str(tmp_path))
    answer = by_sql.sql("SELECT * FROM t WHERE service = 'svc-3'", engine="local")
    sql_stats = answer.stats.to_json()["scans"][0]

    assert read_stats.extents_pruned > 0
    for key, value in read_stats.to_json().items():
        assert sql_stats[key] == value, key
    matching = table.filter(pc.equal(table["service"], "svc-3"))
    assert matching.num_rows == answer.table.num_rows == ROWS
    by_read.close()
    by_sql.close()
