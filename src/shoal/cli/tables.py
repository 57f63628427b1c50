"""`shoal tables`, `shoal describe t`, `shoal create-table t -c name:type ...` (docs/cli.md).

`describe` and `create-table` print the table document of `GET /v1/tables/{t}` as JSON;
`tables --format json` prints `{"tables": [...]}` as `GET /v1/tables` does.
"""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.common import ListFormat, SchemaModeOption, connect, print_json, print_table


def tables_command(
    ctx: typer.Context,
    fmt: Annotated[ListFormat, typer.Option("--format", help="Output format")
                   ] = ListFormat.TABLE,
) -> None:
    """List tables."""
    db = connect(ctx)
    try:
        docs = db.tables()
    finally:
        db.close()
    if fmt is ListFormat.JSON:
        print_json({"tables": docs})
        return
    print_table(("name", "schema_version", "mode", "rows", "extents", "snapshot"),
                ((d["name"], str(d["schema_version"]), d["mode"], str(d["row_count"]),
                  str(d["extent_count"]), str(d["snapshot_id"])) for d in docs))


def describe_command(ctx: typer.Context, table: str) -> None:
    """Describe a table as JSON (the same document as GET /v1/tables/{t})."""
    db = connect(ctx)
    try:
        print_json(db.describe(table))
    finally:
        db.close()


def create_table_command(
    ctx: typer.Context, table: str,
    column: Annotated[list[str] | None, typer.Option(
        "--column", "-c", help="name:type[:not null], repeatable (e.g. status:int)")] = None,
    mode: Annotated[SchemaModeOption, typer.Option(help="What writes do with unknown fields")
                    ] = SchemaModeOption.EVOLVE,
    retention: Annotated[str | None, typer.Option(help="e.g. 7d")] = None,
) -> None:
    """Create a table (SQL DDL: `shoal sql "CREATE TABLE ..."`)."""
    from shoal.errors import InvalidSchemaError
    from shoal.types import Column, parse_type

    cols = []
    for spec in column or ():
        parts = spec.split(":")
        if len(parts) < 2:
            raise InvalidSchemaError(f"--column {spec!r}: expected name:type")
        nullable = not (len(parts) > 2 and parts[2].strip().lower() == "not null")
        cols.append(Column(parts[0], parse_type(parts[1]), nullable=nullable))
    props = {"retention": retention} if retention else {}
    db = connect(ctx)
    try:
        db.create_table(table, cols, mode=mode.literal(), properties=props)
        print_json(db.describe(table))
    finally:
        db.close()
