"""Which engine answers: `auto` runs a needle in process and
hands a scan whose projected bytes pass the scan limit to Spark, as it does a statement when
the Spark master is a bigger cluster; the limit weighs the projected columns, not whole
blocks; forcing works both ways, the stats and EXPLAIN say
which engine ran and why; the reader fetches only the projected columns; the embedded
engine stays read-only and never starts Spark."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pyarrow as pa
import pytest

import shoal
from shoal.errors import QueryError
from shoal.query.routing import EngineChoiceError, LocalEngineRefusedError
from shoal.types import LONG, STRING, Column
from tests.query.conftest import SPARK_MASTER, T0, ns

ROWS = 20_000


def _hex(n: int) -> list[str]:
    return [secrets.token_hex(16) for _ in range(n)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory, spark):
    """4 extents of 20,000 rows: a short `service` and three incompressible 32-hex columns,
    so a projection's saving is far above the reader's fixed costs."""
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("choice")),
                       spark_master=SPARK_MASTER)
    db.create_table("w", [Column("service", STRING), Column("trace_id", STRING),
                          Column("a", STRING), Column("b", STRING), Column("n", LONG)])
    info = db.catalog.load_table("w")
    needles = []
    for k in range(4):
        ids = _hex(ROWS)
        needles.append(ids[ROWS // 2])
        t = pa.table({
            "_timestamp": pa.array([ns(T0) + (k * ROWS + i) * 1_000_000 for i in range(ROWS)],
                                   pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(ROWS, pa.binary()),
            "service": [f"svc-{i % 5}" for i in range(ROWS)], "trace_id": ids,
            "a": _hex(ROWS), "b": _hex(ROWS), "n": pa.array(range(ROWS), pa.int64()),
        }).cast(info.schema.arrow())
        db.coordinator.append("w", [db.coordinator.write_extent(info, t.to_batches())])
    db.needles = needles
    yield db
    db.close()


def _with_budget(db, budget: int) -> None:
    db.config = replace(db.config, local_scan_max_bytes=budget)


def test_auto_runs_a_needle_locally_and_a_scan_over_the_budget_on_spark(wide):
    needle = f"SELECT service, n FROM w WHERE trace_id = '{wide.needles[2]}'"
    full = "SELECT service, count(*) AS c, sum(n) AS s FROM w GROUP BY service"
    plan_needle = wide.sql("EXPLAIN " + needle).stats.to_json()
    plan_full = wide.sql("EXPLAIN " + full).stats.to_json()
    assert plan_needle["extents_read"] == 1 and plan_full["extents_read"] == 4
    assert plan_needle["projected_bytes"] * 2 < plan_full["projected_bytes"]
    _with_budget(wide, plan_needle["projected_bytes"] * 2)
    try:
        r = wide.sql(needle)
        doc = r.stats.to_json()
        assert (doc["engine"], r.table.to_pylist()) == ("local", [{"service": "svc-0",
                                                                   "n": ROWS // 2}])
        assert "within the local scan limit" in doc["engine_reason"]
        r = wide.sql(full)
        doc = r.stats.to_json()
        assert doc["engine"] == "spark" and "over the local scan limit" in doc["engine_reason"]
        assert sorted(r.table.to_pylist(), key=lambda x: x["service"])[0] == {
            "service": "svc-0", "c": 4 * ROWS // 5, "s": 4 * sum(range(0, ROWS, 5))}
        # EXPLAIN says the same, per scan
        rows = wide.sql("EXPLAIN " + full).table.to_pylist()
        assert {x["engine"] for x in rows} == {"spark"}
        # forcing: local refuses what is over the budget, with a clear error
        with pytest.raises(LocalEngineRefusedError, match="over the local scan limit"):
            wide.sql(full, engine="local")
        forced = wide.sql(needle, engine="spark").stats.to_json()
        assert (forced["engine"], forced["engine_reason"]) == ("spark",
                                                               "engine=spark requested")
    finally:
        _with_budget(wide, 8 << 30)
    local = wide.sql(full, engine="local")
    assert local.stats.engine == "local" and "engine=local requested" in \
        local.stats.engine_reason


def test_configured_default_engine_and_bad_names(wide):
    sql = f"SELECT n FROM w WHERE trace_id = '{wide.needles[0]}'"
    wide.config = replace(wide.config, query_engine="spark")
    try:
        assert wide.sql(sql).stats.engine == "spark"
        assert wide.sql(sql, engine="local").stats.engine == "local"
    finally:
        wide.config = replace(wide.config, query_engine="auto")
    with pytest.raises(EngineChoiceError, match="engine must be one of auto, local, spark"):
        wide.sql(sql, engine="duck")
    from shoal.config import load_config
    from shoal.errors import ConfigError

    assert load_config(env={"SHOAL_QUERY_ENGINE": "Local",
                            "SHOAL_LOCAL_QUERY_MAX_BYTES": "1048576"}).query_engine == "local"
    # the scan limit's former name still sets it; the current name wins
    assert load_config(env={"SHOAL_LOCAL_QUERY_MAX_BYTES": "1048576"}
                       ).local_scan_max_bytes == 1 << 20
    assert load_config(env={"SHOAL_LOCAL_QUERY_MAX_BYTES": "1048576",
                            "SHOAL_LOCAL_SCAN_MAX_BYTES": "2097152"}
                       ).local_scan_max_bytes == 2 << 20
    assert load_config(local_query_max_bytes=5).local_scan_max_bytes == 5
    with pytest.raises(ConfigError, match="query_engine"):
        load_config(env={"SHOAL_QUERY_ENGINE": "fast"})


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_one_column_reads_fewer_bytes_than_select_star(wide, engine):
    """Same extent, same blocks: the reader fetches and decompresses only projected fields."""
    where = "WHERE _timestamp < '2026-03-01 00:00:10'"        # the first extent only
    one = wide.sql(f"SELECT service FROM w {where}", engine=engine).stats.to_json()
    star = wide.sql(f"SELECT * FROM w {where}", engine=engine).stats.to_json()
    assert one["extents_read"] == star["extents_read"] == 1
    assert one["blocks_read"] == star["blocks_read"]
    assert 0 < one["bytes_read"] < star["bytes_read"] / 4, (one["bytes_read"],
                                                           star["bytes_read"])


def test_local_errors_are_the_users_and_refusals_name_the_reason(wide):
    with pytest.raises(LocalEngineRefusedError, match=r"function initcap\(\)"):
        wide.sql("SELECT initcap(service) AS s FROM w", engine="local")
    with pytest.raises(QueryError):
        wide.sql("SELECT nope FROM w", engine="local")
    # an integer overflow raises in both engines (Spark's ANSI mode); auto gives Spark's error
    with pytest.raises(QueryError, match="(?i)overflow"):
        wide.sql("SELECT sum(n * 4611686018427387904) AS s FROM w", engine="local")
    with pytest.raises(QueryError, match="ARITHMETIC_OVERFLOW"):
        wide.sql("SELECT sum(n * 4611686018427387904) AS s FROM w")


def test_the_local_engine_reads_no_files_and_starts_no_spark(tmp_path, wide):
    """A fresh client answers locally without a Spark session; DuckDB's own file and
    extension functions are unreachable (the guard refuses them first, and the locked
    database refuses them even when called directly)."""
    from shoal.query.embedded.local_engine import DuckDBExecutor, LocalExecutionError

    db = shoal.connect(data_dir=str(tmp_path / "d"), spark_master=SPARK_MASTER)
    try:
        db.create_table("t", [Column("s", STRING)])
        db.ingest_ndjson("t", b'{"_timestamp": "2026-03-01T00:00:00Z", "s": "x"}')
        r = db.sql("SELECT s FROM t")
        assert r.stats.engine == "local" and r.table.to_pylist() == [{"s": "x"}]
        assert db.query_engine._spark is None
    finally:
        db.close()
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    ex = DuckDBExecutor(threads=1)
    for sql in (f"SELECT * FROM read_csv('{secret}')", f"SELECT * FROM '{secret}'",
                "INSTALL httpfs", "SET enable_external_access = true",
                f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'", f"ATTACH '{tmp_path / 'x.db'}'"):
        with pytest.raises(LocalExecutionError):
            ex.run(sql, {}, [])
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.db").exists()


def test_a_whole_day_of_a_few_columns_is_weighed_by_its_columns(wide):
    """The scan limit weighs the projected columns: a two-column aggregate over every block
    counts a fraction of the blocks' bytes, so a limit between the two keeps it local."""
    full = "SELECT service, count(*) AS c, sum(n) AS s FROM w GROUP BY service"
    plan = wide.sql("EXPLAIN " + full).stats.to_json()
    assert 0 < plan["projected_bytes"] * 2 < plan["planned_bytes"]
    _with_budget(wide, (plan["projected_bytes"] + plan["planned_bytes"]) // 2)
    try:
        doc = wide.sql(full).stats.to_json()
        assert doc["engine"] == "local" and "within the local scan limit" in \
            doc["engine_reason"]
    finally:
        _with_budget(wide, 8 << 30)


def test_a_bigger_cluster_takes_what_the_embedded_engine_could_answer():
    """A Spark master that is a cluster with more cores than this machine answers in `auto`
    (the reason says so); one no bigger, or a forced `local`, leaves it to the embedded
    engine; a cluster whose settings do not say its cores is taken to be bigger."""
    from shoal.config import Config
    from shoal.query.embedded.transpile import NotLocal
    from shoal.query.routing import Cluster, choose
    from shoal.query.spark.cluster import cluster_cores

    statement = object()

    def vetted():
        return statement

    def refused():
        raise NotLocal("function initcap()")

    big, small = Cluster("spark://m:7077", 64, 2), Cluster("spark://m:7077", 2, 2)
    route = choose("auto", projected_bytes=10, max_bytes=100, vet=vetted, cluster=big)
    assert route.engine == "spark" and "64 cores, more than this machine's 2" in route.reason
    for cluster in (small, None):
        assert choose("auto", projected_bytes=10, max_bytes=100, vet=vetted,
                      cluster=cluster).engine == "local"
    assert choose("local", projected_bytes=10, max_bytes=100, vet=vetted,
                  cluster=big).engine == "local"
    unknown = choose("auto", projected_bytes=10, max_bytes=100, vet=vetted,
                     cluster=Cluster("spark://m:7077", None, 2))
    assert unknown.engine == "spark" and "spark.cores.max" in unknown.reason
    route = choose("auto", projected_bytes=10, max_bytes=100, vet=refused, cluster=small)
    assert route.engine == "spark" and "initcap" in route.reason
    # the cores a cluster session may use, from its settings
    assert cluster_cores(Config()) is None
    master = "spark://m:7077"
    assert cluster_cores(Config(spark_master=master,
                                spark_conf=(("spark.cores.max", "12"),))) == 12
    assert cluster_cores(Config(spark_master=master, spark_conf=(
        ("spark.executor.cores", "4"), ("spark.executor.instances", "3")))) == 12
    assert cluster_cores(Config(spark_master=master), role="serve") == 2
