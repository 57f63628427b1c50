"""What every `shoal` command shares: the client (embedded, or of a server with `--url`), the
one-line error edge, output, progress.

Exit codes (docs/cli.md): 0 success; 1 a shoal error, printed as one line `error: <message>`
on stderr; 2 bad usage, click's own (an unknown option, a value outside an option's enum,
with a usage message naming the allowed values); 130 interrupted (`shoal demo`).

Importing this module is cheap and has no side effects: the client, rich and everything
below the CLI are imported inside the functions that need them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from functools import wraps
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import typer

from shoal.errors import ConfigError, ShoalError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn

    from shoal.client import Shoal
    from shoal.config import Config
    from shoal.remote import RemoteShoal
    from shoal.types.schema import SchemaMode

EXIT_ERROR = 1

P = ParamSpec("P")
R = TypeVar("R")


class SchemaModeOption(StrEnum):
    """`--mode`: what a write does with unknown fields (`shoal.types.schema.SCHEMA_MODES`)."""

    EVOLVE = "evolve"
    DROP = "drop"
    REJECT = "reject"

    def literal(self) -> SchemaMode:
        """The catalog's spelling (mypy checks that every value is a `SchemaMode`)."""
        return self.value


class ListFormat(StrEnum):
    """`--format` of the listing commands (`shoal tables`, `shoal maintain --status`)."""

    TABLE = "table"
    JSON = "json"


def fail(message: str) -> NoReturn:
    """Print `error: <message>` on stderr and exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so that a `ShoalError` it raises becomes one line on stderr and exit 1.

    The wrapper keeps the signature (`functools.wraps`), which is what typer reads."""
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ShoalError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(EXIT_ERROR) from e
    return wrapper


def config_of(ctx: typer.Context) -> Config:
    """The configuration the root callback loaded (defaults < file < `SHOAL_*` < flags)."""
    cfg: Config = ctx.obj
    return cfg


def remote_of(ctx: typer.Context) -> RemoteShoal | None:
    """A client of the server the command talks to (`--url` / `SHOAL_URL`), else None: the
    command then works on the data directory itself."""
    cfg = config_of(ctx)
    if cfg.url is None:
        return None
    from shoal.remote import RemoteShoal

    try:
        return RemoteShoal(cfg.url, token=cfg.token)
    except ValueError as e:
        raise ConfigError(f"--url: {e}") from None


def connect(ctx: typer.Context, *, create: bool = False) -> Shoal:
    """The embedded client on the command's configuration; a `ShoalError` propagates. The
    data directory must exist unless `create` (a command that makes tables): it is made
    only on purpose (`shoal init`, `shoal create-table`, `shoal serve`)."""
    from shoal.client import Shoal

    cfg = config_of(ctx)
    if cfg.url is not None:
        raise ConfigError(f"`shoal {ctx.info_name}` works on the data directory, not through "
                          "a server: leave out --url (and SHOAL_URL)")
    return Shoal(cfg, create=create)


def spark_log_to_file(db: Shoal) -> None:
    """A Spark this command starts logs its errors to `<data dir>/spark.log`, not stderr:
    the command prints the error itself, once (`one_line_errors`)."""
    db.query_engine.spark_jvm_log = str(db.config.data_path / "spark.log")


def connect_or_exit(ctx: typer.Context) -> Shoal:
    """The embedded client for a command, or a one-line error and exit 1."""
    try:
        return connect(ctx)
    except ShoalError as e:
        fail(str(e))


def print_json(doc: Any, *, ensure_ascii: bool = True) -> None:
    """One JSON document on stdout, indented (the same document the HTTP edge returns)."""
    typer.echo(json.dumps(doc, indent=2, ensure_ascii=ensure_ascii))


def stdout_console() -> Console:
    """A rich console on stdout (plain text when stdout is not a terminal)."""
    from rich.console import Console

    return Console()


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A rich table of strings on stdout."""
    from rich.table import Table

    table = Table(*headers)
    for row in rows:
        table.add_row(*row)
    stdout_console().print(table)


def stderr_is_tty() -> bool:
    """Whether progress is shown: only on a terminal, so pipes and tests see summaries only."""
    return sys.stderr.isatty()


def progress_bar(*columns: str | ProgressColumn, transient: bool) -> Progress:
    """A rich progress display on stderr, disabled unless stderr is a terminal."""
    from rich.console import Console
    from rich.progress import Progress

    return Progress(*columns, console=Console(stderr=True), disable=not stderr_is_tty(),
                    transient=transient)
