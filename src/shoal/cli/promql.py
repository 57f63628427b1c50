"""`shoal promql '<expr>'`: a PromQL query over this shoal's Prometheus tables, in process
(or, with `--url`, in that server through its Prometheus API).

`--time T` (RFC 3339 or unix seconds; default now) runs an instant query; `--start S --end E
--step STEP` (step in seconds or a duration, e.g. `1m`) a range query. `--format table`
(default) prints one row per series and point, `json` the `data` document of Prometheus's
HTTP API.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any

import typer

from shoal.cli.common import connect, print_json, print_table, remote_of, spark_log_to_file


class PromFormat(StrEnum):
    """`shoal promql --format`."""

    TABLE = "table"
    JSON = "json"


def promql_command(
    ctx: typer.Context,
    expr: Annotated[str, typer.Argument(help="A PromQL expression")],
    at: Annotated[str | None, typer.Option("--time", help="Instant query time")] = None,
    start: Annotated[str | None, typer.Option("--start", help="Range query start")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Range query end")] = None,
    step: Annotated[str | None, typer.Option("--step", help="Range query step")] = None,
    fmt: Annotated[PromFormat, typer.Option("--format", "-f",
                                            help="Output format")] = PromFormat.TABLE,
) -> None:
    """Run a PromQL query (instant, or range with --start/--end/--step)."""
    ranged = (start, end, step)
    if any(v is not None for v in ranged) and (None in ranged or at is not None):
        raise typer.BadParameter("a range query takes --start, --end and --step, not --time")
    remote = remote_of(ctx)
    if remote is not None:      # the server parses the times as Prometheus's API does
        try:
            if start is not None and end is not None and step is not None:
                data = remote.promql_data(expr, start=start, end=end, step=step)
            else:
                data = remote.promql_data(expr, time=at if at is not None else time.time())
        finally:
            remote.close()
        _print(data, fmt)
        return
    from shoal.frontends.prometheus.promql.params import parse_duration_ms, parse_time

    db = connect(ctx)
    spark_log_to_file(db)
    try:
        if start is not None and end is not None and step is not None:
            result = db.promql(expr, start=parse_time(start, "start") / 1000,
                               end=parse_time(end, "end") / 1000,
                               step=parse_duration_ms(step, "step") / 1000)
        else:
            when = parse_time(at, "time") / 1000 if at is not None else time.time()
            result = db.promql(expr, time=when)
    finally:
        db.close()
    _print(result.data(), fmt)


def _print(data: dict[str, Any], fmt: PromFormat) -> None:
    if fmt == PromFormat.JSON:
        print_json(data)
        return
    kind, rows = data["resultType"], []
    if kind in ("scalar", "string"):
        rows.append(("", str(data["result"][0]), data["result"][1]))
    else:
        for series in data["result"]:
            labels = "{" + ", ".join(f'{k}="{v}"' for k, v in series["metric"].items()) + "}"
            points = [series["value"]] if kind == "vector" else series["values"]
            rows += [(labels, str(t), v) for t, v in points]
    print_table(["series", "time", "value"], rows)
