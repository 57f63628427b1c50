"""The registry of query languages: a language's name and the frontend module that speaks it.

KQL and PromQL are front ends (`shoal.frontends.kusto.kql`,
`shoal.frontends.prometheus.promql`) that translate into the query lane, yet the client
(`Shoal.kql`, `Shoal.promql`) and the query engine (`QueryEngine.execute_kql`) below them
run those languages too. The root
package `shoal` registers the languages it ships, by name, so this layer never imports a
frontend and `import shoal` imports none either; a language's module is imported on its
first query.

What a language's module offers is its own:
- "kql": `kql_to_sql(text, tables, *, now_ns_utc=None)`, a `Translation` whose SQL the
  engine runs as any SQL statement;
- "promql": `promql_for(engine, config, *, lookback_ms, max_samples)`, an evaluator of
  instant and range queries over the engine's tables.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from shoal.errors import ConfigError

_MODULES: dict[str, str] = {}


def register(name: str, module: str) -> None:
    """Register `module` as the one that speaks the query language `name`."""
    _MODULES[name] = module


def registered() -> dict[str, str]:
    """The language -> module map (a copy)."""
    return dict(_MODULES)


def language(name: str) -> ModuleType:
    """The module of the query language `name`, imported now if it was not yet."""
    module = _MODULES.get(name)
    if module is None:
        raise ConfigError(f"no query language {name!r} is registered "
                          f"(registered: {', '.join(sorted(_MODULES)) or 'none'})")
    return import_module(module)
