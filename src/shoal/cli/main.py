"""The `shoal` command (SPEC §10, §11).

Every command loads the configuration once (defaults < file < `SHOAL_*` < flags) and maps
errors once: a `ShoalError` prints one line `error: <message>` on stderr and exits 1; bad
usage exits 2 (typer's own convention).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer

from shoal.config import Config, load_config
from shoal.errors import ShoalError

app = typer.Typer(help="shoal: telemetry and event lakehouse", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)

F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ShoalError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
    return wrapper  # type: ignore[return-value]


@app.callback()
def main(ctx: typer.Context,
         data_dir: Annotated[str | None, typer.Option(
             "--data-dir", help="Data directory (SHOAL_DATA_DIR, default ./shoal-data)")] = None,
         config: Annotated[str | None, typer.Option(
             "--config", help="TOML config file (SHOAL_CONFIG, default ./shoal.toml)")] = None,
         ) -> None:
    try:
        ctx.obj = load_config(config_file=config, data_dir=data_dir)
    except ShoalError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


def _connect(ctx: typer.Context):
    from shoal.client import Shoal

    cfg: Config = ctx.obj
    return Shoal(cfg)


def connect_or_exit(ctx: typer.Context):
    """The embedded client for a command, or a one-line error and exit 1."""
    try:
        return _connect(ctx)
    except ShoalError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


@app.command()
@one_line_errors
def tables(ctx: typer.Context,
           fmt: Annotated[str, typer.Option("--format", help="table or json")] = "table",
           ) -> None:
    """List tables."""
    db = _connect(ctx)
    docs = db.tables()
    if fmt == "json":
        typer.echo(json.dumps({"tables": docs}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table("name", "schema_version", "mode", "rows", "extents", "snapshot")
    for d in docs:
        t.add_row(d["name"], str(d["schema_version"]), d["mode"], str(d["row_count"]),
                  str(d["extent_count"]), str(d["snapshot_id"]))
    Console().print(t)


@app.command()
@one_line_errors
def describe(ctx: typer.Context, table: str) -> None:
    """Describe a table as JSON (the same document as GET /v1/tables/{t})."""
    typer.echo(json.dumps(_connect(ctx).describe(table), indent=2))


@app.command()
@one_line_errors
def demo(ctx: typer.Context,
         keep: Annotated[bool, typer.Option(
             help="Keep the demo's temporary directory (data and server log)")] = False,
         port: Annotated[int | None, typer.Option(
             "--port", help="Port for the demo's server (default: a free one)")] = None,
         ) -> None:
    """Run the end-to-end demo: a server in a temporary directory, HTTP ingest, queries."""
    from shoal.cli.demo import run_demo

    sys.exit(run_demo(keep=keep, port=port))


@app.command("create-table")
@one_line_errors
def create_table(
    ctx: typer.Context, table: str,
    column: Annotated[list[str], typer.Option(
        "--column", "-c", help="name:type[:not null], repeatable (e.g. status:int)")] = [],
    mode: Annotated[str, typer.Option(help="evolve, drop or reject")] = "evolve",
    retention: Annotated[str | None, typer.Option(help="e.g. 7d")] = None,
) -> None:
    """Create a table (SQL DDL arrives with `shoal sql`)."""
    from shoal.errors import InvalidSchemaError
    from shoal.types import Column, parse_type

    cols = []
    for spec in column:
        parts = spec.split(":")
        if len(parts) < 2:
            raise InvalidSchemaError(f"--column {spec!r}: expected name:type")
        nullable = not (len(parts) > 2 and parts[2].strip().lower() == "not null")
        cols.append(Column(parts[0], parse_type(parts[1]), nullable=nullable))
    props = {"retention": retention} if retention else {}
    db = _connect(ctx)
    db.create_table(table, cols, mode=mode, properties=props)  # type: ignore[arg-type]
    typer.echo(json.dumps(db.describe(table), indent=2))
    db.close()


def _register_ingest() -> None:
    from shoal.cli.ingest import ingest_command

    app.command("ingest")(ingest_command)


_register_ingest()


def _register_sql() -> None:
    from shoal.cli.sql import sql_command

    app.command("sql")(one_line_errors(sql_command))


_register_sql()


def _register_serve() -> None:
    from shoal.cli.serve import serve

    app.command()(one_line_errors(serve))


_register_serve()


def _register_subapps() -> None:
    try:
        from shoal.cli.extent import extent_app
    except ImportError:  # pragma: no cover - the format CLI is part of the package
        return
    app.add_typer(extent_app, name="extent")
    from shoal.cli.pipeline import pipeline_app

    app.add_typer(pipeline_app, name="pipeline")


_register_subapps()


def _register_maintain() -> None:
    try:
        from shoal.cli.maintain import register
    except ModuleNotFoundError as e:  # the maintenance CLI is not built yet
        if e.name != "shoal.cli.maintain":
            raise
        return
    register(app, one_line_errors)


_register_maintain()

if __name__ == "__main__":  # pragma: no cover
    app()
