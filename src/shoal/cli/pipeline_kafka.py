"""`shoal pipeline kafka`: run the Kafka -> table streaming pipeline (docs/kafka.md, docs/cli.md).

    shoal pipeline kafka --bootstrap HOST:PORT --topic T [--topic ...] --table t
                         [--group g] [--mode drop|evolve|reject] [--until-idle SECONDS]

Without `--topic` the table's binding is used (`WITH (kafka_topic='...')`, and
`kafka_bootstrap` or `SHOAL_KAFKA_BOOTSTRAP`). Runs until interrupted (SIGINT/SIGTERM stop it
cleanly; SIGKILL loses nothing: the catalog holds the offsets), or with `--until-idle S`
until every partition is caught up and nothing arrived for S seconds. On a terminal a
progress line shows records/s and lag; the last line is a one-line summary.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from shoal.cli.common import SchemaModeOption, connect, stderr_is_tty

if TYPE_CHECKING:
    from shoal.frontends.kafka import PipelineProgress


def kafka_command(
    ctx: typer.Context,
    table: Annotated[str, typer.Option("--table", help="Target table")],
    bootstrap: Annotated[str | None, typer.Option(
        "--bootstrap", help="Kafka bootstrap servers HOST:PORT (else the table's binding "
        "or SHOAL_KAFKA_BOOTSTRAP)")] = None,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="Topic to consume (repeatable; default: the table's kafka_topic)")
    ] = None,
    group: Annotated[str | None, typer.Option(
        "--group", help="Consumer group (default shoal-<table>)")] = None,
    mode: Annotated[SchemaModeOption | None, typer.Option(
        "--mode", help="What to do with unknown fields (default: the table's kafka_mode, "
                       "else drop)")] = None,
    until_idle: Annotated[float | None, typer.Option(
        "--until-idle", help="Stop once caught up and idle for SECONDS")] = None,
    trigger: Annotated[float, typer.Option(
        "--trigger", help="Micro-batch interval in seconds")] = 0.5,
    max_records: Annotated[int, typer.Option(
        "--max-records-per-partition", help="Records per partition per micro-batch")
    ] = 50_000,
) -> None:
    """Consume Kafka topics into a table, exactly once (offsets commit with the data)."""
    from shoal.frontends.kafka import KafkaPipeline, resolve_binding
    from shoal.locations import LocationPolicy

    db = connect(ctx)
    try:
        binding = resolve_binding(db.catalog, table, bootstrap=bootstrap, topics=topic or (),
                                  group=group, mode=None if mode is None else mode.value,
                                  default_bootstrap=db.config.kafka_bootstrap,
                                  locations=LocationPolicy.from_config(db.config))
        tty = stderr_is_tty()

        def show(p: PipelineProgress) -> None:
            if tty:
                sys.stderr.write(f"\r{p.records:,} records  {p.rate:,.0f} records/s  "
                                 f"rows {p.rows:,}  rejected {p.rejects:,}  lag {p.lag:,}   ")
                sys.stderr.flush()

        pipeline = KafkaPipeline(db, binding, trigger_s=trigger,
                                 max_records_per_partition=max_records, on_progress=show)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: pipeline.stop())
        try:
            progress = pipeline.run(until_idle_s=until_idle)
        finally:
            if tty:
                sys.stderr.write("\n")
            pipeline.close()
    finally:
        db.close()
    typer.echo(progress.summary(table))
