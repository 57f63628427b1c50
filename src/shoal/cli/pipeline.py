"""`shoal pipeline kafka|filedrop`: the bulk ingest pipelines (SPEC §7.3, §7.4, §11).

Each pipeline's command lives in its own module (`pipeline_kafka`, `pipeline_filedrop`) and
registers itself on `pipeline_app`; this module only owns the group.
"""

from __future__ import annotations

import importlib

import typer

pipeline_app = typer.Typer(help="Bulk ingest pipelines on Spark (Kafka, file-drop)",
                           no_args_is_help=True)

for _name in ("shoal.cli.pipeline_kafka", "shoal.cli.pipeline_filedrop"):
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as e:  # a pipeline not built yet is simply not offered
        if e.name != _name:
            raise
