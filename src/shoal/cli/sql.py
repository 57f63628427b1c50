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
from typing import Annotated

import typer


def sql_command(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One SQL statement, or - to read stdin")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv")] = "table",
    stats: Annotated[bool, typer.Option("--stats", help="Print pruning stats on stderr")
                     ] = False,
    prune: Annotated[bool, typer.Option("--prune/--no-prune",
                                        help="Skip data by the pruning cascade")] = True,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="auto, local (embedded) or spark; default SHOAL_QUERY_ENGINE")
    ] = None,
) -> None:
    """Run SQL: SELECT (embedded engine or Spark), or CREATE TABLE / ALTER TABLE / DESCRIBE /
    SHOW TABLES."""
    import sys

    from shoal.cli.main import _connect
    from shoal.errors import QueryError
    from shoal.query.results import answer_document, csv_text, json_rows

    if fmt not in ("table", "json", "csv"):
        raise QueryError(f"--format must be table, json or csv, got {fmt!r}")
    text = sys.stdin.read() if statement == "-" else statement
    db = _connect(ctx)
    try:
        result = db.sql(text, prune=prune, engine=engine)
    finally:
        db.close()
    doc = result.stats.to_json()
    if fmt == "json":
        typer.echo(json.dumps(answer_document(result.table, doc), indent=2))
    elif fmt == "csv":
        typer.echo(csv_text(result.table), nl=False)
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(*result.table.schema.names)
        for row in json_rows(result.table):
            t.add_row(*["" if v is None else (json.dumps(v) if isinstance(v, (list, dict))
                                              else str(v)) for v in row])
        Console().print(t)
        typer.echo(f"({result.table.num_rows} rows)")
    if stats and result.kind != "ddl":
        summary = {k: v for k, v in doc.items() if k != "scans"}
        typer.echo("stats: " + json.dumps(summary), err=True)
