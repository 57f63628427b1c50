"""Servers for the HTTP tests: real uvicorn on 127.0.0.1, real sockets, httpx clients.

`open_server` (module): auth off, ingest bodies capped at `BODY_CAP`. `auth_server`
(module): tokens `ADMIN`, `INGEST`, `QUERY`. Tests share a server per module and keep out of
each other's way by using their own table names (`table_name` fixture).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import shoal
from shoal.client import Shoal
from shoal.server import create_app
from tests.support.server import serve_app

BODY_CAP = 256 << 10
ADMIN, INGEST, QUERY = "admin-secret-1", "ingest-secret-2", "query-secret-3"


@dataclass
class Live:
    url: str
    db: Shoal

    def client(self, token: str | None = None, *, headers: dict[str, str] | None = None,
               timeout: float = 30, **kw) -> httpx.Client:
        h = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers={**h, **(headers or {})},
                            timeout=timeout, **kw)


def _live(tmp_path_factory, name: str, *, max_body_bytes: int = BODY_CAP,
          coercion_pool: Any = None, **config) -> Iterator[Live]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp(name)), **config)
    app = create_app(db, config=db.config, max_body_bytes=max_body_bytes,
                     coercion_pool=coercion_pool)
    try:
        with serve_app(app) as url:
            yield Live(url, db)
    finally:
        db.close()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory) -> Iterator[Live]:
    yield from _live(tmp_path_factory, "open")


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory) -> Iterator[Live]:
    yield from _live(tmp_path_factory, "auth",
                     tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")


@pytest.fixture
def http(open_server: Live) -> Iterator[httpx.Client]:
    with open_server.client() as c:
        yield c


@pytest.fixture
def table_name() -> str:
    return "t_" + uuid.uuid4().hex[:10]


def create(client: httpx.Client, name: str, columns: list[dict], **extra) -> httpx.Response:
    r = client.post("/v1/tables", json={"name": name, "columns": columns, **extra})
    assert r.status_code == 201, r.text
    return r
