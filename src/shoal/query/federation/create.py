"""`CREATE FOREIGN TABLE`: a catalog table that holds no extents and reads its source.

The properties are checked first (`parse_source`: scheme, database, `source_table`,
`password_env`), then the host against the allowed hosts — before anything connects — and
only then is the source asked for its columns. Without a column list the table takes every
column whose name is identifier-safe once lower-cased (others are left out, with a log
line), typed by `shoal.query.federation.source`; with a list, each named column must exist
at the source and its type is the one given (the read casts to it). The table is created
with the ordinary `create_table`, so it shows in SHOW TABLES, DESCRIBE and the catalog
like any other, and DROP TABLE drops it; the source is never touched by either.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from shoal.errors import InvalidPropertyError, ReadOnlyTableError, TableNotFoundError
from shoal.locations import LocationPolicy
from shoal.query.database import Database
from shoal.query.federation.readers import source_columns
from shoal.query.federation.source import FOREIGN_PROPERTIES, is_foreign, parse_source
from shoal.types import Column, is_identifier_safe

log = logging.getLogger("shoal.query.federation")


def create_foreign_table(db: Database, name: str, columns: Sequence[Column],
                         properties: dict[str, Any]) -> None:
    if not is_foreign(properties):
        raise InvalidPropertyError("CREATE FOREIGN TABLE needs WITH (source = '<url>', "
                                   "source_table = 'schema.table')")
    others = sorted(k for k in properties if k not in FOREIGN_PROPERTIES)
    if others:
        raise InvalidPropertyError(f"foreign table property {others[0]!r} is not one of "
                                   f"{', '.join(FOREIGN_PROPERTIES)}")
    source = parse_source(properties, table=name)
    LocationPolicy.from_config(db.config).check_properties(properties)
    found = source_columns(source, timeout_s=db.config.query_timeout_s)
    by_name = {c.name.lower(): c for c in found}
    if columns:
        for col in columns:
            if col.name not in by_name:
                raise InvalidPropertyError(f"column {col.name} is not a column of "
                                           f"{source.qualified} at {source.masked}")
        chosen = list(columns)
    else:
        chosen = []
        for c in found:
            if is_identifier_safe(c.name.lower()):
                chosen.append(Column(c.name.lower(), c.family.type))
            else:
                log.warning("foreign table %s leaves out column %r of %s: not a name shoal "
                            "columns can have", name, c.name, source.qualified)
    db.create_table(name, chosen, properties=properties)


def refuse_write(db: Database, name: str, what: str) -> None:
    """Raise `ReadOnlyTableError` when `name` is a foreign table."""
    try:
        info = db.catalog.load_table(name)
    except TableNotFoundError:
        return                      # the statement's own check reports it
    if is_foreign(info.properties):
        raise ReadOnlyTableError(name, what)


def refuse_schema_change(db: Database, name: str) -> None:
    refuse_write(db, name, "altered (its columns follow the source; drop and create it "
                           "again)")


def check_property_change(db: Database, name: str, changes: dict[str, Any]) -> None:
    """`source` is what makes a table foreign: it cannot be set on a shoal table (whose
    extents would vanish behind the source) nor unset on a foreign table."""
    if "source" not in changes:
        return
    info = db.catalog.load_table(name)
    if not is_foreign(info.properties):
        raise InvalidPropertyError(f"source: table {name} holds its own rows; a table that "
                                   "reads another database is made by CREATE FOREIGN TABLE")
    if not str(changes["source"] or "").strip():
        raise InvalidPropertyError(f"source: foreign table {name} cannot lose its source "
                                   "(DROP TABLE removes it)")


def check_create(properties: dict[str, Any]) -> None:
    """A plain CREATE TABLE does not take `source` (CREATE FOREIGN TABLE does)."""
    if "source" in properties:
        raise InvalidPropertyError("source: a table that reads another database is made by "
                                   "CREATE FOREIGN TABLE")
