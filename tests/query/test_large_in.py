"""`IN (...)` with 1,000 and 5,000 values through `db.sql`: the same answer with pruning on
and off (it used to fail in stage-1 pruning with SQLite's "Expression tree is too large")."""

from __future__ import annotations

import pytest

from shoal.types import INT, STRING, Column
from tests.query.conftest import ndjson, rows_at


@pytest.mark.parametrize("n_values", [1000, 5000])
def test_long_in_lists_answer_like_no_pruning(db, n_values):
    db.create_table("logs", [Column("service", STRING), Column("code", INT)])
    for minute in range(6):  # six extents, one service and one code range each
        db.ingest_ndjson("logs", ndjson(rows_at(minute, 50, service=f"svc-{minute}",
                                                code=lambda i, m=minute: 100 * m + i)))
    services = ", ".join([f"'svc-{m}'" for m in (1, 4)] +
                         [f"'other-{k}'" for k in range(n_values - 2)])
    codes = ", ".join(str(c) for c in [101, 449] + list(range(10_000, 10_000 + n_values - 2)))
    for sql, expected in [
        (f"SELECT count(*) AS n FROM logs WHERE service IN ({services})", 100),
        (f"SELECT count(*) AS n FROM logs WHERE code IN ({codes})", 2),
    ]:
        pruned = db.sql(sql)
        full = db.sql(sql, prune=False)
        assert pruned.table.column("n").to_pylist() == [expected]
        assert full.table.column("n").to_pylist() == [expected]
        assert pruned.stats.to_json()["extents_read"] == 2
        assert full.stats.to_json()["extents_read"] == 6
