"""The real PostgreSQL server the tests run against (127.0.0.1:5432 by default).

`SHOAL_TEST_PG_URL` overrides the server. When it cannot be reached, Postgres-backed tests
skip on a developer machine and FAIL under `CI=true`: CI must never pass without them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

PG_URL = os.environ.get("SHOAL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _sa_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def require_postgres() -> str:
    from tests.support.tiers import guard   # here: conftest imports this module first

    guard("PostgreSQL", "postgres")
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(_sa_url(PG_URL), connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as e:  # noqa: BLE001 - any failure means "no server"
        msg = f"PostgreSQL not reachable at {PG_URL}: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: Postgres-backed tests must run)")
        pytest.skip(msg)
    return PG_URL


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A catalog URL whose search_path is a new, empty schema; dropped afterwards."""
    import sqlalchemy as sa

    schema = "t_" + uuid.uuid4().hex[:16]
    engine = sa.create_engine(_sa_url(url))
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()
