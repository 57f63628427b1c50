"""A live shoal server for the OTLP tests: uvicorn (OTLP/HTTP) + OTLP/gRPC on free ports.

`otlp_server` is function-scoped (a fresh data directory per test, so the standard tables
start empty and a test sees only its own rows); starting one costs well under a second.
`make_otlp_server` builds one with other settings (tokens, Spark master).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import shoal
from shoal.client import Shoal
from shoal.errors import TableNotFoundError
from shoal.server import create_app
from tests.support.server import free_port, serve_app


@dataclass
class OtlpLive:
    url: str           # http://127.0.0.1:<port>
    grpc: str          # 127.0.0.1:<port>
    db: Shoal
    app: Any

    def rows(self, table: str) -> pa.Table:
        """Every row of `table` (read back through the catalog, no Spark)."""
        data, _ = self.db.read(table)
        return data

    def exists(self, table: str) -> bool:
        try:
            self.db.catalog.load_table(table)
        except TableNotFoundError:
            return False
        return True


@contextmanager
def otlp_live(data_dir: str, **config: Any) -> Iterator[OtlpLive]:
    db = shoal.connect(data_dir=data_dir, **config)
    port = free_port()
    app = create_app(db, config=db.config, otlp_grpc_port=port, sweep_ledger=False)
    try:
        with serve_app(app) as url:
            yield OtlpLive(url, f"127.0.0.1:{app.state.otlp_grpc.bound_port}", db, app)
    finally:
        db.close()


@pytest.fixture
def otlp_server(tmp_path) -> Iterator[OtlpLive]:
    with otlp_live(str(tmp_path / "data")) as live:
        yield live


@pytest.fixture
def make_otlp_server(tmp_path) -> Iterator[Callable[..., Any]]:
    """`with make_otlp_server(tokens=...) as live:` -- a server with other settings."""
    count = iter(range(1000))

    def make(**config: Any) -> Any:
        return otlp_live(str(tmp_path / f"data{next(count)}"), **config)

    yield make
