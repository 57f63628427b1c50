"""Fixtures shared by the whole suite: catalogs (SQLite and the real Postgres), stores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import fresh_schema, require_postgres
from tests.support.clock import ManualClock

pytest_plugins = ["tests.support.tiers", "tests.support.fixtures", "tests.support.sources"]


@pytest.fixture(scope="session")
def pg_server() -> str:
    return require_postgres()


@pytest.fixture
def pg_catalog_url(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


@pytest.fixture
def sqlite_catalog_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request) -> str:
    """The catalog contract runs unchanged over SQLite and Postgres."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_catalog_url")
    return request.getfixturevalue("pg_catalog_url")


@pytest.fixture
def catalog(catalog_url):
    from shoal.catalog import open_catalog

    cat = open_catalog(catalog_url)
    yield cat
    cat.close()


@pytest.fixture
def clock() -> ManualClock:
    """A clock the test advances (see `tests.support.clock`)."""
    return ManualClock()


@pytest.fixture
def clocked_catalog(catalog_url, clock):
    """The `catalog` fixture's catalog, reading the time from the test's `clock`."""
    from shoal.catalog import open_catalog

    cat = open_catalog(catalog_url, clock=clock)
    yield cat
    cat.close()


@pytest.fixture
def local_store_url(tmp_path) -> str:
    return (tmp_path / "objects").as_uri()
