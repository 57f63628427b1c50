"""The drivers that read a source: one SELECT in, one Arrow table out, no per-row Python.

- Postgres: ADBC's libpq driver (`adbc-driver-postgresql`), which reads the answer with
  `COPY ... TO STDOUT (FORMAT binary)` straight into Arrow. Measured against connectorx on a
  1M-row table (`bench/bench_federation.py`): 0.8-1.1 M rows/s against 0.45-0.85 M, so
  ADBC. The session is read-only, in UTC, with the statement timeout, all set as startup
  options of the connection (`default_transaction_read_only`, `TimeZone`,
  `statement_timeout`), so no statement of ours could write even by mistake.
- MySQL/MariaDB: connectorx (Rust, the MySQL binary protocol into Arrow). The statement is
  one SELECT that shoal generates; on MariaDB it runs under `SET STATEMENT
  max_statement_time=..., time_zone='+00:00' FOR`, on MySQL with the `MAX_EXECUTION_TIME`
  optimizer hint.

Driver errors become `ForeignSourceError` with every password scrubbed from the text.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from urllib.parse import quote

import pyarrow as pa

from shoal.errors import ForeignSourceError, InvalidPropertyError
from shoal.query.federation.source import Family, Source, mysql_family, postgres_family
from shoal.secrets import scrub

log = logging.getLogger("shoal.query.federation")


@dataclass(frozen=True)
class SourceColumn:
    name: str                     # as the source spells it
    family: Family


def _fail(source: Source, what: str, e: Exception) -> ForeignSourceError:
    text = scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__,
                 [source.password])
    log.warning("foreign source %s (%s): %s failed: %s", source.masked, source.qualified,
                what, text)
    return ForeignSourceError(source.masked, f"{what} failed: {text}")


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


# ---- Postgres ---------------------------------------------------------------------------------
def _pg_url(source: Source, timeout_s: float | None) -> str:
    options = "-c default_transaction_read_only=on -c TimeZone=UTC"
    if timeout_s is not None:
        options += f" -c statement_timeout={max(1, math.ceil(timeout_s * 1000))}"
    return (f"{source.connect_url()}?options={quote(options, safe='')}"
            f"&application_name=shoal&connect_timeout=10")


def _pg_read(source: Source, sql: str, timeout_s: float | None, what: str) -> pa.Table:
    import adbc_driver_postgresql.dbapi as adbc

    try:
        with (adbc.connect(_pg_url(source, timeout_s), autocommit=True) as conn,
              conn.cursor() as cur):
            cur.execute(sql)
            return cur.fetch_arrow_table()
    except Exception as e:  # noqa: BLE001 - the driver's errors: connection, SQL, timeout
        raise _fail(source, what, e) from None


# ---- MySQL / MariaDB ------------------------------------------------------------------------
def _my_read(source: Source, sql: str, timeout_s: float | None, what: str) -> pa.Table:
    import connectorx as cx

    url = source.connect_url()
    try:
        version = cx.read_sql(url, "SELECT VERSION() AS v", return_type="arrow")
        mariadb = "mariadb" in str(version.column("v")[0].as_py()).lower()
        if mariadb:
            settings = ["time_zone='+00:00'"]
            if timeout_s is not None:
                settings.append(f"max_statement_time={max(0.001, timeout_s):g}")
            sql = f"SET STATEMENT {', '.join(settings)} FOR {sql}"
        elif timeout_s is not None and sql.startswith("SELECT "):
            ms = max(1, math.ceil(timeout_s * 1000))
            sql = f"SELECT /*+ MAX_EXECUTION_TIME({ms}) */ " + sql[len("SELECT "):]
        return cx.read_sql(url, sql, return_type="arrow")
    except Exception as e:  # noqa: BLE001 - connectorx raises plain RuntimeErrors
        raise _fail(source, what, e) from None


# ---- shared -----------------------------------------------------------------------------------
def read_source(source: Source, sql: str, *, timeout_s: float | None) -> pa.Table:
    """The answer of `sql` (a SELECT shoal generated) at `source`, as Arrow."""
    if source.dialect == "postgres":
        return _pg_read(source, sql, timeout_s, "the read")
    return _my_read(source, sql, timeout_s, "the read")


def source_columns(source: Source, *, timeout_s: float | None = 30.0,
                   table: str | None = None) -> list[SourceColumn]:
    """The source table's columns in their order; `InvalidPropertyError` (the
    `source_table`) when it has none (absent, or not visible to the user)."""
    if source.dialect == "postgres":
        sql = ("SELECT column_name AS name, data_type AS data_type, data_type AS full_type "
               "FROM information_schema.columns "
               f"WHERE table_schema = {_literal(source.schema)} "
               f"AND table_name = {_literal(source.table)} ORDER BY ordinal_position")
        answer = _pg_read(source, sql, timeout_s, "reading the columns")
    else:
        sql = ("SELECT COLUMN_NAME AS name, DATA_TYPE AS data_type, "
               "COLUMN_TYPE AS full_type FROM information_schema.COLUMNS "
               f"WHERE TABLE_SCHEMA = {_literal(source.schema)} "
               f"AND TABLE_NAME = {_literal(source.table)} ORDER BY ORDINAL_POSITION")
        answer = _my_read(source, sql, timeout_s, "reading the columns")
    out = []
    for row in answer.to_pylist():      # one row per column: metadata, not data
        name, data_type, full = (_text(row["name"]), _text(row["data_type"]),
                                 _text(row["full_type"]))
        family = (postgres_family(data_type) if source.dialect == "postgres"
                  else mysql_family(data_type, full))
        out.append(SourceColumn(name, family))
    if not out:
        where = f" of foreign table {table}" if table else ""
        raise InvalidPropertyError(f"source_table{where}: no table {source.qualified} at "
                                   f"{source.masked} (or none the user may read)")
    return out


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
