"""Which engine answers a SELECT: the embedded one or Spark (docs/sql.md).

The choice is made after planning, from what stages 1-2 left to read and from the
statement itself:

- `spark`: Spark, always.
- `local`: the embedded engine, or a 400 (`LocalEngineRefusedError`) naming why it must
  not: a statement it cannot answer exactly as Spark would, or scans whose planned bytes
  exceed `local_query_max_bytes` (the embedded engine holds its inputs in memory, so the
  budget bounds a query's memory).
- `auto` (the default): the embedded engine when the statement is vetted
  (`shoal.query.embedded.transpile`) and the planned bytes fit the budget; Spark otherwise.

The planned bytes are an upper bound of what the scans read: the surviving blocks' share of
their extents' sizes (a projection reads less). Every answer's stats and `EXPLAIN` carry
`engine` and `engine_reason`.
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


def choose(mode: EngineMode, *, planned_bytes: int, budget: int,
           vet: Callable[[], LocalStatement]) -> Route:
    """The engine for a planned SELECT. `vet()` transpiles it or raises `NotLocal`."""
    if mode == "spark":
        return Route("spark", "engine=spark requested")
    try:
        statement = vet()
    except NotLocal as e:
        if mode == "local":
            raise LocalEngineRefusedError(e.reason) from None
        return Route("spark", f"not answered identically by the local engine: {e.reason}")
    size = (f"planned scans {fmt_bytes(planned_bytes)} "
            f"{'over' if planned_bytes > budget else 'within'} the local budget "
            f"{fmt_bytes(budget)}")
    if planned_bytes > budget:
        if mode == "local":
            raise LocalEngineRefusedError(size + " (SHOAL_LOCAL_QUERY_MAX_BYTES)")
        return Route("spark", size)
    if mode == "local":
        return Route("local", f"engine=local requested; {size}", statement)
    return Route("local", size, statement)


def handed_off(route: Route, error: Exception) -> Route:
    """The route after the embedded engine failed on a statement in `auto` mode: Spark
    answers (with its own answer or its own error)."""
    return Route("spark", f"the local engine failed ({error}); answered by Spark")
