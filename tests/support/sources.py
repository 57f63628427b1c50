"""Source databases for the connector tests: a fresh schema in the shared PostgreSQL and a
fresh database in the shared MariaDB, each dropped afterwards.

`SHOAL_TEST_PG_URL` (see `tests.pg`) and `SHOAL_TEST_MARIADB_URL`
(`mysql://root@127.0.0.1:3306` by default) name the servers. A server that cannot be
reached skips its tests on a developer machine and fails them under `CI=true`. These are
the machine's shared servers (Postgres with `wal_level=replica`, MariaDB with the binlog
off): enough to read from, not to replicate from.

The `pg_source` / `mariadb_source` fixtures are registered for the whole suite (the root
conftest's `pytest_plugins`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pytest

MARIADB_URL = os.environ.get("SHOAL_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306")


def _unreachable(what: str, e: Exception) -> None:
    msg = f"{what} not reachable: {e}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg + " (CI=true: these tests must run)")
    pytest.skip(msg)


@dataclass
class PgSource:
    """A fresh schema of the shared Postgres. `url` is the server's database URL;
    `schema` the schema the test's tables live in."""

    url: str
    schema: str

    def run(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for sql in statements:
                conn.execute(sql)   # type: ignore[arg-type]

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(sql, params).fetchall())   # type: ignore[arg-type]


@dataclass
class MariaDbSource:
    """A fresh database of the shared MariaDB: `url` names it (`mysql://.../<database>`)."""

    url: str
    database: str

    def _connect(self):
        import pymysql

        u = urlparse(self.url)
        return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                               password=u.password or "", database=self.database,
                               autocommit=True)

    def run(self, *statements: str) -> None:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
        finally:
            conn.close()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())
        finally:
            conn.close()


@pytest.fixture
def pg_source(pg_server: str) -> Iterator[PgSource]:
    import psycopg

    schema = "src_" + uuid.uuid4().hex[:12]
    try:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")   # type: ignore[arg-type]
    except psycopg.OperationalError as e:
        _unreachable("PostgreSQL", e)
    try:
        yield PgSource(pg_server, schema)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")   # type: ignore[arg-type]


@pytest.fixture
def mariadb_source() -> Iterator[MariaDbSource]:
    import pymysql

    database = "src_" + uuid.uuid4().hex[:12]
    u = urlparse(MARIADB_URL)
    try:
        conn = pymysql.connect(host=u.hostname, port=u.port or 3306,
                               user=u.username or "root", password=u.password or "",
                               autocommit=True, connect_timeout=5)
    except pymysql.err.OperationalError as e:
        _unreachable("MariaDB", e)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {database}")
        yield MariaDbSource(f"{MARIADB_URL.rstrip('/')}/{database}", database)
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
        conn.close()
