"""The registry of table bindings: properties that bind a table to a source a frontend runs.

A frontend whose tables are bound through their properties (scrape targets, ...) registers
the property that binds and the module that checks such a binding. `Shoal.create_table`
asks `check_bound` before it creates a table, so a typo in a binding fails there and not in
every later pipeline run. The root package `shoal` registers the frontends it ships, by
name, so this layer never imports a frontend and `import shoal` imports none either; a
checker module is imported only when a table names its property.

A checker module has `check_binding(table, properties, columns) -> columns`: it raises a
`ShoalError` when the binding is malformed and returns the table's columns (a binding may
impose a layout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # `import shoal` registers here: nothing heavy is imported
    from shoal.locations import LocationPolicy
    from shoal.types import Column

_CHECKERS: dict[str, str] = {}


def register(prop: str, module: str) -> None:
    """Register `module` as the checker of tables whose properties set `prop`."""
    _CHECKERS[prop] = module


def registered() -> dict[str, str]:
    """The binding property -> checker module map (a copy)."""
    return dict(_CHECKERS)


def check_bound(table: str, properties: Mapping[str, Any],
                columns: Sequence[Column], *,
                locations: LocationPolicy | None = None) -> list[Column]:
    """The columns of `table` once every binding its properties name has been checked.

    A checker that must reach its source to know the columns (a database to sync) has
    `check_binding_at(table, properties, columns, locations)` too: with `locations` given,
    that one is called, so the source's host is checked before anything connects to it."""
    out = list(columns)
    for prop, module in list(_CHECKERS.items()):
        if str(properties.get(prop) or "").strip():
            checker = import_module(module)
            if locations is not None and hasattr(checker, "check_binding_at"):
                out = checker.check_binding_at(table, properties, out, locations)
            else:
                out = checker.check_binding(table, properties, out)
    return out
