"""`shoal sql "<statement>"`: one statement (DDL included) through the query engine.

`--format table` (default) prints a table, `json` the same document as `POST /v1/query`,
`csv` a header line and rows. `--stats` prints the pruning stats (extents and blocks
considered/pruned/read, bytes read) on stderr; `EXPLAIN <select>` shows them per scan
without running the query. `--no-prune` reads every extent. `--engine auto|local|spark`
picks the engine of a SELECT (default `SHOAL_QUERY_ENGINE`, else auto); `--stats` and
`EXPLAIN` say which engine ran and why.
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


def sql_command(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One SQL statement, or - to read stdin")],
    fmt: Annotated[SqlFormat, typer.Option("--format", "-f", help="Output format")
                   ] = SqlFormat.TABLE,
    stats: Annotated[bool, typer.Option("--stats", help="Print pruning stats on stderr")
                     ] = False,
    prune: Annotated[bool, typer.Option("--prune/--no-prune",
                                        help="Skip data by the pruning cascade")] = True,
    engine: Annotated[EngineOption | None, typer.Option(
        "--engine", help="local (embedded) or spark; default SHOAL_QUERY_ENGINE, else auto")
    ] = None,
) -> None:
    """Run SQL: SELECT (embedded engine or Spark), or CREATE TABLE / ALTER TABLE / DESCRIBE /
    SHOW TABLES."""
    from shoal.query.results import answer_document, csv_text, json_rows

    text = sys.stdin.read() if statement == "-" else statement
    db = connect(ctx)
    try:
        result = db.sql(text, prune=prune, engine=None if engine is None else engine.value)
    finally:
        db.close()
    doc = result.stats.to_json()
    if fmt is SqlFormat.JSON:
        print_json(answer_document(result.table, doc))
    elif fmt is SqlFormat.CSV:
        typer.echo(csv_text(result.table), nl=False)
    else:
        print_table(result.table.schema.names,
                    ([_cell(v) for v in row] for row in json_rows(result.table)))
        typer.echo(f"({result.table.num_rows} rows)")
    if stats and result.kind != "ddl":
        summary = {k: v for k, v in doc.items() if k != "scans"}
        typer.echo("stats: " + json.dumps(summary), err=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
