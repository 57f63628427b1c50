"""A file-drop source bound to a table in its properties (docs/filedrop.md), like a Kafka binding.

    CREATE TABLE events (n long)
      WITH (filedrop_path = 's3://bucket/incoming/events', filedrop_interval = 5,
            filedrop_mode = 'drop')

`resolve_binding(catalog, table, path=..., interval_s=..., mode=...)` returns the
`FileDropBinding` to run: each argument given (a command-line flag) wins, else the table's
property `filedrop_path` (a directory, `file:///abs/dir` or `s3://bucket/prefix`; a relative
directory is relative to the process's working directory), `filedrop_interval` (seconds
between scans, default 10) and `filedrop_mode` (`evolve`, `drop` or `reject`; default: the
table's own mode, decided at each scan). No path from either side is an
`InvalidPropertyError` naming both ways to give one; so are a non-positive interval and an
unknown mode. The path is parsed (`DropSource.parse`) here, so a missing directory fails
before any Spark work.

`table_exists=False` (for `--create`, the table does not exist yet) resolves from the
arguments alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from shoal.errors import InvalidPropertyError
from shoal.locations import LocationPolicy
from shoal.frontends.filedrop.source import DropSource
from shoal.types.schema import SchemaMode

if TYPE_CHECKING:
    from shoal.catalog.base import Catalog

MODES: tuple[SchemaMode, ...] = ("evolve", "drop", "reject")
DEFAULT_INTERVAL_S = 10.0
PATH_PROPERTY = "filedrop_path"


@dataclass(frozen=True)
class FileDropBinding:
    table: str
    source: DropSource
    interval_s: float = DEFAULT_INTERVAL_S
    mode: SchemaMode | None = None      # None: the table's mode at each scan


def is_bound(properties: Mapping[str, Any]) -> bool:
    """True when a table's properties bind a file-drop path."""
    return bool(str(properties.get(PATH_PROPERTY) or "").strip())


def resolve_binding(catalog: Catalog | None, table: str, *, path: str | None = None,
                    interval_s: float | None = None, mode: str | None = None,
                    s3_endpoint: str | None = None, table_exists: bool = True,
                    locations: LocationPolicy | None = None) -> FileDropBinding:
    """Arguments first, then the table's `filedrop_*` properties, then the defaults.

    A path taken from the table's properties must be allowed by `locations` (when given);
    `path` is the operator's own."""
    props: dict[str, Any] = {}
    if table_exists and catalog is not None:
        props = dict(catalog.load_table(table).properties)
    chosen_path = (path or "").strip() or str(props.get(PATH_PROPERTY) or "").strip()
    if not (path or "").strip() and chosen_path and locations is not None:
        locations.check_path(chosen_path, what=PATH_PROPERTY)
    if not chosen_path:
        raise InvalidPropertyError(
            f'no file-drop path for table "{table}": pass --path or bind one '
            "with CREATE TABLE ... WITH (filedrop_path='...')")
    interval: Any = interval_s if interval_s is not None else props.get("filedrop_interval")
    if interval is None or (isinstance(interval, str) and not interval.strip()):
        interval = DEFAULT_INTERVAL_S
    try:
        seconds = float(interval)
    except (TypeError, ValueError):
        raise InvalidPropertyError(f'file-drop interval of table "{table}": expected seconds, '
                          f"got {interval!r}") from None
    if not seconds > 0:
        raise InvalidPropertyError(f'file-drop interval of table "{table}" must be positive, '
                          f"got {interval!r}")
    chosen_mode = mode or str(props.get("filedrop_mode") or "").strip() or None
    if chosen_mode is not None and chosen_mode not in MODES:
        raise InvalidPropertyError(f"file-drop mode must be one of {', '.join(MODES)}, "
                          f"got {chosen_mode!r}")
    return FileDropBinding(table=table,
                           source=DropSource.parse(chosen_path, s3_endpoint=s3_endpoint),
                           interval_s=seconds, mode=cast("SchemaMode | None", chosen_mode))
