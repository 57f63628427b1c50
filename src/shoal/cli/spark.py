"""`shoal spark pack`: the environment Spark executors run shoal with.

Writes shoal and its pinned dependencies as a `.tar.gz` (`shoal.query.spark.pack`) and prints the
two Spark settings that ship it; see docs/deployment.md.
"""

from __future__ import annotations

from typing import Annotated

import typer


def spark_group() -> None:
    """Spark deployment helpers."""


def pack_command(
        output: Annotated[str, typer.Option(
            "--output", "-o", help="Where to write the archive (.tar.gz)")] = "shoal-env.tar.gz",
        level: Annotated[int, typer.Option(
            "--level", min=1, max=9, help="gzip level (1 = fastest)")] = 1,
) -> None:
    """Pack shoal and its dependencies for Spark executors (spark.archives)."""
    from pathlib import Path

    from shoal.query.spark.cluster import ARCHIVE_ALIAS
    from shoal.query.spark.pack import pack_environment

    summary = pack_environment(output, compresslevel=level)
    where = Path(summary.path).resolve()
    typer.echo(f"packed {len(summary.distributions)} distribution(s), {summary.files} files, "
               f"{summary.bytes / 1e6:.1f} MB in {summary.seconds:.1f} s: {where}")
    typer.echo(f"every node needs the base interpreter {summary.python}; ship the pack with")
    typer.echo(f'SHOAL_SPARK_CONF="spark.archives={where}#{ARCHIVE_ALIAS};'
               f'spark.pyspark.python=./{ARCHIVE_ALIAS}/bin/python"')
