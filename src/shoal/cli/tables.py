"""`shoal init`, `shoal tables`, `shoal describe t`, `shoal create-table t -c name:type ...`
(docs/cli.md).

`describe` and `create-table` print the table document of `GET /v1/tables/{t}` as JSON;
`tables --format json` prints `{"tables": [...]}` as `GET /v1/tables` does. With `--url`
they ask that server (`shoal.remote`). `init` and `create-table` are the commands that make
a data directory that does not exist yet; the others refuse one.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli.common import (ListFormat, SchemaModeOption, config_of, connect, print_json,
                              print_table, remote_of)


def init_command(ctx: typer.Context) -> None:
    """Create the data directory (its catalog and object store) if it does not exist."""
    from shoal.errors import ConfigError

    cfg = config_of(ctx)
    if cfg.url is not None:
        raise ConfigError("`shoal init` makes a local data directory; a server (--url) "
                          "makes its own")
    existed = cfg.data_path.is_dir()
    connect(ctx, create=True).close()
    state = "exists" if existed else "created"
    typer.echo(f"data directory {cfg.data_path} {state} (catalog {cfg.resolved_catalog_url}, "
               f"objects {cfg.resolved_storage_url})")


def tables_command(
    ctx: typer.Context,
    fmt: Annotated[ListFormat, typer.Option("--format", help="Output format")
                   ] = ListFormat.TABLE,
) -> None:
    """List tables."""
    db = remote_of(ctx) or connect(ctx)
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
    db = remote_of(ctx) or connect(ctx)
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
    remote = remote_of(ctx)
    if remote is not None:      # the server parses the types
        try:
            print_json(remote.create_table(table, [_column_doc(spec) for spec in column or ()],
                                           mode=mode.value, retention=retention))
        finally:
            remote.close()
        return
    from shoal.types import Column, parse_type

    cols = []
    for spec in column or ():
        doc = _column_doc(spec)
        cols.append(Column(doc["name"], parse_type(doc["type"]), nullable=doc["nullable"]))
    props = {"retention": retention} if retention else {}
    db = connect(ctx, create=True)
    try:
        db.create_table(table, cols, mode=mode.literal(), properties=props)
        print_json(db.describe(table))
    finally:
        db.close()


def _column_doc(spec: str) -> dict[str, Any]:
    """`name:type[:not null]` as the column document of `POST /v1/tables`."""
    from shoal.errors import InvalidSchemaError

    parts = spec.split(":")
    if len(parts) < 2:
        raise InvalidSchemaError(f"--column {spec!r}: expected name:type")
    nullable = not (len(parts) > 2 and parts[2].strip().lower() == "not null")
    return {"name": parts[0], "type": parts[1], "nullable": nullable}
