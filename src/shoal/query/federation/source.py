"""A foreign table's source: its URL, credentials and column types.

The properties of a foreign table:

- `source`: `postgresql://[user[:password]@]host[:port]/database` or
  `mysql://[user[:password]@]host[:port]/database` (MariaDB is `mysql://` too);
- `source_table`: `schema.table` (Postgres; `public` when no schema is given) or
  `database.table` / `table` (MySQL: the URL's database when none is given);
- `password_env` (optional): the name of an environment variable holding the password, read
  when shoal connects, so the password is stored nowhere.

Column types map to shoal's by family (the table in docs/connectors.md): integers up to 32
bits -> `int`, 64-bit (and unsigned 32-bit) -> `long`, floating and decimal -> `real`,
booleans -> `bool` (Postgres), dates and timestamps -> `timestamp` (UTC), binary -> `bytes`,
everything else (text, JSON, UUID, enums, arrays, ...) -> `string` as the source prints it.
`Family` keeps the source side: what SELECT expression yields that type and which
comparisons may be pushed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote, urlparse

from shoal.errors import InvalidPropertyError
from shoal.secrets import mask_url
from shoal.types import BOOL, BYTES, INT, LONG, REAL, STRING, TIMESTAMP, ColumnType

Dialect = Literal["postgres", "mysql"]
SCHEMES: dict[str, Dialect] = {"postgresql": "postgres", "postgres": "postgres",
                               "mysql": "mysql", "mariadb": "mysql"}
DEFAULT_PORTS: dict[Dialect, int] = {"postgres": 5432, "mysql": 3306}
FOREIGN_PROPERTIES = ("source", "source_table", "password_env")
_NAME_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def is_foreign(properties: dict[str, object]) -> bool:
    """Whether a table with these properties is a foreign table."""
    return bool(str(properties.get("source") or "").strip())


@dataclass(frozen=True)
class Source:
    """A parsed `source` (+ `source_table`, `password_env`)."""

    dialect: Dialect
    host: str
    port: int
    user: str | None
    password: str | None          # from the URL or the environment; never shown
    database: str
    schema: str                   # Postgres schema or MySQL database of the table
    table: str
    url_text: str                 # as written (may hold a password: show `masked` instead)

    @property
    def masked(self) -> str:
        return mask_url(self.url_text)

    @property
    def qualified(self) -> str:
        """`schema.table` as shown in messages."""
        return f"{self.schema}.{self.table}"

    def connect_url(self) -> str:
        """The URL a driver connects with (the password inserted, percent-encoded)."""
        auth = ""
        if self.user:
            auth = quote(self.user, safe="")
            if self.password:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "postgresql" if self.dialect == "postgres" else "mysql"
        return f"{scheme}://{auth}{host}:{self.port}/{quote(self.database, safe='')}"

    def quote_name(self, name: str) -> str:
        if self.dialect == "postgres":
            return '"' + name.replace('"', '""') + '"'
        return "`" + name.replace("`", "``") + "`"

    @property
    def from_clause(self) -> str:
        return f"{self.quote_name(self.schema)}.{self.quote_name(self.table)}"


def parse_source(properties: dict[str, object], *, table: str | None = None,
                 environ: dict[str, str] | None = None) -> Source:
    """The `Source` of a foreign table's properties; `InvalidPropertyError` names the
    property that is wrong (never showing a password)."""
    text = str(properties.get("source") or "").strip()
    parsed = urlparse(text)
    dialect = SCHEMES.get(parsed.scheme.lower())
    if dialect is None:
        raise InvalidPropertyError(
            f"source {mask_url(text)!r}: expected a postgresql://, mysql:// or mariadb:// URL"
            " (user@host:port/database)")
    try:
        port = parsed.port or DEFAULT_PORTS[dialect]
    except ValueError:
        raise InvalidPropertyError(f"source {mask_url(text)!r}: the port is not a number"
                                   ) from None
    if not parsed.hostname:
        raise InvalidPropertyError(f"source {mask_url(text)!r}: no host")
    database = unquote(parsed.path.lstrip("/"))
    if not database or "/" in database:
        raise InvalidPropertyError(f"source {mask_url(text)!r}: name one database after the "
                                   "host (host:port/database)")
    target = str(properties.get("source_table") or "").strip()
    parts = target.split(".")
    if not target or len(parts) > 2 or not all(_NAME_PART.match(p) for p in parts):
        raise InvalidPropertyError(f"source_table {target!r}: expected schema.table (letters, "
                                   "digits and _ only)")
    if len(parts) == 1:
        parts = ["public" if dialect == "postgres" else database, parts[0]]
    password = unquote(parsed.password) if parsed.password else None
    env_name = str(properties.get("password_env") or "").strip()
    if env_name:
        if not _ENV_NAME.match(env_name):
            raise InvalidPropertyError(f"password_env {env_name!r}: expected the name of an "
                                       "environment variable")
        env = os.environ if environ is None else environ
        if env_name not in env:
            where = f" of foreign table {table}" if table else ""
            raise InvalidPropertyError(f"password_env{where}: the environment variable "
                                       f"{env_name} is not set")
        password = env[env_name]
    unknown = [k for k in properties if k.startswith("source_") and k != "source_table"]
    if unknown:
        raise InvalidPropertyError(f"unknown foreign table property {unknown[0]!r} (expected "
                                   "source, source_table, password_env)")
    return Source(dialect, parsed.hostname, port, unquote(parsed.username or "") or None,
                  password, database, parts[0], parts[1], text)


@dataclass(frozen=True)
class Family:
    """How one source column is read: the shoal type, the SELECT expression's template
    (`{}` is the quoted column) and whether range comparisons on it may be pushed (not for
    text: the source's collation may order strings unlike Spark)."""

    type: ColumnType
    select: str = "{}"
    ranges: bool = True


def postgres_family(data_type: str) -> Family:
    """The family of a Postgres `information_schema.columns.data_type`."""
    t = data_type.lower()
    if t == "boolean":
        return Family(BOOL, ranges=False)
    if t in ("smallint", "integer"):
        return Family(INT, "{}::int4")
    if t == "bigint":
        return Family(LONG)
    if t in ("real", "double precision", "numeric"):
        return Family(REAL, "{}::float8")
    if t.startswith("timestamp") or t == "date":
        return Family(TIMESTAMP, "{}::timestamptz")
    if t == "bytea":
        return Family(BYTES, ranges=False)
    return Family(STRING, "{}::text", ranges=False)


def mysql_family(data_type: str, column_type: str) -> Family:
    """The family of a MySQL/MariaDB column (`DATA_TYPE`, `COLUMN_TYPE`)."""
    t, full = data_type.lower(), column_type.lower()
    unsigned = "unsigned" in full
    if t in ("tinyint", "smallint", "mediumint") or (t == "int" and not unsigned):
        return Family(INT, "CAST({} AS SIGNED)")
    if t in ("int", "integer", "bigint"):
        return Family(LONG, "CAST({} AS SIGNED)")
    if t in ("float", "double", "decimal", "real"):
        return Family(REAL, "CAST({} AS DOUBLE)")
    if t in ("datetime", "timestamp", "date"):
        return Family(TIMESTAMP, "CAST({} AS DATETIME(6))")
    if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return Family(BYTES, ranges=False)
    if t in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
             "json"):
        return Family(STRING, ranges=False)
    return Family(STRING, "CAST({} AS CHAR)", ranges=False)
