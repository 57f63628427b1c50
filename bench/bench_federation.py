"""Reading a foreign table: which driver, and what shoal adds on top of it.

    .venv/bin/python bench/bench_federation.py [--rows 1000000] [--repeat 3]

Creates a table of `--rows` rows (int, int, text, numeric, timestamp) in a fresh schema of
the Postgres at `SHOAL_BENCH_PG_URL` (default `postgresql://postgres@127.0.0.1:5432/test`)
and a fresh database of the MariaDB at `SHOAL_BENCH_MARIADB_URL` (default
`mysql://root@127.0.0.1:3306`), drops both afterwards, and reports rows/s (median of
`--repeat`, the readers interleaved so each repetition meets the same load):

- Postgres: ADBC (`adbc-driver-postgresql`) and connectorx reading the same SELECT into
  Arrow — the measurement that picked ADBC — then shoal's `SELECT * FROM <foreign table>` on
  the embedded engine (the driver plus planning, type shaping and the engine's pass);
- MariaDB: connectorx and PyMySQL (a row loop in Python, for scale), then shoal's read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import adbc_driver_postgresql.dbapi as adbc  # noqa: E402
import connectorx as cx  # noqa: E402
import psycopg  # noqa: E402
import pymysql  # noqa: E402

import shoal  # noqa: E402

PG_URL = os.environ.get("SHOAL_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
MARIADB_URL = os.environ.get("SHOAL_BENCH_MARIADB_URL", "mysql://root@127.0.0.1:3306")


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    t = time.perf_counter()
    n = fn()
    return time.perf_counter() - t, n


def report(name: str, runs: list[tuple[float, int]]) -> None:
    secs = statistics.median(s for s, _ in runs)
    rows = runs[0][1]
    print(f"  {name:<28} {rows / secs:>12,.0f} rows/s   ({secs:.3f} s for {rows:,} rows)")


def bench_pg(rows: int, repeat: int, db: shoal.Shoal) -> None:
    schema = "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")   # type: ignore[arg-type]
        conn.execute(  # type: ignore[arg-type]
            f"CREATE TABLE {schema}.orders AS SELECT g AS id, g % 1000 AS customer_id, "
            "'status-' || (g % 7) AS status, (g * 1.25)::numeric(12,2) AS amount, "
            "timestamptz '2024-01-01' + g * interval '1 second' AS placed "
            f"FROM generate_series(1, {rows}) g")
    try:
        sql = (f"SELECT id, customer_id, status, amount::float8 AS amount, placed "
               f"FROM {schema}.orders")

        def with_adbc() -> int:
            with adbc.connect(PG_URL) as conn, conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetch_arrow_table().num_rows

        def with_connectorx() -> int:
            return cx.read_sql(PG_URL, sql, return_type="arrow").num_rows

        db.sql(f"CREATE FOREIGN TABLE pg_orders WITH (source='{PG_URL}', "
               f"source_table='{schema}.orders')")

        def with_shoal() -> int:
            return db.sql("SELECT * FROM pg_orders", engine="local").table.num_rows

        runs: dict[str, list[tuple[float, int]]] = {"adbc": [], "connectorx": [], "shoal": []}
        for _ in range(repeat):
            runs["adbc"].append(timed(with_adbc))
            runs["connectorx"].append(timed(with_connectorx))
            runs["shoal"].append(timed(with_shoal))
        print(f"Postgres, {rows:,} rows (int, int, text, numeric, timestamptz)")
        report("ADBC -> Arrow", runs["adbc"])
        report("connectorx -> Arrow", runs["connectorx"])
        report("shoal SELECT * (embedded)", runs["shoal"])
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")   # type: ignore[arg-type]


def bench_mariadb(rows: int, repeat: int, db: shoal.Shoal) -> None:
    u = urlparse(MARIADB_URL)
    database = "bench_" + uuid.uuid4().hex[:10]
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        cur.execute(f"CREATE TABLE {database}.orders (id INT PRIMARY KEY, customer_id INT, "
                    "status VARCHAR(20), amount DECIMAL(12,2), placed DATETIME(6))")
        cur.execute("SET SESSION max_recursive_iterations = 100000000")
        for lo in range(0, rows, 100_000):
            hi = min(rows, lo + 100_000)
            cur.execute(f"INSERT INTO {database}.orders WITH RECURSIVE g(n) AS "
                        f"(SELECT {lo + 1} UNION ALL SELECT n + 1 FROM g WHERE n < {hi}) "
                        "SELECT n, n % 1000, CONCAT('status-', n % 7), n * 1.25, "
                        "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL n SECOND FROM g")
    url = f"{MARIADB_URL.rstrip('/')}/{database}"
    try:
        sql = "SELECT id, customer_id, status, CAST(amount AS DOUBLE) AS amount, placed FROM orders"

        def with_connectorx() -> int:
            return cx.read_sql(url, sql, return_type="arrow").num_rows

        def with_pymysql() -> int:
            c = pymysql.connect(host=u.hostname, port=u.port or 3306,
                                user=u.username or "root", password=u.password or "",
                                database=database)
            try:
                with c.cursor() as cur:
                    cur.execute(sql)
                    return len(cur.fetchall())
            finally:
                c.close()

        db.sql(f"CREATE FOREIGN TABLE my_orders WITH (source='{url}', source_table='orders')")

        def with_shoal() -> int:
            return db.sql("SELECT * FROM my_orders", engine="local").table.num_rows

        runs: dict[str, list[tuple[float, int]]] = {"cx": [], "pymysql": [], "shoal": []}
        for _ in range(repeat):
            runs["cx"].append(timed(with_connectorx))
            runs["pymysql"].append(timed(with_pymysql))
            runs["shoal"].append(timed(with_shoal))
        print(f"MariaDB, {rows:,} rows (int, int, varchar, decimal, datetime)")
        report("connectorx -> Arrow", runs["cx"])
        report("PyMySQL rows (Python loop)", runs["pymysql"])
        report("shoal SELECT * (embedded)", runs["shoal"])
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hosts = ",".join(sorted({urlparse(PG_URL).hostname or "", urlparse(MARIADB_URL).hostname
                             or ""}))
    with tempfile.TemporaryDirectory() as tmp:
        db = shoal.connect(data_dir=os.path.join(tmp, "data"), allowed_hosts=hosts,
                           query_max_rows=args.rows)
        try:
            print(f"load average {os.getloadavg()[0]:.2f}")
            bench_pg(args.rows, args.repeat, db)
            bench_mariadb(args.rows, args.repeat, db)
        finally:
            db.close()


if __name__ == "__main__":
    main()
