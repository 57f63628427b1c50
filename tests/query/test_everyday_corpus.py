"""Every everyday statement (`tests.query.everyday_corpus`) gives the same answer with
`engine=auto` as with `engine=spark` (same column names, same Arrow types, same rows, in
order where the statement orders them), and the embedded engine answers at least 90% of
them in `auto`; the rest are listed with the reason the engine choice gave."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest

import shoal
from tests.query.conftest import ndjson
from tests.query.everyday_corpus import LOG_COLUMNS, STATEMENTS, Statement, log_rows
from tests.support.fixtures import SPARK_MASTER

LOCAL_SHARE_TARGET = 0.9


@pytest.fixture(scope="module")
def db(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("everyday") / "data"),
                           spark_master=SPARK_MASTER)
    client.create_table("logs", LOG_COLUMNS)
    rows = log_rows()
    for part in range(4):           # four extents, as a day of ingest would leave
        client.ingest_ndjson("logs", ndjson(rows[part * 100:(part + 1) * 100]))
    yield client
    client.close()


def run(db: shoal.Shoal, st: Statement, engine: str):
    if st.lang == "kql":
        return db.query_engine.execute_kql(st.text, engine=engine)
    return db.sql(st.text, engine=engine)


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9) if math.isfinite(v) else str(v)
    if isinstance(v, list):
        return tuple(_cell(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _cell(x)) for k, x in v.items()))
    return v


def rows(table: pa.Table, ordered: bool) -> list[tuple]:
    out = [tuple(_cell(v) for v in row.values()) for row in table.to_pylist()]
    return out if ordered else sorted(out, key=repr)


def same_floats(a: list[tuple], b: list[tuple]) -> bool:
    """Rows equal, floats to 1e-9 relative (a sum's order may differ in the last bits, and a
    variance agrees with Spark's to 1e-12 of its values' mean square: see
    shoal.query.embedded.functions.statistics)."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                    return False
            elif x != y:
                return False
    return True


@pytest.mark.parametrize("st", STATEMENTS, ids=[s.id for s in STATEMENTS])
def test_auto_answers_as_spark_does(db, st: Statement):
    auto = run(db, st, "auto")
    spark = run(db, st, "spark")
    assert auto.table.schema.names == spark.table.schema.names, st.text
    assert [f.type for f in auto.table.schema] == [f.type for f in spark.table.schema], (
        st.text, auto.stats.engine, auto.table.schema, spark.table.schema)
    got, want = rows(auto.table, st.ordered), rows(spark.table, st.ordered)
    assert got == want or same_floats(got, want), (st.text, auto.stats.engine, got[:5],
                                                   want[:5])
    assert want, f"{st.id} answers no rows over the corpus table: not a useful statement"


def test_the_embedded_engine_answers_most_everyday_statements(db):
    routed = []
    for st in STATEMENTS:
        prefix = "EXPLAIN " if st.lang == "sql" else ""
        if st.lang == "sql":
            stats = db.sql(prefix + st.text).stats
        else:
            stats = db.query_engine.execute_kql(st.text).stats
        routed.append((st, stats.engine, stats.engine_reason))
    local = [r for r in routed if r[1] == "local"]
    share = len(local) / len(routed)
    spark = "\n".join(f"  {st.id} ({st.lang}): {reason}" for st, engine, reason in routed
                      if engine != "local")
    print(f"\neveryday corpus: {len(local)}/{len(routed)} = {share:.0%} answered by the "
          f"embedded engine\n{spark}")
    assert len(STATEMENTS) >= 60
    assert share >= LOCAL_SHARE_TARGET, (
        f"{share:.0%} of the everyday statements run on the embedded engine (target "
        f"{LOCAL_SHARE_TARGET:.0%}); sent to Spark:\n{spark}")
