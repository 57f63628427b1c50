"""shoal: a telemetry and event lakehouse (see docs/architecture.md).

`shoal.connect()` opens the embedded client (with `url=...`, a client of a running server);
the column types and `Column` are re-exported so that table definitions read naturally.
Every other name here is imported on first use (PEP 562), so `import shoal` costs nothing:
`shoal --help` does not load pyarrow, and `import shoal.types` in a Spark worker does not
load the client (SQLAlchemy, stores).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from shoal.bindings import register as _register_binding
from shoal.languages import register as _register_language

# The table bindings of the shipped frontends (`shoal.bindings`): the property that binds a
# table, and the frontend module that checks it (imported only when a table sets it).
_register_binding("scrape_targets", "shoal.frontends.prometheus.binding")
_register_binding("sentry_url", "shoal.frontends.sentry.binding")
_register_binding("sync_source", "shoal.frontends.sync.binding")
# The query languages of the shipped frontends (`shoal.languages`), imported on first use.
_register_language("kql", "shoal.frontends.kusto.kql")
_register_language("promql", "shoal.frontends.prometheus.promql")

if TYPE_CHECKING:
    from shoal.client import Shoal
    from shoal.remote import RemoteShoal
    from shoal.config import Config, load_config
    from shoal.errors import ShoalError
    from shoal.types import (BOOL, BYTES, DYNAMIC, HEADERS, INT, LONG, REAL, STRING,
                             TIMESTAMP, Column, Schema, vector)

__all__ = ["BOOL", "BYTES", "DYNAMIC", "HEADERS", "INT", "LONG", "REAL", "STRING", "TIMESTAMP",
           "Column", "Config", "Schema", "Shoal", "ShoalError", "connect", "load_config",
           "vector"]

_HOME = {"Shoal": "shoal.client", "Config": "shoal.config",
         "load_config": "shoal.config", "ShoalError": "shoal.errors",
         **{name: "shoal.types" for name in ("BOOL", "BYTES", "DYNAMIC", "HEADERS", "INT",
                                             "LONG", "REAL", "STRING", "TIMESTAMP", "Column",
                                             "Schema", "vector")}}


def connect(config: Config | None = None, *, url: str | None = None,
            token: str | None = None, **settings: Any) -> Shoal | RemoteShoal:
    """The embedded client (`shoal.client.connect`), or with `url` a client of the server
    there (`shoal.remote`; imports neither the catalog nor pyarrow until an answer needs
    it)."""
    if url is not None:
        if config is not None:
            raise ValueError("connect takes a config or a url, not both")
        from shoal.remote import connect_remote

        return connect_remote(url, token, **settings)
    from shoal.client import connect as connect_embedded

    return connect_embedded(config, **settings)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'shoal' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value   # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
