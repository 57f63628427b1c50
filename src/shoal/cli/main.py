"""The `shoal` command (docs/deployment.md, docs/cli.md): the one place that builds the Typer app.

Every command is registered here, explicitly, by the module and function that define it;
command modules only define functions, so importing one has no side effect and the command
tree reads top to bottom below. Every command is wrapped by `one_line_errors` (a `ShoalError`
prints one line `error: <message>` on stderr and exits 1); bad usage exits 2 (click's
convention, also for a value outside an option's enum). The root callback loads the
configuration once (defaults < file < `SHOAL_*` < flags) into `ctx.obj`; its options
(`--data-dir`, `--config`, `--url`, `--token`) may also follow the command's name
(`hoist_global_options`). With `--url` the commands that can send their work to a server do
(`shoal.remote`); the others refuse it.

Startup stays cheap: a command's module is imported, and its click command built, only when
that command runs (or a help page lists it): `shoal ingest` does not import the SQL, serve
or pipeline modules. The modules imported here import typer and the standard library only;
the client, pyspark, the query engine and rich are imported inside the commands.

`python -m shoal` (`shoal/__main__.py`) runs the same app as the `shoal` script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from importlib import import_module
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
import typer.main

if TYPE_CHECKING:   # typer 0.29 carries its own click (`typer._click`)
    from typer._click import Command, Context

from shoal.cli.common import fail, one_line_errors
from shoal.errors import ShoalError


def load_configuration(
    ctx: typer.Context,
    data_dir: Annotated[str | None, typer.Option(
        "--data-dir", help="Data directory (SHOAL_DATA_DIR, default ./shoal-data)")] = None,
    config: Annotated[str | None, typer.Option(
        "--config", help="TOML config file (SHOAL_CONFIG, default ./shoal.toml)")] = None,
    url: Annotated[str | None, typer.Option(
        "--url", help="A running shoal server to send the work to, e.g. "
                      "http://127.0.0.1:8720 (SHOAL_URL); the data directory is not read")
    ] = None,
    token: Annotated[str | None, typer.Option(
        "--token", help="Bearer token for --url (SHOAL_TOKEN)")] = None,
) -> None:
    """shoal: telemetry and event lakehouse"""
    from shoal.config import load_config
    from shoal.native import one_blas_thread, own_cli_process

    if own_cli_process():
        one_blas_thread()   # before any command imports numpy

    try:
        cfg = load_config(config_file=config, data_dir=data_dir, url=url, token=token)
    except ShoalError as e:
        fail(str(e))
    if data_dir is not None and url is None and cfg.url is not None:
        # `--data-dir` on the command line means that directory, whatever SHOAL_URL says
        from dataclasses import replace

        cfg = replace(cfg, url=None)
    ctx.obj = cfg


# The root's options, also taken after the command (`shoal sql --data-dir D "..."`): they
# are moved in front of it before click parses (`hoist_global_options`).
GLOBAL_OPTIONS = frozenset({"--data-dir", "--config", "--url", "--token"})


def hoist_global_options(args: list[str]) -> list[str]:
    """`args` with the root's options that follow the command moved before it (each with
    its value; `--opt=value` too), so they mean the same wherever they are written. Nothing
    after `--` moves; a later value still wins over an earlier one."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if args[i] in GLOBAL_OPTIONS else 1
    if i >= len(args) or args[i] == "--":
        return args
    moved: list[str] = []
    kept: list[str] = []
    rest = args[i + 1:]
    j = 0
    while j < len(rest):
        arg = rest[j]
        if arg == "--":
            kept += rest[j:]
            break
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and (
                "=" in arg or j + 1 < len(rest)):
            take = 1 if "=" in arg else 2
            moved += rest[j:j + take]
            j += take
            continue
        kept.append(arg)
        j += 1
    return [*args[:i], *moved, args[i], *kept]


def _add(group: typer.Typer, name: str, command: Callable[..., Any]) -> None:
    group.command(name)(one_line_errors(command))


def _function(where: str) -> Callable[..., Any]:
    """`module:function` -> the function (its module imported now)."""
    module, _, attr = where.partition(":")
    fn: Callable[..., Any] = getattr(import_module(module), attr)
    return fn


def _single(name: str, where: str) -> Callable[[], Command]:
    """A builder of the click command `name` from the function at `where`."""
    def build() -> Command:
        one = typer.Typer(add_completion=False)
        _add(one, name, _function(where))
        return typer.main.get_command(one)
    return build


def _extent() -> Command:
    extent = typer.Typer(name="extent", help="Inspect extents", no_args_is_help=True,
                         add_completion=False)
    extent.callback()(_function("shoal.cli.extent:extent_group"))
    _add(extent, "inspect", _function("shoal.cli.extent:inspect_command"))
    return typer.main.get_command(extent)


def _pipeline() -> Command:
    pipeline = typer.Typer(name="pipeline", add_completion=False, no_args_is_help=True,
                           help="Ingest pipelines (Kafka, file-drop, Prometheus scrape, sync)")
    _add(pipeline, "kafka", _function("shoal.cli.pipeline_kafka:kafka_command"))
    _add(pipeline, "filedrop", _function("shoal.cli.pipeline_filedrop:filedrop_command"))
    _add(pipeline, "scrape", _function("shoal.cli.pipeline_scrape:scrape_command"))
    _add(pipeline, "sync", _function("shoal.cli.pipeline_sync:sync_command"))
    return typer.main.get_command(pipeline)


def _spark() -> Command:
    spark = typer.Typer(name="spark", help="Spark deployment (docs/deployment.md)",
                        no_args_is_help=True, add_completion=False)
    spark.callback()(_function("shoal.cli.spark:spark_group"))
    _add(spark, "pack", _function("shoal.cli.spark:pack_command"))
    return typer.main.get_command(spark)


# The command tree, in help order: name -> builder of its click command.
COMMANDS: dict[str, Callable[[], Command]] = {
    "init": _single("init", "shoal.cli.tables:init_command"),
    "tables": _single("tables", "shoal.cli.tables:tables_command"),
    "describe": _single("describe", "shoal.cli.tables:describe_command"),
    "create-table": _single("create-table", "shoal.cli.tables:create_table_command"),
    "ingest": _single("ingest", "shoal.cli.ingest:ingest_command"),
    "sql": _single("sql", "shoal.cli.sql:sql_command"),
    "kql": _single("kql", "shoal.cli.sql:kql_command"),
    "promql": _single("promql", "shoal.cli.promql:promql_command"),
    "serve": _single("serve", "shoal.cli.serve:serve_command"),
    "maintain": _single("maintain", "shoal.cli.maintain:maintain_command"),
    "demo": _single("demo", "shoal.cli.demo:demo_command"),
    "extent": _extent,
    "pipeline": _pipeline,
    "spark": _spark,
}


class _LazyCommands(MutableMapping[str, "Command"]):
    """The root group's commands: every name is known, each command is built on first use."""

    def __init__(self, builders: dict[str, Callable[[], Command]]) -> None:
        self._builders = builders
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if name not in self._builders:
                raise KeyError(name)
            self._built[name] = self._builders[name]()
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._built.pop(name, None)
        self._builders.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._builders
        yield from (n for n in self._built if n not in self._builders)

    def __len__(self) -> int:
        return len(set(self._builders) | set(self._built))


class _LazyGroup(typer.core.TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(dict(COMMANDS))

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(list(args)))


def build_app() -> typer.Typer:
    """The whole command tree (each command built when first used, see `COMMANDS`)."""
    app = typer.Typer(help="shoal: telemetry and event lakehouse", no_args_is_help=True,
                      pretty_exceptions_enable=False, add_completion=False, cls=_LazyGroup)
    app.callback()(load_configuration)
    return app


app = build_app()
