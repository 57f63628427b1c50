"""`shoal sql "<statement>"`: one statement (DDL included) through the query engine.

`--format table` (default) prints a table, `json` the same document as `POST /v1/query`,
`csv` a header line and rows. `--stats` prints the pruning stats (extents and blocks
considered/pruned/read, bytes read) on stderr; `EXPLAIN <select>` shows them per scan
without running the query. `--no-prune` reads every extent. `--engine auto|local|spark`
picks the engine of a SELECT (default `SHOAL_QUERY_ENGINE`, else auto); `--stats` and
`EXPLAIN` say which engine ran and why.

`shoal kql "<query>"` (or `shoal sql --kql "<query>"`) runs a KQL query
(`shoal.frontends.kusto.kql`) the same way, with the same options; `--format json` adds
`"sql"` (the statement it ran as) and `"render"` (its render hint), `--stats` also prints
both on stderr.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from shoal.cli.common import connect, print_json, print_table


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
    from shoal.query.results import answer_document, csv_text, json_rows

    text = sys.stdin.read() if statement == "-" else statement
    db = connect(ctx)
    try:
        chosen = None if engine is None else engine.value
        result = (db.kql(text, prune=prune, engine=chosen) if kql
                  else db.sql(text, prune=prune, engine=chosen))
    finally:
        db.close()
    doc = result.stats.to_json()
    if fmt is SqlFormat.JSON:
        answer = answer_document(result.table, doc)
        if kql:
            answer.update(sql=result.translated_sql, render=result.render)
        print_json(answer)
    elif fmt is SqlFormat.CSV:
        typer.echo(csv_text(result.table), nl=False)
    else:
        print_table(result.table.schema.names,
                    ([_cell(v) for v in row] for row in json_rows(result.table)))
        typer.echo(f"({result.table.num_rows} rows)")
    if stats and result.kind != "ddl":
        summary = {k: v for k, v in doc.items() if k != "scans"}
        typer.echo("stats: " + json.dumps(summary), err=True)
        if kql:
            typer.echo("sql: " + (result.translated_sql or ""), err=True)
            if result.render is not None:
                typer.echo("render: " + json.dumps(result.render), err=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
