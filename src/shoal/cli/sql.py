"""`shoal sql "<statement>"`: one statement (DDL included) through the query engine.

`--format table` (default) prints a table, `json` the same document as `POST /v1/query`,
`csv` a header line and rows. `--stats` prints the pruning stats (extents and blocks
considered/pruned/read, bytes read) on stderr; `EXPLAIN <select>` shows them per scan
without running the query. `--no-prune` reads every extent. `--engine auto|local|spark`
picks the engine of a SELECT (default `SHOAL_QUERY_ENGINE`, else auto); `--stats` and
`EXPLAIN` say which engine ran and why.

With `--url` the statement runs in that server (`POST /v1/query`, its JSON answer printed the
same way; no engine starts here).

`shoal kql "<query>"` (or `shoal sql --kql "<query>"`) runs a KQL query
(`shoal.frontends.kusto.kql`) the same way, with the same options; `--format json` adds
`"sql"` (the statement it ran as) and `"render"` (its render hint), `--stats` also prints
both on stderr.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from shoal.cli.common import connect, print_json, print_table, remote_of, spark_log_to_file


class SqlFormat(StrEnum):
    """`shoal sql --format`."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


class EngineOption(StrEnum):
    """`shoal sql --engine` (`shoal.config.QUERY_ENGINES`)."""

    AUTO = "auto"
    LOCAL = "local"
    SPARK = "spark"


# A statement that may make the data directory (the first table of a new one); any other
# statement needs it to exist.
_CREATE_TABLE = re.compile(r"\s*CREATE\s+TABLE\b", re.IGNORECASE)

# The options `sql` and `kql` share.
FormatOpt = Annotated[SqlFormat, typer.Option("--format", "-f", help="Output format")]
StatsOpt = Annotated[bool, typer.Option("--stats", help="Print pruning stats on stderr")]
PruneOpt = Annotated[bool, typer.Option("--prune/--no-prune",
                                        help="Skip data by the pruning cascade")]
EngineOpt = Annotated[EngineOption | None, typer.Option(
    "--engine", help="local (embedded) or spark; default SHOAL_QUERY_ENGINE, else auto")]


def sql_command(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One SQL statement, or - to read stdin")],
    fmt: FormatOpt = SqlFormat.TABLE,
    stats: StatsOpt = False,
    prune: PruneOpt = True,
    engine: EngineOpt = None,
    kql: Annotated[bool, typer.Option("--kql", help="The statement is a KQL query")] = False,
) -> None:
    """Run SQL: SELECT (embedded engine or Spark), or CREATE TABLE / ALTER TABLE / DESCRIBE /
    SHOW TABLES."""
    _run(ctx, statement, fmt=fmt, stats=stats, prune=prune, engine=engine, kql=kql)


def kql_command(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="One KQL query, or - to read stdin")],
    fmt: FormatOpt = SqlFormat.TABLE,
    stats: StatsOpt = False,
    prune: PruneOpt = True,
    engine: EngineOpt = None,
) -> None:
    """Run a KQL query (translated to SQL; same engines, pruning and stats as `shoal sql`)."""
    _run(ctx, query, fmt=fmt, stats=stats, prune=prune, engine=engine, kql=True)


def _run(ctx: typer.Context, statement: str, *, fmt: SqlFormat, stats: bool, prune: bool,
         engine: EngineOption | None, kql: bool) -> None:
    text = sys.stdin.read() if statement == "-" else statement
    chosen = None if engine is None else engine.value
    remote = remote_of(ctx)
    if remote is not None:
        try:
            kind, answer = remote.answer_document(text, kql=kql, prune=prune, engine=chosen)
        finally:
            remote.close()
        names = [c["name"] for c in answer["columns"]]
        _print(answer, names, answer["rows"], kind=kind, fmt=fmt, stats=stats, kql=kql)
        return

    from shoal.query.results import answer_document

    db = connect(ctx, create=not kql and _CREATE_TABLE.match(text) is not None)
    spark_log_to_file(db)
    try:
        result = (db.kql(text, prune=prune, engine=chosen) if kql
                  else db.sql(text, prune=prune, engine=chosen))
    finally:
        db.close()
    answer = answer_document(result.table, result.stats.to_json())
    if kql:
        answer.update(sql=result.translated_sql, render=result.render)
    _print(answer, result.table.schema.names, answer["rows"], kind=result.kind, fmt=fmt,
           stats=stats, kql=kql)


def _print(answer: dict[str, Any], names: list[str], rows: list[list[Any]], *, kind: str,
           fmt: SqlFormat, stats: bool, kql: bool) -> None:
    """The answer in `fmt` on stdout, and with `stats` the stats (and for KQL the SQL and the
    render hint) on stderr: the same for an answer of this process and of a server."""
    if fmt is SqlFormat.JSON:
        print_json(answer)
    elif fmt is SqlFormat.CSV:
        typer.echo(_csv(names, rows), nl=False)
    else:
        print_table(names, ([_cell(v) for v in row] for row in rows))
        typer.echo(f"({len(rows)} rows)")
    if stats and kind != "ddl":
        summary = {k: v for k, v in answer["stats"].items()     # a server adds "truncated"
                   if k != "scans" and not (k == "truncated" and v is False)}
        typer.echo("stats: " + json.dumps(summary), err=True)
        if kql:
            typer.echo("sql: " + (answer.get("sql") or ""), err=True)
            if answer.get("render") is not None:
                typer.echo("render: " + json.dumps(answer["render"]), err=True)


def _csv(names: list[str], rows: list[list[Any]]) -> str:
    """A header line and the rows (JSON values; lists and objects as JSON text)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(names)
    for row in rows:
        w.writerow(["" if v is None else (json.dumps(v) if isinstance(v, (list, dict)) else v)
                    for v in row])
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
