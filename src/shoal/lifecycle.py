"""Table lifecycle for the client: drop, undrop, rename, change any property (docs/sql.md).

- `drop_table`: the table leaves its name at once (a new CREATE of the name is a new table);
  its rows and files stay until its `snapshot_retention` has passed since the drop, then
  maintenance purges them. Its reject table (`<t>__rejects`) goes with it.
- `undrop_table`: the newest dropped table of the name comes back, within that retention;
  after it, or when no table of the name was dropped, `DroppedTableNotFoundError` (404);
  when a newer table holds the name, `TableNameReusedError` (409). Its reject table comes
  back with it when that name is free.
- `rename_table`: 409 when the new name is taken. A Kafka-bound table that consumes with
  the default group (`shoal-<name>`) keeps that group, so a rename does not re-read topics.
  Its reject table is renamed along.
- `set_properties`: any property, and `mode`; the merged properties are checked as
  CREATE checks them (binding form and layout, allowed locations, maintenance policy, sort
  key, block rows). A None value unsets.

Bound pipelines follow by themselves: the supervisor re-reads the catalog (at once when the
server pokes it after a statement, else on its next rescan), retires the runs of dropped or
renamed tables, starts the renamed ones and restarts those whose binding changed.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from shoal.catalog.base import TableInfo
from shoal.catalog.workspace import Workspace
from shoal.errors import (DroppedTableNotFoundError, InvalidSchemaError,
                          TableAlreadyExistsError, TableNameReusedError, TableNotFoundError)
from shoal.types.conventions import normalize as normalize_conventions
from shoal.types.schema import DEFAULT_COLUMNS, REJECTS_SUFFIX, SCHEMA_MODES
from shoal.types.sortkey import (BLOCK_ROWS, SORT_BY, format_sort_key, parse_block_rows,
                                 parse_sort_key)

log = logging.getLogger("shoal.tables")
KAFKA_TOPIC, KAFKA_GROUP = "kafka_topic", "kafka_group"


def drop_table(db: Workspace, name: str, *, if_exists: bool = False) -> bool:
    """Drop `name`; False when it does not exist and `if_exists` (else 404)."""
    try:
        dropped = db.catalog.drop_table(name)
    except TableNotFoundError:
        if if_exists:
            return False
        raise
    log.info("dropped table %s (id %d)", name, dropped.id)
    with contextlib.suppress(TableNotFoundError):
        db.catalog.drop_table(name + REJECTS_SUFFIX)
    return True


def undrop_table(db: Workspace, name: str, *, now: float | None = None) -> TableInfo:
    """Bring back the newest dropped table `name` (see the module docstring)."""
    import time

    from shoal.maintenance.retention import undrop_deadline

    now = time.time() if now is None else now
    candidates = db.catalog.dropped_tables(name)
    if not candidates:
        raise DroppedTableNotFoundError(
            name, "no dropped table of that name is kept (never dropped, or purged after its "
                  "snapshot_retention)")
    newest = candidates[0]
    if undrop_deadline(newest) <= now:
        raise DroppedTableNotFoundError(
            name, "it was dropped longer ago than its snapshot_retention "
                  f"({newest.properties.get('snapshot_retention', '1d')}) and waits to be "
                  "purged")
    try:
        db.catalog.load_table(name)
    except TableNotFoundError:
        pass
    else:
        raise TableNameReusedError(name)
    try:
        info = db.catalog.undrop_table(newest.id)
    except TableNotFoundError:
        raise DroppedTableNotFoundError(name, "maintenance purged it meanwhile") from None
    log.info("undropped table %s (id %d)", name, newest.id)
    for rejects in db.catalog.dropped_tables(name + REJECTS_SUFFIX)[:1]:
        if rejects.dropped_at >= newest.dropped_at:     # dropped along with it
            try:
                db.catalog.undrop_table(rejects.id)
            except TableNameReusedError:
                log.warning("reject table %s was not undropped: its name is taken",
                            name + REJECTS_SUFFIX)
    return info


def rename_table(db: Workspace, name: str, new_name: str) -> TableInfo:
    info = db.catalog.load_table(name)
    if (info.properties.get(KAFKA_TOPIC) and not info.properties.get(KAFKA_GROUP)
            and new_name != name):
        # Keep consuming as the same group: its offsets are the table's progress.
        db.catalog.set_properties(name, {KAFKA_GROUP: f"shoal-{name}"})
    renamed = db.catalog.rename_table(name, new_name)
    log.info("renamed table %s to %s", name, new_name)
    try:
        db.catalog.rename_table(name + REJECTS_SUFFIX, new_name + REJECTS_SUFFIX)
    except TableNotFoundError:
        pass
    except (InvalidSchemaError, TableAlreadyExistsError) as e:
        log.warning("reject table of %s keeps its name: %s", new_name, e)
    return renamed


def set_properties(db: Workspace, name: str, properties: dict[str, Any]) -> TableInfo:
    """Set (or with None, unset) properties and the mode, checked as at CREATE."""
    from shoal.bindings import check_bound
    from shoal.locations import LocationPolicy
    from shoal.maintenance.policy import TablePolicy

    info = db.catalog.load_table(name)
    changes = dict(properties)
    mode = (changes.pop("mode") or "evolve") if "mode" in changes else None  # UNSET: default
    if mode is not None and mode not in SCHEMA_MODES:
        raise InvalidSchemaError(f"unknown schema mode {mode!r} (expected one of "
                                 f"{', '.join(SCHEMA_MODES)})", column="mode")
    if changes.get(SORT_BY) is not None:
        changes[SORT_BY] = format_sort_key(
            parse_sort_key(changes[SORT_BY], info.schema, table=name))
    if changes.get(BLOCK_ROWS) is not None:
        changes[BLOCK_ROWS] = parse_block_rows(changes[BLOCK_ROWS])
    changes = normalize_conventions(changes)
    merged = {k: v for k, v in {**info.properties, **changes}.items() if v is not None}
    user_columns = [c for c in info.schema.columns if c not in DEFAULT_COLUMNS]
    check_bound(name, merged, user_columns)
    LocationPolicy.from_config(db.config).check_properties(
        {k: v for k, v in changes.items() if v is not None})
    TablePolicy.from_properties(merged)
    return db.catalog.set_properties(name, changes, mode=mode)  # type: ignore[arg-type]
