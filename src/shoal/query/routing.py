"""Which engine answers a SELECT: the embedded one or Spark (docs/sql.md).

The choice is made after planning, from what stages 1-2 left to read and from the
statement itself. The embedded engine takes every statement it can answer exactly as Spark
would and finish sooner: it streams its inputs and spills past its memory, so what it is
given is bounded by the work, not by memory.

- `spark`: Spark, always.
- `local`: the embedded engine, or a 400 (`LocalEngineRefusedError`) naming why it must
  not: a statement it cannot answer exactly as Spark would (a construct documented as
  Spark-only is one), or scans whose projected bytes exceed `local_scan_max_bytes`.
- `auto` (the default): the embedded engine, unless
  (a) the statement is not vetted (`shoal.query.embedded.transpile`),
  (b) the configured Spark master is a cluster with more cores than this machine (more
      hands than the embedded engine has; `Cluster`), or
  (c) the scans' projected bytes exceed `local_scan_max_bytes` (several GB by default:
      past it a cluster's parallel scan is worth its start).
  Then Spark answers.

The projected bytes estimate what the scans fetch: the surviving blocks' share of their
extents' sizes, times the projected columns' share of a row (`ScanSpec.projected_bytes`;
the format records no per-column sizes). Every answer's stats and `EXPLAIN` carry `engine`
and `engine_reason`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from shoal.errors import QueryError
from shoal.query.embedded.transpile import LocalStatement, NotLocal

EngineMode = Literal["auto", "local", "spark"]
ENGINE_MODES: tuple[str, ...] = get_args(EngineMode)


class EngineChoiceError(QueryError):
    """An engine name other than auto, local or spark."""

    code = "bad_engine"

    def __init__(self, value: object) -> None:
        self.value = value
        super().__init__(f"engine must be one of {', '.join(ENGINE_MODES)}, got {value!r}")


class LocalEngineRefusedError(QueryError):
    """`engine=local` for a statement the embedded engine must not answer (400)."""

    code = "local_engine_refused"

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the local engine cannot answer this statement: {reason}; "
                         "run it with engine=auto or engine=spark")


@dataclass(frozen=True)
class Route:
    engine: Literal["local", "spark"]
    reason: str
    statement: LocalStatement | None = None


def engine_mode(value: str | None, default: str = "auto") -> EngineMode:
    """Validate an engine name (None = `default`)."""
    chosen = default if value is None or value == "" else value
    chosen = chosen.strip().lower() if isinstance(chosen, str) else chosen
    if chosen not in ENGINE_MODES:
        raise EngineChoiceError(value if value not in (None, "") else default)
    return chosen  # type: ignore[return-value]


def fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Cluster:
    """The configured Spark master when it is not local: its name, the cores its settings
    give a session (None: they do not say) and this machine's cores."""

    master: str
    cores: int | None
    machine_cores: int

    def bigger(self) -> str | None:
        """Why Spark should answer instead (None: the embedded engine is no worse off)."""
        if self.cores is None:
            return (f"the Spark master {self.master} is a cluster whose cores its settings "
                    "do not say (spark.cores.max); it may outrun this machine")
        if self.cores > self.machine_cores:
            return (f"the Spark master {self.master} is a cluster with {self.cores} cores, "
                    f"more than this machine's {self.machine_cores}")
        return None


def choose(mode: EngineMode, *, projected_bytes: int, max_bytes: int,
           vet: Callable[[], LocalStatement], cluster: Cluster | None = None) -> Route:
    """The engine for a planned SELECT. `vet()` transpiles it or raises `NotLocal`;
    `cluster`: the Spark master when it is not local."""
    if mode == "spark":
        return Route("spark", "engine=spark requested")
    try:
        statement = vet()
    except NotLocal as e:
        if mode == "local":
            raise LocalEngineRefusedError(e.reason) from None
        return Route("spark", f"not answered identically by the local engine: {e.reason}")
    over = projected_bytes > max_bytes
    size = (f"projected scans {fmt_bytes(projected_bytes)} "
            f"{'over' if over else 'within'} the local scan limit {fmt_bytes(max_bytes)}")
    if over:
        if mode == "local":
            raise LocalEngineRefusedError(size + " (SHOAL_LOCAL_SCAN_MAX_BYTES)")
        return Route("spark", size)
    if mode == "local":
        return Route("local", f"engine=local requested; {size}", statement)
    bigger = cluster.bigger() if cluster is not None else None
    if bigger is not None:
        return Route("spark", bigger)
    return Route("local", size, statement)


def handed_off(route: Route, error: Exception) -> Route:
    """The route after the embedded engine failed on a statement in `auto` mode: Spark
    answers (with its own answer or its own error)."""
    return Route("spark", f"the local engine failed ({error}); answered by Spark")
