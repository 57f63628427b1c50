"""Foreign tables (docs/connectors.md, "Federation"): CREATE FOREIGN TABLE over the shared
Postgres and MariaDB, live reads with pushed filters on both engines, joins with shoal
tables, and what must never happen: a write to a foreign table, a connection to a host the
operator did not allow, a password in an answer, an error or a log line."""

from __future__ import annotations

import logging
import time
from urllib.parse import urlparse

import pytest

import shoal
from shoal.errors import (DdlSyntaxError, ForeignRowCapError, ForeignSourceError,
                          InvalidPropertyError, LocationNotAllowedError, ReadOnlyTableError,
                          TableNotFoundError)
from shoal.query.ddl import CreateTable, parse_ddl
from shoal.query.federation.pushdown import pushed_filter
from shoal.query.federation.source import Family, mysql_family, parse_source, postgres_family
from shoal.query.limits import QueryLimits
from shoal.query.planner import analyze
from shoal.secrets import mask_url
from shoal.types import INT, LONG, REAL, STRING, TIMESTAMP

from tests.support.fixtures import SPARK_MASTER

SECRET = "Sup3r-Secret-pw"


# ---- pieces without a server ----------------------------------------------------------------
def test_mask_url_hides_only_the_password():
    assert mask_url(f"postgresql://app:{SECRET}@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert mask_url("mysql://root@db/x") == "mysql://root@db/x"
    assert mask_url(f"failed for mysql://u:{SECRET}@h:1/d: nope") == (
        "failed for mysql://u:***@h:1/d: nope")


def test_create_foreign_table_parses():
    stmt = parse_ddl("CREATE FOREIGN TABLE IF NOT EXISTS pg_orders (id int) WITH "
                     "(source='postgresql://u@h/d', source_table='public.orders')")
    assert isinstance(stmt, CreateTable) and stmt.foreign and stmt.if_not_exists
    assert stmt.properties == {"source": "postgresql://u@h/d", "source_table": "public.orders"}
    with pytest.raises(DdlSyntaxError, match="line 1, col 31: expected WITH"):
        parse_ddl("CREATE FOREIGN TABLE pg_orders")


@pytest.mark.parametrize(("props", "message"), [
    ({"source": f"oracle://u:{SECRET}@h/d", "source_table": "t"}, "postgresql://, mysql://"),
    ({"source": f"postgresql://u:{SECRET}@h", "source_table": "t"}, "name one database"),
    ({"source": f"postgresql://u:{SECRET}@h/d", "source_table": "a.b.c"}, "schema.table"),
    ({"source": f"postgresql://u:{SECRET}@h/d", "source_table": "t; drop"}, "schema.table"),
    ({"source": f"postgresql://u:{SECRET}@h/d", "source_table": "t",
      "password_env": "K3_NOT_SET_ANYWHERE"}, "K3_NOT_SET_ANYWHERE is not set"),
])
def test_bad_source_properties_name_the_property_and_hide_the_password(props, message):
    with pytest.raises(InvalidPropertyError, match=message) as err:
        parse_source(props, environ={})
    assert SECRET not in str(err.value)


def test_password_env_supplies_the_password():
    src = parse_source({"source": "postgresql://app@db:6432/shop", "source_table": "orders",
                        "password_env": "SHOP_PW"}, environ={"SHOP_PW": "p@ss/w:rd"})
    assert (src.schema, src.table, src.port) == ("public", "orders", 6432)
    assert src.connect_url() == "postgresql://app:p%40ss%2Fw%3Ard@db:6432/shop"
    assert "p@ss" not in src.masked


def _pushed(sql: str, dialect_url: str, families: dict[str, Family]) -> list[str]:
    source = parse_source({"source": dialect_url, "source_table": "s.t"})
    types = {name: f.type for name, f in families.items()}
    ref = analyze(sql, {"t": types}).refs[0]
    return pushed_filter(ref.conjuncts, source=source, alias=ref.alias, sole=ref.sole,
                         columns={k: (k.upper(), f) for k, f in families.items()})


PG_FAMILIES = {"id": postgres_family("integer"), "name": postgres_family("text"),
               "amount": postgres_family("numeric"),
               "at": postgres_family("timestamp with time zone")}


def test_pushdown_keeps_what_the_source_can_evaluate_exactly():
    pushed = _pushed(
        r"SELECT * FROM t WHERE id >= 5 AND id IN (1, 2, -3) AND name = 'it\'s' "
        "AND name IS NOT NULL AND amount BETWEEN 1.5 AND 2 "
        "AND at < '2024-01-02 03:04:05' AND upper(name) = 'X' AND (id = 1 OR id = 2) "
        "AND name > 'm' AND id <> 4", "postgresql://u@h/d", PG_FAMILIES)
    assert pushed == ['"ID"::int4 >= 5', '"ID"::int4 IN (1, 2, -3)', '"NAME"::text = \'it\'\'s\'',
                      '"NAME"::text IS NOT NULL',
                      '"AMOUNT"::float8 >= 1.5 AND "AMOUNT"::float8 <= 2',
                      '"AT"::timestamptz < \'2024-01-02 03:04:05\'::timestamptz']


def test_pushdown_escapes_literals_for_mysql_and_keeps_its_timestamps():
    families = {"id": mysql_family("int", "int(11)"), "name": mysql_family("varchar", "x"),
                "at": mysql_family("datetime", "datetime")}
    assert families["id"].type == INT and families["at"].type == TIMESTAMP
    assert mysql_family("int", "int(10) unsigned").type == LONG
    assert mysql_family("decimal", "decimal(10,2)").type == REAL
    pushed = _pushed(r"SELECT * FROM t WHERE name = 'a\'b\\c' AND at > '2024-01-01' "
                     "AND id = 7", "mysql://u@h/d", families)
    assert pushed == ["`NAME` = 'a''b\\\\c'", "CAST(`ID` AS SIGNED) = 7"]


def test_pushdown_takes_only_the_references_own_columns():
    families = {"id": postgres_family("integer"), "name": postgres_family("text")}
    source = parse_source({"source": "postgresql://u@h/d", "source_table": "s.t"})
    sql = ("SELECT * FROM t a JOIN u b ON a.id = b.id AND b.id = 3 "
           "WHERE a.name = 'x' AND id = 1")
    analysis = analyze(sql, {"t": {"id": INT, "name": STRING}, "u": {"id": INT}})
    ref = next(r for r in analysis.refs if r.table == "t")
    assert pushed_filter(ref.conjuncts, source=source, alias=ref.alias, sole=ref.sole,
                         columns={k: (k, f) for k, f in families.items()}) == [
        '"name"::text = \'x\'']


def test_allowed_hosts_refuse_before_connecting(tmp_path, caplog):
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="db.internal:5432")
    try:
        with pytest.raises(LocationNotAllowedError, match="SHOAL_ALLOWED_HOSTS") as err:
            db.sql("CREATE FOREIGN TABLE x WITH (source='postgresql://u:" + SECRET
                   + "@10.9.8.7:5432/d', source_table='t')")
        assert "10.9.8.7:5432" in str(err.value) and SECRET not in str(err.value)
        with pytest.raises(LocationNotAllowedError):   # the port counts, default included
            db.sql("CREATE FOREIGN TABLE x WITH (source='mysql://u@db.internal/d', "
                   "source_table='t')")
        with pytest.raises(TableNotFoundError):
            db.sql("SELECT * FROM x")
    finally:
        db.close()
    assert SECRET not in caplog.text


def test_source_is_only_for_foreign_tables(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="127.0.0.1")
    try:
        with pytest.raises(InvalidPropertyError, match="CREATE FOREIGN TABLE"):
            db.sql("CREATE TABLE t (a int) WITH (source='postgresql://u@127.0.0.1/d', "
                   "source_table='x')")
        db.sql("CREATE TABLE t (a int)")
        db.ingest_ndjson("t", b'{"a": 1}\n')
        with pytest.raises(InvalidPropertyError, match="CREATE FOREIGN TABLE"):
            db.sql("ALTER TABLE t SET TBLPROPERTIES ('source' = 'postgresql://u@127.0.0.1/d')")
        assert db.sql("SELECT a FROM t").table.to_pylist() == [{"a": 1}]
    finally:
        db.close()


# ---- against the shared Postgres and MariaDB ----------------------------------------------------
@pytest.fixture
def fdb(tmp_path, monkeypatch):
    monkeypatch.setenv("K3_SOURCE_PW", SECRET)
    client = shoal.connect(data_dir=str(tmp_path / "data"), spark_master=SPARK_MASTER,
                           allowed_hosts="127.0.0.1")
    yield client
    client.close()


ORDERS = 10_000


@pytest.fixture
def pg_orders(pg_source):
    s = pg_source.schema
    pg_source.run(
        f"CREATE TABLE {s}.orders (id integer PRIMARY KEY, customer_id integer, "
        "status text, amount numeric(10,2), placed timestamptz, note jsonb)",
        f"INSERT INTO {s}.orders SELECT g, g % 50, (ARRAY['new','paid','shipped'])[g % 3 + 1], "
        "g * 1.25, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', "
        f"jsonb_build_object('n', g) FROM generate_series(1, {ORDERS}) g",
        f"INSERT INTO {s}.orders VALUES (0, NULL, 'it''s', NULL, NULL, NULL)",
        f"ANALYZE {s}.orders")
    return pg_source


def _pg_url(pg_source, password: bool = False) -> str:
    u = urlparse(pg_source.url)
    auth = f"{u.username}:{SECRET}@" if password else f"{u.username}@"
    return f"postgresql://{auth}{u.hostname}:{u.port or 5432}{u.path}"


def _create_pg(fdb, pg_source, name="pg_orders", *, extra=""):
    fdb.sql(f"CREATE FOREIGN TABLE {name} WITH (source='{_pg_url(pg_source)}', "
            f"source_table='{pg_source.schema}.orders', password_env='K3_SOURCE_PW'{extra})")


@pytest.fixture
def maria_customers(mariadb_source):
    mariadb_source.run(
        "CREATE TABLE customers (id INT PRIMARY KEY, Name VARCHAR(40), region VARCHAR(10), "
        "credit DECIMAL(10,2), since DATETIME(6))",
        "INSERT INTO customers VALUES " + ", ".join(
            f"({i}, 'cust {i}', '{['eu', 'us', 'apac'][i % 3]}', {i * 10}.5, "
            f"'2023-0{1 + i % 9}-01 12:00:00')" for i in range(50)))
    return mariadb_source


@pytest.mark.postgres
def test_columns_come_from_the_source_and_passwords_stay_masked(fdb, pg_orders, caplog):
    caplog.set_level(logging.INFO)
    fdb.sql(f"CREATE FOREIGN TABLE pg_orders WITH (source='{_pg_url(pg_orders, True)}', "
            f"source_table='{pg_orders.schema}.orders')")
    described = {r["name"]: r["type"] for r in fdb.sql("DESCRIBE pg_orders").table.to_pylist()}
    assert described == {"_timestamp": "timestamp", "props": "dynamic", "id": "int",
                         "customer_id": "int", "status": "string", "amount": "real",
                         "placed": "timestamp", "note": "string"}
    props = dict(fdb.sql("SHOW TBLPROPERTIES pg_orders").table.to_pylist()[i].values()
                 for i in range(3))
    assert props["source"] == _pg_url(pg_orders, True).replace(SECRET, "***")
    assert SECRET not in str(fdb.describe("pg_orders"))
    assert SECRET not in str([d["properties"] for d in fdb.tables()])
    answer = fdb.sql("SELECT * FROM pg_orders WHERE id = 1")
    assert answer.table.num_rows == 1
    assert SECRET not in str(answer.stats.to_json())
    assert SECRET not in caplog.text


@pytest.mark.postgres
def test_source_errors_hide_the_password(fdb, pg_orders, caplog):
    u = urlparse(pg_orders.url)
    fdb.sql(f"CREATE FOREIGN TABLE pg_orders WITH (source='{_pg_url(pg_orders, True)}', "
            f"source_table='{pg_orders.schema}.orders')")
    # the same table, then a database that does not exist: the read fails at connect
    fdb.sql(f"ALTER TABLE pg_orders SET TBLPROPERTIES ('source' = "
            f"'postgresql://{u.username}:{SECRET}@{u.hostname}:{u.port or 5432}/no_such_db_k3')")
    with pytest.raises(ForeignSourceError, match="no_such_db_k3") as err:
        fdb.sql("SELECT id FROM pg_orders")
    assert SECRET not in str(err.value) and "***" in str(err.value)
    _create_pg(fdb, pg_orders, "pg_env")            # the password from the environment
    fdb.sql("ALTER TABLE pg_env SET TBLPROPERTIES ('source_table' = 'nope.nothing')")
    with pytest.raises(InvalidPropertyError, match="no table nope.nothing") as err:
        fdb.sql("SELECT * FROM pg_env")
    assert SECRET not in str(err.value)
    assert SECRET not in caplog.text


@pytest.mark.postgres
def test_filter_is_pushed_to_postgres_and_seen_in_its_statistics(fdb, pg_orders):
    _create_pg(fdb, pg_orders)
    s = pg_orders.schema
    explain = fdb.sql("EXPLAIN SELECT id, status FROM pg_orders WHERE id <= 3 AND "
                      "status IN ('paid', 'new') AND amount IS NOT NULL").table.to_pylist()
    assert explain[0]["pushed"] == (
        f'SELECT "id"::int4 AS "id", "status"::text AS "status", "amount"::float8 AS "amount" '
        f'FROM "{s}"."orders" '
        '''WHERE "id"::int4 <= 3 AND "status"::text IN ('paid', 'new') AND '''
        '''"amount"::float8 IS NOT NULL LIMIT 1000001''')

    def counters() -> tuple[int, int]:
        (row,) = pg_orders.rows("SELECT coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0) "
                                "FROM pg_stat_user_tables WHERE relid = %s::regclass",
                                (f"{s}.orders",))
        return row

    before = counters()
    answer = fdb.sql("SELECT id, status FROM pg_orders WHERE id <= 3 AND "
                     "status IN ('paid', 'new') ORDER BY id", engine="local")
    assert answer.table.to_pylist() == [{"id": 1, "status": "paid"},
                                        {"id": 3, "status": "new"}]
    assert answer.stats.scans[0]["source_rows"] == 2
    # Postgres publishes a session's table statistics when the session ends, which is
    # just after the reader closes it: wait for the scan to show, then compare.
    deadline = time.monotonic() + 30
    while counters() == before and time.monotonic() < deadline:
        pg_orders.rows("SELECT pg_stat_clear_snapshot()")
    seq_read, idx_fetched = (a - b for a, b in zip(counters(), before, strict=True))
    assert seq_read == 0 and 0 < idx_fetched < 20     # the index, not 10,001 rows


@pytest.mark.postgres
def test_reads_are_live_capped_and_timed_out(tmp_path, fdb, pg_orders):
    _create_pg(fdb, pg_orders)
    s = pg_orders.schema
    count = "SELECT count(*) AS n FROM pg_orders WHERE status = 'paid'"
    assert fdb.sql(count).table.to_pylist() == [{"n": ORDERS // 3 + 1}]
    pg_orders.run(f"DELETE FROM {s}.orders WHERE id <= 30")
    assert fdb.sql(count).table.to_pylist() == [{"n": ORDERS // 3 + 1 - 10}]

    capped = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="127.0.0.1",
                           query_max_rows=100)
    try:
        assert capped.sql("SELECT count(*) AS n FROM pg_orders WHERE id <= 100"
                          ).table.to_pylist() == [{"n": 70}]
        with pytest.raises(ForeignRowCapError, match="more than 100 rows"):
            capped.sql("SELECT count(*) FROM pg_orders")
    finally:
        capped.close()

    pg_orders.run(f"CREATE VIEW {s}.slow AS SELECT 1 AS id FROM pg_sleep(60)")
    fdb.sql(f"CREATE FOREIGN TABLE slow WITH (source='{_pg_url(pg_orders)}', "
            f"source_table='{s}.slow')")
    with pytest.raises(ForeignSourceError, match="statement timeout"):
        fdb.query_engine.execute("SELECT * FROM slow", limits=QueryLimits(timeout_s=0.2))


@pytest.mark.postgres
def test_foreign_tables_are_never_written(fdb, pg_orders):
    _create_pg(fdb, pg_orders)
    with pytest.raises(ReadOnlyTableError):
        fdb.ingest_ndjson("pg_orders", b'{"id": 99999, "status": "x"}\n')
    with pytest.raises(ReadOnlyTableError):
        fdb.sql("DELETE FROM pg_orders WHERE id = 1")
    with pytest.raises(ReadOnlyTableError):
        fdb.sql("TRUNCATE TABLE pg_orders")
    with pytest.raises(ReadOnlyTableError):
        fdb.sql("ALTER TABLE pg_orders ADD COLUMN extra string")
    with pytest.raises(InvalidPropertyError, match="cannot lose its source"):
        fdb.sql("ALTER TABLE pg_orders UNSET TBLPROPERTIES ('source')")
    assert fdb.sql("DROP TABLE pg_orders").table.to_pylist() == [
        {"name": "pg_orders", "status": "dropped"}]
    with pytest.raises(TableNotFoundError):
        fdb.sql("SELECT * FROM pg_orders")
    assert pg_orders.rows(f"SELECT count(*) FROM {pg_orders.schema}.orders") == [(ORDERS + 1,)]


@pytest.mark.postgres
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_join_of_postgres_mariadb_and_shoal_equals_the_sources(fdb, pg_orders,
                                                               maria_customers, engine, spark):
    _create_pg(fdb, pg_orders)
    fdb.sql(f"CREATE FOREIGN TABLE my_customers WITH (source='{maria_customers.url}', "
            "source_table='customers')")
    fdb.sql("CREATE TABLE regions (region string, manager string)")
    fdb.ingest_ndjson("regions", b'{"region": "eu", "manager": "Ines"}\n'
                                 b'{"region": "us", "manager": "Sam"}\n')
    sql = ("SELECT c.name, r.manager, count(*) AS orders, round(sum(o.amount), 2) AS total "
           "FROM pg_orders o JOIN my_customers c ON o.customer_id = c.id "
           "JOIN regions r ON c.region = r.region "
           "WHERE o.status = 'paid' AND o.id < 2000 AND c.credit >= 100 "
           "GROUP BY c.name, r.manager ORDER BY c.name")
    answer = fdb.sql(sql, engine=engine)
    assert answer.stats.engine == engine
    pushed = {s["table"]: s["pushed"] for s in answer.stats.scans}
    assert "WHERE \"status\"::text = 'paid' AND \"id\"::int4 < 2000" in pushed["pg_orders"]
    assert "WHERE CAST(`credit` AS DOUBLE) >= 100" in pushed["my_customers"]

    # the same join in the sources: orders from Postgres, customers from MariaDB
    orders = pg_orders.rows(f"SELECT customer_id, amount FROM {pg_orders.schema}.orders "
                            "WHERE status = 'paid' AND id < 2000")
    customers = {i: (name, region) for i, name, region in maria_customers.rows(
        "SELECT id, Name, region FROM customers WHERE credit >= 100")}
    managers = {"eu": "Ines", "us": "Sam"}
    expected: dict[tuple[str, str], list] = {}
    for customer_id, amount in orders:
        if customer_id in customers and customers[customer_id][1] in managers:
            name, region = customers[customer_id]
            agg = expected.setdefault((name, managers[region]), [0, 0])
            agg[0] += 1
            agg[1] += float(amount)
    assert [(r["name"], r["manager"], r["orders"], r["total"])
            for r in answer.table.to_pylist()] == [
        (name, manager, n, round(total, 2))
        for (name, manager), (n, total) in sorted(expected.items())]
    assert len(expected) > 5


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_mariadb_types_read_as_shoal_types(fdb, maria_customers, engine, spark):
    fdb.sql(f"CREATE FOREIGN TABLE my_customers WITH (source='{maria_customers.url}', "
            "source_table='customers')")
    rows = fdb.sql("SELECT id, name, credit, since, _timestamp FROM my_customers "
                   "WHERE id IN (3, 4) AND since < '2023-05-01' ORDER BY id",
                   engine=engine).table.to_pylist()
    assert [(r["id"], r["name"], r["credit"], r["since"].isoformat(), r["_timestamp"])
            for r in rows] == [(3, "cust 3", 30.5, "2023-04-01T12:00:00+00:00", None)]
