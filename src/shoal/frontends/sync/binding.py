"""A table bound to a source table it mirrors as a change log.

    CREATE TABLE orders_sync WITH (
        sync_source = 'postgresql://user@db.internal:5432/shop',
        sync_table = 'public.orders', sync_mode = 'cdc')            -- or 'poll'
    CREATE TABLE orders_poll WITH (sync_source = '...', sync_table = 'public.orders',
        sync_mode = 'poll', sync_cursor = 'updated_at')

`sync_source` binds the table: a URL whose scheme names the database (`postgresql://`; other
databases register their scheme in `SOURCES`). Its host must be allowed
(`SHOAL_ALLOWED_HOSTS`); that is checked before anything connects to it. A password is best
left out of the URL: `sync_password_env` names an environment variable holding it (libpq's
own `PGPASSWORD` works too). `sync_mode` is `cdc` (the default) or `poll`; `poll` needs
`sync_cursor`, a column of the source that grows with every insert and update. Optional:
`sync_slot` (the replication slot and publication name, default `shoal_<table>`),
`sync_batch` (row changes per commit, default 10000), `sync_poll_interval` (seconds between
polls when idle, default 1), `sync_snapshot_parallel` (connections reading the initial
snapshot by ranges of an integer primary key, default 4).

Created without columns, the table gets the source's columns (the type mapping is in
docs/connectors.md) followed by `_op` and `_source_position` (both `string`); `_timestamp`
is the source's commit time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from shoal.errors import InvalidPropertyError, InvalidSchemaError, UnavailableError
from shoal.secrets import mask_url
from shoal.types.columns import STRING
from shoal.types.schema import DEFAULT_COLUMNS, Column

if TYPE_CHECKING:
    from shoal.frontends.sync.source import SyncSource
    from shoal.locations import LocationPolicy

SOURCE_PROPERTY = "sync_source"
PROPERTIES = ("sync_source", "sync_table", "sync_mode", "sync_cursor", "sync_password_env",
              "sync_slot", "sync_batch", "sync_poll_interval", "sync_snapshot_parallel")
MODES = ("cdc", "poll")
SOURCES: dict[str, str] = {     # URL scheme -> module with open_source(binding, ...)
    "postgresql": "shoal.frontends.sync.postgres",
    "postgres": "shoal.frontends.sync.postgres",
}
DEFAULT_BATCH = 10_000
DEFAULT_PARALLEL = 4
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*\Z")
_SLOT = re.compile(r"^[a-z0-9_]{1,63}\Z")


class SyncSourceError(UnavailableError):
    """The source database could not be reached or refused what the sync needs."""

    code = "sync_source_error"


class SyncSetupError(InvalidPropertyError):
    """The source is reachable but not set up for the binding (wal_level, key, cursor)."""

    code = "sync_setup"


@dataclass(frozen=True)
class SyncBinding:
    table: str
    source: str                 # the URL as given (may hold a password: never print it)
    source_table: str           # schema.table
    mode: str = "cdc"
    cursor: str | None = None
    password_env: str | None = None
    slot: str = ""
    batch: int = DEFAULT_BATCH
    poll_interval_s: float = 1.0
    snapshot_parallel: int = DEFAULT_PARALLEL

    @property
    def scheme(self) -> str:
        return urlsplit(self.source).scheme.lower()

    @property
    def redacted(self) -> str:
        return redact(self.source)

    def password(self) -> str | None:
        """The password from `sync_password_env`, when set (None: the URL's or libpq's)."""
        if not self.password_env:
            return None
        value = os.environ.get(self.password_env)
        if value is None:
            raise SyncSourceError(f'table "{self.table}": sync_password_env names '
                                  f"{self.password_env}, which is not set")
        return value


def redact(url: str) -> str:
    """`url` with its password replaced by `***` (what errors, logs and answers show)."""
    return mask_url(url)


def is_bound(properties: Mapping[str, Any]) -> bool:
    return bool(str(properties.get(SOURCE_PROPERTY) or "").strip())


def parse_binding(table: str, properties: Mapping[str, Any]) -> SyncBinding:
    """The binding of `table`'s properties; `InvalidPropertyError` naming the property."""
    source = str(properties.get(SOURCE_PROPERTY) or "").strip()
    parts = urlsplit(source)
    if parts.scheme.lower() not in SOURCES:
        raise InvalidPropertyError(
            f"sync_source: scheme {parts.scheme or '(none)'!r} of {redact(source)!r} is not "
            f"one of {', '.join(sorted(SOURCES))}")
    if not parts.hostname:
        raise InvalidPropertyError(f"sync_source: {redact(source)!r} names no host")
    name = str(properties.get("sync_table") or "").strip()
    pieces = name.split(".")
    if not name or len(pieces) > 2 or not all(_IDENT.match(p) for p in pieces):
        raise InvalidPropertyError(
            f"sync_table: expected schema.table (letters, digits, _), got {name!r}")
    if len(pieces) == 1:
        name = f"public.{name}"
    mode = str(properties.get("sync_mode") or "cdc").strip().lower()
    if mode not in MODES:
        raise InvalidPropertyError(f"sync_mode: expected 'cdc' or 'poll', got {mode!r}")
    cursor = str(properties.get("sync_cursor") or "").strip() or None
    if mode == "poll" and cursor is None:
        raise InvalidPropertyError("sync_cursor: sync_mode 'poll' needs a cursor column (one "
                                   "that grows with every insert and update)")
    if cursor is not None and not _IDENT.match(cursor):
        raise InvalidPropertyError(f"sync_cursor: not a column name: {cursor!r}")
    env = str(properties.get("sync_password_env") or "").strip() or None
    slot = str(properties.get("sync_slot") or "").strip() or default_slot(table)
    if not _SLOT.match(slot):
        raise InvalidPropertyError(
            f"sync_slot: {slot!r} is not a slot name (a-z, 0-9, _; at most 63)")
    batch = _positive(properties.get("sync_batch"), DEFAULT_BATCH, "sync_batch", int)
    interval = _positive(properties.get("sync_poll_interval"), 1.0, "sync_poll_interval",
                         float)
    parallel = _positive(properties.get("sync_snapshot_parallel"), DEFAULT_PARALLEL,
                         "sync_snapshot_parallel", int)
    return SyncBinding(table, source, name, mode, cursor, env, slot, int(batch),
                       float(interval), int(parallel))


def default_slot(table: str) -> str:
    return ("shoal_" + re.sub(r"[^a-z0-9_]", "_", table.lower()))[:63]


def _positive(value: Any, default: float, what: str, kind: type) -> float:
    if value is None or str(value).strip() == "":
        return default
    try:
        out = kind(str(value).strip())
    except ValueError:
        raise InvalidPropertyError(f"{what}: expected a positive number, got {value!r}") from None
    if not out > 0:
        raise InvalidPropertyError(f"{what}: expected a positive number, got {value!r}")
    return out


def check_hosts(binding: SyncBinding, locations: LocationPolicy) -> None:
    parts = urlsplit(binding.source)
    host = parts.hostname or ""
    entry = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        entry = f"{entry}:{parts.port}"
    locations.check_hosts(entry, what=SOURCE_PROPERTY)


def open_source(binding: SyncBinding) -> SyncSource:
    """The `SyncSource` of the binding's database."""
    module = import_module(SOURCES[binding.scheme])
    source: SyncSource = module.open_source(binding)
    return source


def check_binding(table: str, properties: Mapping[str, Any],
                  columns: Sequence[Column]) -> list[Column]:
    """Form only (no connection): `check_binding_at` does the rest when hosts are known."""
    parse_binding(table, properties)
    return list(columns)


def check_binding_at(table: str, properties: Mapping[str, Any], columns: Sequence[Column],
                     locations: LocationPolicy) -> list[Column]:
    """Check the binding (form, allowed host, then the source itself: reachable, set up for
    the mode) and return the table's columns: the given ones, or the source's, plus
    `_op` and `_source_position`."""
    binding = parse_binding(table, properties)
    check_hosts(binding, locations)
    source = open_source(binding)
    try:
        source_cols = source.columns()
        source.check_setup()
    finally:
        source.close()
    return table_columns(table, columns or source_cols)


def table_columns(table: str, columns: Sequence[Column]) -> list[Column]:
    out = [c for c in columns if c not in DEFAULT_COLUMNS]
    for name in ("_op", "_source_position"):
        have = next((c for c in out if c.name == name), None)
        if have is None:
            out.append(Column(name, STRING))
        elif have.type != STRING:
            raise InvalidSchemaError(f'table "{table}": sync column "{name}" must be string, '
                                     f"got {have.type}", column=name)
    return out


__all__ = ["PROPERTIES", "SOURCES", "SyncBinding", "SyncSetupError",
           "SyncSourceError", "check_binding", "check_binding_at", "is_bound", "open_source",
           "parse_binding", "redact"]
