"""Kusto's discovery commands, the ones tools run to learn what a cluster holds before they
query it, answered in Kusto's v1 shape (docs/kql.md).

- `.show databases`: one row, the server's one database (`shoal`).
- `.show version`: shoal's version in Kusto's columns (BuildVersion, BuildTime, ServiceType,
  ProductVersion).
- `.show database X schema as json`: one row, column `DatabaseSchema`, holding the JSON
  document Kusto tools parse: `{"Databases": {X: {"Name", "Tables": {T: {"Name",
  "OrderedColumns": [{"Name", "Type", "CslType"}...]}}, "Functions": {}...}}}`. `X` must be
  the database's name (any case) or the command answers not found.
- `.show table T`: T's columns, one row each (AttributeName, AttributeType as .NET names it,
  CslType).
- `.show tables details`: `.show table T details` for every table, one row each.
- `.show functions`: no rows (shoal stores no functions).

All are read-only and need the `query` scope.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shoal.errors import DatabaseNotFoundError, TableNotFoundError
from shoal.frontends.kusto.table_commands import V1, table_details

# shoal type kind -> Kusto column type, and Kusto column type -> its .NET type name
KIND_TYPES = {"bool": "bool", "int": "int", "long": "long", "real": "real",
              "string": "string", "timestamp": "datetime", "dynamic": "dynamic",
              "bytes": "string", "vector": "dynamic", "headers": "dynamic"}
DOTNET = {"bool": "System.Boolean", "int": "System.Int32", "long": "System.Int64",
          "real": "System.Double", "string": "System.String", "datetime": "System.DateTime",
          "dynamic": "System.Object", "decimal": "System.Data.SqlTypes.SqlDecimal"}

_NAME = r"(\[?['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1\]?"
_DATABASES = re.compile(r"^\.show\s+databases\s*;?$", re.IGNORECASE)
_VERSION = re.compile(r"^\.show\s+version\s*;?$", re.IGNORECASE)
_DB_SCHEMA = re.compile(r"^\.show\s+database\s+" + _NAME + r"\s+schema\s+as\s+json\s*;?$",
                        re.IGNORECASE)
_TABLE = re.compile(r"^\.show\s+table\s+" + _NAME + r"\s*;?$", re.IGNORECASE)
_TABLES_DETAILS = re.compile(r"^\.show\s+tables\s+details\s*;?$", re.IGNORECASE)
_FUNCTIONS = re.compile(r"^\.show\s+functions\s*;?$", re.IGNORECASE)


def columns_of(info: Any) -> list[tuple[str, str]]:
    """(name, Kusto type) of each column of a table."""
    return [(c.name, KIND_TYPES.get(c.type.kind, "string")) for c in info.schema.columns]


def run_discovery_command(csl: str, db: Any, database: str) -> V1 | None:
    """The answer of `csl` if it is one of this module's commands, else None. `db` is the
    server's `shoal.client.Shoal`; blocking (the caller runs it in a worker thread)."""
    if _DATABASES.match(csl):
        return (["DatabaseName", "PersistentStorage", "Version", "IsCurrent",
                 "DatabaseAccessMode", "PrettyName", "DatabaseId"],
                ["string", "string", "string", "bool", "string", "string", "string"],
                [[database, "", "v1.0",
                  True, "ReadWrite", database, database]])
    if _VERSION.match(csl):
        version = _version()
        return (["BuildVersion", "BuildTime", "ServiceType", "ProductVersion"],
                ["string", "datetime", "string", "string"],
                [[version, None, "Engine", f"shoal {version}"]])
    if _FUNCTIONS.match(csl):
        return (["Name", "Parameters", "Body", "Folder", "DocString"], ["string"] * 5, [])
    m = _DB_SCHEMA.match(csl)
    if m is not None:
        if m.group(2).lower() != database.lower():
            raise DatabaseNotFoundError(m.group(2), database)
        return (["DatabaseSchema"], ["string"],
                [[json.dumps(database_schema(db.catalog.list_tables(), database))]])
    m = _TABLE.match(csl)
    if m is not None:
        name = m.group(2).lower()
        info = next((t for t in db.catalog.list_tables() if t.name == name), None)
        if info is None:
            raise TableNotFoundError(name)
        return (["AttributeName", "AttributeType", "CslType"], ["string"] * 3,
                [[n, DOTNET[t], t] for n, t in columns_of(info)])
    if _TABLES_DETAILS.match(csl):
        rows: list[list[Any]] = []
        names: list[str] = []
        types: list[str] = []
        for info in db.catalog.list_tables():
            names, types, row = table_details(info, db, database)
            rows.append(row)
        if not rows:
            names, types, _ = table_details(None, db, database)
        return names, types, rows
    return None


def database_schema(tables: list[Any], database: str) -> dict[str, Any]:
    """The document of `.show database X schema as json`."""
    return {"Databases": {database: {
        "Name": database, "Folder": "", "DocString": "", "MajorVersion": 1, "MinorVersion": 0,
        "Tables": {t.name: {"Name": t.name, "Folder": "", "DocString": "",
                            "OrderedColumns": [{"Name": n, "Type": DOTNET[k], "CslType": k,
                                                "DocString": ""}
                                               for n, k in columns_of(t)]}
                   for t in tables},
        "ExternalTables": {}, "MaterializedViews": {}, "Functions": {}}}}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shoal")
    except PackageNotFoundError:
        return "0.0.0"
