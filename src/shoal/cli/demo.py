"""`shoal demo`: the end-to-end demo of `shoal.cli.demo_run`, imported only when it runs.

Exits with the demo's code: 0, 1 after a one-line error, 130 when interrupted."""

from __future__ import annotations

from typing import Annotated

import typer


def demo_command(
    keep: Annotated[bool, typer.Option(
        help="Keep the demo's temporary directory (data and server log)")] = False,
    port: Annotated[int | None, typer.Option(
        "--port", help="Port for the demo's server (default: a free one)")] = None,
) -> None:
    """Run the end-to-end demo: a server in a temporary directory, HTTP ingest, queries."""
    from shoal.cli.demo_run import run_demo

    raise typer.Exit(run_demo(keep=keep, port=port))
