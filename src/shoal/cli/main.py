"""The `shoal` command (SPEC §10, §11): the one place that builds the Typer app.

Every command is registered here, explicitly; command modules only define functions, so
importing one has no side effect and the command tree reads top to bottom below. Every
command is wrapped by `one_line_errors` (a `ShoalError` prints one line `error: <message>`
on stderr and exits 1); bad usage exits 2 (click's convention, also for a value outside an
option's enum). The root callback loads the configuration once (defaults < file < `SHOAL_*`
< flags) into `ctx.obj`.

Startup stays cheap: the modules imported here import typer and the standard library only;
the client, pyspark, the query engine and rich are imported inside the commands.

`python -m shoal` (`shoal/__main__.py`) runs the same app as the `shoal` script.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from shoal.cli.common import fail, one_line_errors
from shoal.cli.demo import demo_command
from shoal.cli.extent import extent_group, inspect_command
from shoal.cli.ingest import ingest_command
from shoal.cli.maintain import maintain_command
from shoal.cli.pipeline_filedrop import filedrop_command
from shoal.cli.pipeline_kafka import kafka_command
from shoal.cli.pipeline_scrape import scrape_command
from shoal.cli.promql import promql_command
from shoal.cli.serve import serve_command
from shoal.cli.spark import pack_command, spark_group
from shoal.cli.sql import kql_command, sql_command
from shoal.cli.tables import create_table_command, describe_command, tables_command
from shoal.errors import ShoalError


def load_configuration(
    ctx: typer.Context,
    data_dir: Annotated[str | None, typer.Option(
        "--data-dir", help="Data directory (SHOAL_DATA_DIR, default ./shoal-data)")] = None,
    config: Annotated[str | None, typer.Option(
        "--config", help="TOML config file (SHOAL_CONFIG, default ./shoal.toml)")] = None,
) -> None:
    """shoal: telemetry and event lakehouse"""
    from shoal.config import load_config

    try:
        ctx.obj = load_config(config_file=config, data_dir=data_dir)
    except ShoalError as e:
        fail(str(e))


def _add(group: typer.Typer, name: str, command: Callable[..., Any]) -> None:
    group.command(name)(one_line_errors(command))


def build_app() -> typer.Typer:
    """The whole command tree."""
    app = typer.Typer(help="shoal: telemetry and event lakehouse", no_args_is_help=True,
                      pretty_exceptions_enable=False, add_completion=False)
    app.callback()(load_configuration)
    _add(app, "tables", tables_command)
    _add(app, "describe", describe_command)
    _add(app, "create-table", create_table_command)
    _add(app, "ingest", ingest_command)
    _add(app, "sql", sql_command)
    _add(app, "kql", kql_command)
    _add(app, "promql", promql_command)
    _add(app, "serve", serve_command)
    _add(app, "maintain", maintain_command)
    _add(app, "demo", demo_command)

    extent = typer.Typer(help="Inspect extents", no_args_is_help=True)
    extent.callback()(extent_group)
    _add(extent, "inspect", inspect_command)
    app.add_typer(extent, name="extent")

    pipeline = typer.Typer(help="Ingest pipelines (Kafka, file-drop, Prometheus scrape)",
                           no_args_is_help=True)
    _add(pipeline, "kafka", kafka_command)
    _add(pipeline, "filedrop", filedrop_command)
    _add(pipeline, "scrape", scrape_command)
    app.add_typer(pipeline, name="pipeline")

    spark = typer.Typer(help="Spark deployment (docs/deployment.md)", no_args_is_help=True)
    spark.callback()(spark_group)
    _add(spark, "pack", pack_command)
    app.add_typer(spark, name="spark")
    return app


app = build_app()
