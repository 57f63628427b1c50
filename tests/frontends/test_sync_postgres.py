"""Sync of a PostgreSQL table into a change-log table, against real servers.

CDC runs against a private PostgreSQL with `wal_level=logical` (tests/support/pg_logical.py);
the machine's shared one (`wal_level=replica`) shows the error at CREATE, and hosts poll mode.
The expected change log is the sequence of statements the test itself ran at the source.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import shoal
from shoal.errors import LocationNotAllowedError, ShoalError
from shoal.frontends.sync.binding import SyncSetupError, SyncSourceError
from shoal.frontends.sync.kind import resolve_sync_binding
from shoal.frontends.sync.pipeline import SyncPipeline
from shoal.frontends.sync.source import current_state_sql
from tests.support.pg_logical import LogicalPostgres, start_logical_postgres

pytestmark = [pytest.mark.slow, pytest.mark.services]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def logical_pg() -> Iterator[LogicalPostgres]:
    server = start_logical_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def source(logical_pg) -> Iterator[tuple[str, str]]:
    """(server URL, a fresh table name) with 10k rows in `orders`-like shape."""
    name = "orders_" + uuid.uuid4().hex[:8]
    with psycopg.connect(logical_pg.url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, customer text, qty int, "
                  "price numeric(10,2), meta jsonb, updated_at timestamptz DEFAULT now())")
        c.execute(f"INSERT INTO {name} (id, customer, qty, price, meta) SELECT g, 'c' || "
                  "(g % 97), g % 13, g * 0.25, jsonb_build_object('g', g) FROM "
                  "generate_series(1, 10000) g")
    yield logical_pg.url, name


def open_db(tmp_path, **settings) -> shoal.Shoal:
    return shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="127.0.0.1",
                         **settings)


def source_rows(url: str, table: str, cols: str = "id, customer, qty") -> list[tuple]:
    with psycopg.connect(url) as c:
        return sorted(c.execute(f"SELECT {cols} FROM {table}").fetchall())


def apply(url: str, statements: list[list[str]]) -> None:
    """Each inner list is one transaction."""
    with psycopg.connect(url) as c:
        for txn in statements:
            with c.transaction():
                for s in txn:
                    c.execute(s)


def workload(table: str, rng: random.Random, n_txn: int, next_id: list[int],
             live: set[int]) -> tuple[list[list[str]], list[tuple]]:
    """Random transactions of inserts, updates and deletes, and the change log they make:
    (op, id, customer, qty) per row change, in commit order."""
    txns: list[list[str]] = []
    log: list[tuple] = []
    for _ in range(n_txn):
        txn = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.4 or not live:
                i = next_id[0]
                next_id[0] += 1
                txn.append(f"INSERT INTO {table} (id, customer, qty) VALUES ({i}, 'n{i}', 1)")
                live.add(i)
                log.append(("insert", i, f"n{i}", 1))
            elif kind < 0.75:
                i = rng.choice(sorted(live))
                q = rng.randint(100, 999)
                txn.append(f"UPDATE {table} SET customer = 'u{q}', qty = {q} WHERE id = {i}")
                log.append(("update", i, f"u{q}", q))
            else:
                i = rng.choice(sorted(live))
                txn.append(f"DELETE FROM {table} WHERE id = {i}")
                live.discard(i)
                log.append(("delete", i, None, None))
        txns.append(txn)
    return txns, log


def change_log(db, table: str) -> list[tuple]:
    res = db.sql(f"SELECT _op, id, customer, qty FROM `{table}` WHERE _op <> 'snapshot' "
                 "ORDER BY _source_position")
    return [tuple(r.values()) for r in res.table.to_pylist()]


def current_state(db, table: str, cols: list[str], engine: str | None = None) -> list[tuple]:
    res = db.sql(current_state_sql(table, ["id"], cols), engine=engine)
    return sorted(tuple(r.values()) for r in res.table.to_pylist())


def test_snapshot_then_changes_equal_the_source(tmp_path, source, monkeypatch):
    url, name = source
    from shoal.frontends.sync import postgres

    monkeypatch.setattr(postgres, "PARALLEL_MIN_ROWS", 0)   # 10k rows: read by 4 key ranges
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE osync WITH (sync_source='{url}', sync_table='public.{name}', "
           "sync_batch='50')")
    cols = [c.name for c in db.catalog.load_table("osync").schema.columns]
    assert cols == ["_timestamp", "props", "id", "customer", "qty", "price", "meta",
                    "updated_at", "_op", "_source_position"]
    binding = resolve_sync_binding(db, "osync")
    pipeline = SyncPipeline(db, binding)
    p = pipeline.run(once=True)
    assert p.snapshot_rows == 10_000
    snap = db.sql("SELECT count(*) AS n, count(DISTINCT _source_position) AS p FROM osync "
                  "WHERE _op = 'snapshot'").table.to_pylist()
    assert snap == [{"n": 10_000, "p": 1}]
    # price is numeric: kept exactly as its text; meta (jsonb) is dynamic
    row = db.sql("SELECT price, meta FROM osync WHERE id = 7").table.to_pylist()
    assert row == [{"price": "1.75", "meta": '{"g": 7}'}]

    rng = random.Random(37)
    live = set(range(1, 10_001))
    txns, expected = workload(name, rng, 120, [20_000], live)
    apply(url, txns)
    # a transaction of 600 row changes (its rows come in the order the server stored them)
    before = dict((i, c) for i, c, _ in source_rows(url, name) if 100 <= i < 700)
    apply(url, [[f"UPDATE {name} SET qty = 5000 + id WHERE id BETWEEN 100 AND 699"]])
    many = sorted(("update", i, c, 5000 + i) for i, c in before.items())
    apply(url, [[f"ALTER TABLE {name} ADD COLUMN note text"],
                [f"INSERT INTO {name} (id, customer, qty, note) VALUES (99999, 'z', 2, 'hi')"]])
    pipeline.run(once=True)
    pipeline.close()

    got = change_log(db, "osync")
    n = len(expected)
    assert got[:n] == expected
    assert sorted(got[n:n + len(many)]) == many
    assert got[n + len(many):] == [("insert", 99999, "z", 2)]
    assert "note" in db.catalog.load_table("osync").schema
    assert db.sql("SELECT note FROM osync WHERE id = 99999").table.to_pylist() == [
        {"note": "hi"}]
    # the current state equals the source's SELECT *, on the embedded engine
    assert current_state(db, "osync", ["id", "customer", "qty"]) == source_rows(url, name)
    # the slot was told only what the catalog holds
    with psycopg.connect(url) as c:
        flushed = c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                            "WHERE slot_name = 'shoal_osync'").fetchone()[0]
    from shoal.frontends.sync.postgres import parse_lsn

    assert parse_lsn(flushed) == db.catalog.source_offsets(pipeline.source_key)["0"]


def _worker(data_dir: str, table: str, die_at: int) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
    args = [sys.executable, "-m", "tests.support.sync_worker", data_dir, table, "--once"]
    if die_at:
        args += ["--die-at", str(die_at)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    return p.returncode, p.stdout.splitlines()


def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path, source):
    url, name = source
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE ksync WITH (sync_source='{url}', sync_table='public.{name}', "
           "sync_batch='5')")
    data_dir = str(tmp_path / "data")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    live = set(range(1, 10_001))
    next_id = [20_000]
    expected: list[tuple] = []
    kills = 0
    # crashes while the snapshot is written, after its extent, after its commit
    for die_at in (1, 2, 3):
        rc, lines = _worker(data_dir, "ksync", die_at)
        assert rc == -signal.SIGKILL, (die_at, lines)
    rc, lines = _worker(data_dir, "ksync", 0)
    assert rc == 0 and lines[-1] == "DONE", lines
    for phase in range(3):
        txns, log = workload(name, rng, 60, next_id, live)
        apply(url, txns)
        expected += log
        for _ in range(3):   # a few crashes at random stage lines, then a run to the end
            rc, lines = _worker(data_dir, "ksync", rng.randint(1, 12))
            if rc == -signal.SIGKILL:
                kills += 1
            else:
                assert rc == 0, (seed, lines)
        rc, lines = _worker(data_dir, "ksync", 0)
        assert rc == 0 and lines[-1] == "DONE", (seed, phase, lines)
    assert kills >= 3, seed
    db.close()
    db = open_db(tmp_path)
    assert change_log(db, "ksync") == expected, seed
    snap = db.sql("SELECT count(*) AS n FROM ksync WHERE _op = 'snapshot'").table.to_pylist()
    assert snap == [{"n": 10_000}], seed
    assert current_state(db, "ksync", ["id", "customer", "qty"]) == source_rows(url, name)


def test_cdc_needs_wal_level_logical(tmp_path, pg_server):
    db = open_db(tmp_path)
    name = "w_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY)")
    try:
        with pytest.raises(SyncSetupError, match="wal_level=logical"):
            db.sql(f"CREATE TABLE wsync WITH (sync_source='{pg_server}', "
                   f"sync_table='{name}')")
        assert "wsync" not in [t["name"] for t in db.tables()]
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP TABLE {name}")


def test_poll_mode_by_cursor(tmp_path, pg_server):
    db = open_db(tmp_path)
    name = "p_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text, version bigint)")
        c.execute(f"INSERT INTO {name} SELECT g, 'a' || g, g FROM generate_series(1, 500) g")
    try:
        # trust auth: any password is accepted, and none may show
        with_password = pg_server.replace("postgres@", "postgres:sekrit@")
        assert "sekrit" in with_password
        db.sql(f"CREATE TABLE psync WITH (sync_source='{with_password}', sync_table='{name}', "
               "sync_mode='poll', sync_cursor='version', sync_batch='40')")
        props = db.sql("SHOW TBLPROPERTIES psync").table.to_pylist()
        assert {"key": "sync_source",
                "value": with_password.replace("sekrit", "***")} in props
        assert "sekrit" not in str(db.describe("psync"))
        pipeline = SyncPipeline(db, resolve_sync_binding(db, "psync"))
        assert pipeline.run(once=True).snapshot_rows == 500
        with psycopg.connect(pg_server, autocommit=True) as c:
            # three rows share one cursor value: never split between two batches
            c.execute(f"UPDATE {name} SET v = 'b', version = 600 WHERE id IN (1, 2, 3)")
            c.execute(f"INSERT INTO {name} SELECT g, 'c', 600 + g FROM "
                      "generate_series(501, 600) g")
        p = pipeline.run(once=True)
        pipeline.close()
        assert p.changes == 103
        ops = db.sql("SELECT _op, count(*) AS n FROM psync GROUP BY _op ORDER BY _op")
        assert ops.table.to_pylist() == [{"_op": "snapshot", "n": 500},
                                         {"_op": "update", "n": 103}]
        assert current_state(db, "psync", ["id", "v", "version"]) == source_rows(
            pg_server, name, "id, v, version")
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP TABLE {name}")


def test_source_host_must_be_allowed_and_passwords_never_shown(tmp_path):
    strict = shoal.connect(data_dir=str(tmp_path / "strict"), allowed_hosts="other")
    with pytest.raises(LocationNotAllowedError):
        # checked before any connection: 10.255.255.1 would not answer
        strict.sql("CREATE TABLE s1 WITH (sync_source='postgresql://u:sekrit@10.255.255.1"
                   ":5432/db', sync_table='public.t')")
    db = open_db(tmp_path)
    with pytest.raises(SyncSourceError) as err:   # nothing listens on port 1
        db.sql("CREATE TABLE s2 WITH (sync_source='postgresql://u:sekrit@127.0.0.1:1/db', "
               "sync_table='public.t')")
    assert "sekrit" not in str(err.value) and "u:***@127.0.0.1:1" in str(err.value)
    with pytest.raises(ShoalError, match="sync_mode"):
        db.sql("CREATE TABLE s3 WITH (sync_source='postgresql://127.0.0.1/db', "
               "sync_table='t', sync_mode='stream')")


@pytest.mark.spark
def test_current_state_reads_the_same_on_spark(tmp_path, pg_server):
    db = open_db(tmp_path)
    name = "s_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text, version bigint)")
        c.execute(f"INSERT INTO {name} SELECT g, 'a' || g, g FROM generate_series(1, 50) g")
    try:
        db.sql(f"CREATE TABLE ssync WITH (sync_source='{pg_server}', sync_table='{name}', "
               "sync_mode='poll', sync_cursor='version')")
        pipeline = SyncPipeline(db, resolve_sync_binding(db, "ssync"))
        pipeline.run(once=True)
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"UPDATE {name} SET v = 'b' || id, version = 100 + id WHERE id <= 10")
        pipeline.run(once=True)
        pipeline.close()
        want = source_rows(pg_server, name, "id, v, version")
        assert current_state(db, "ssync", ["id", "v", "version"], engine="local") == want
        assert current_state(db, "ssync", ["id", "v", "version"], engine="spark") == want
    finally:
        with psycopg.connect(pg_server, autocommit=True) as c:
            c.execute(f"DROP TABLE {name}")


def test_supervisor_runs_the_sync_as_serve_does(tmp_path, source):
    import threading

    from shoal.frontends.supervisor import BindingSupervisor
    from shoal.frontends.sync.kind import SyncKind

    url, name = source
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE vsync WITH (sync_source='{url}', sync_table='public.{name}', "
           "sync_poll_interval='0.05')")
    snapshotted, caught_up = threading.Event(), threading.Event()
    want = 10_000 + 3

    def on_commit(table: str, p) -> None:
        snapshotted.set()
        if p.rows >= want:
            caught_up.set()

    kind = SyncKind(db, on_commit=on_commit)
    supervisor = BindingSupervisor(db.catalog, [kind])
    supervisor.start()
    try:
        assert snapshotted.wait(120), supervisor.snapshot()
        apply(url, [[f"INSERT INTO {name} (id, customer, qty) VALUES (50001, 'a', 1)",
                     f"UPDATE {name} SET qty = 77 WHERE id = 1",
                     f"DELETE FROM {name} WHERE id = 2"]])
        assert caught_up.wait(120), supervisor.snapshot()
        state = next(s for s in supervisor.snapshot() if s.table == "vsync")
        assert state.up and state.counters["rows"] >= want
    finally:
        supervisor.stop()
    assert current_state(db, "vsync", ["id", "customer", "qty"]) == source_rows(url, name)


@pytest.mark.services
def test_cli_once_exits_zero_with_a_summary(tmp_path, source):
    url, name = source
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE csync WITH (sync_source='{url}', sync_table='public.{name}')")
    db.close()
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src"),
           "SHOAL_ALLOWED_HOSTS": "127.0.0.1"}
    p = subprocess.run([sys.executable, "-m", "shoal", "pipeline", "sync", "--table", "csync",
                        "--once", "--data-dir", str(tmp_path / "data")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("csync: 10000 snapshot rows, 0 changes, 10000 rows in 1 "
                                "commits")
    bad = subprocess.run([sys.executable, "-m", "shoal", "pipeline", "sync", "--table", "nope",
                          "--once", "--data-dir", str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 1 and "nope" in bad.stderr


def test_a_type_change_at_the_source_rejects_what_the_table_cannot_hold(tmp_path, source):
    url, name = source
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE rsync WITH (sync_source='{url}', sync_table='public.{name}')")
    pipeline = SyncPipeline(db, resolve_sync_binding(db, "rsync"))
    pipeline.run(once=True)
    apply(url, [[f"UPDATE {name} SET qty = 41 WHERE id = 1"],
                [f"ALTER TABLE {name} ALTER COLUMN qty TYPE text"],
                [f"UPDATE {name} SET qty = '42' WHERE id = 2",
                 f"UPDATE {name} SET qty = 'lots' WHERE id = 3"]])
    p = pipeline.run(once=True)
    pipeline.close()
    assert p.rejects == 1
    assert change_log(db, "rsync") == [("update", 1, "c1", 41), ("update", 2, "c2", 42)]
    rej = db.sql("SELECT error, field, source FROM rsync__rejects").table.to_pylist()
    assert rej == [{"error": "column \"qty\": 'lots' cannot be stored as int", "field": "qty",
                    "source": "sync"}]


def test_a_table_created_again_takes_a_new_snapshot(tmp_path, source):
    url, name = source
    db = open_db(tmp_path)
    create = (f"CREATE TABLE again WITH (sync_source='{url}', sync_table='public.{name}')")
    db.sql(create)
    first = SyncPipeline(db, resolve_sync_binding(db, "again"))
    assert first.run(once=True).snapshot_rows == 10_000
    first.close()
    db.sql("DROP TABLE again")
    db.sql(create)
    second = SyncPipeline(db, resolve_sync_binding(db, "again"))
    assert second.run(once=True).snapshot_rows == 10_000
    second.close()
    assert db.sql("SELECT count(*) AS n FROM again").table.to_pylist() == [{"n": 10_000}]


@pytest.mark.spark
def test_the_snapshot_runs_as_spark_tasks(tmp_path, source, spark, monkeypatch):
    from shoal.frontends.sync import postgres

    monkeypatch.setattr(postgres, "PARALLEL_MIN_ROWS", 0)   # driver side: plan 3 key ranges
    url, name = source
    db = open_db(tmp_path)
    db.sql(f"CREATE TABLE ksp WITH (sync_source='{url}', sync_table='public.{name}', "
           "sync_snapshot_parallel='3')")
    stages: list[tuple[str, dict]] = []
    pipeline = SyncPipeline(db, resolve_sync_binding(db, "ksp"), spark=spark,
                            on_stage=lambda n, **k: stages.append((n, k)))
    apply(url, [[f"DELETE FROM {name} WHERE id = 5"]])
    p = pipeline.run(once=True)
    apply(url, [[f"UPDATE {name} SET qty = 1234 WHERE id = 6"]])
    pipeline.run(once=True)
    pipeline.close()
    assert p.snapshot_rows == 9_999
    assert ("snapshot_extent", {"rows": 9_999, "tasks": 3}) in stages
    assert len(db.catalog.manifests("ksp")) == 4      # three tasks' extents, one change batch
    assert current_state(db, "ksp", ["id", "customer", "qty"]) == source_rows(url, name)
