"""PromQL queries over shoal: parse (promql-parser), evaluate, shape the answer.

`PromQL(storage).instant(expr, time_ms)` and `.range(expr, start_ms, end_ms, step_ms)`
return a `PromResult` whose `data()` is the `data` member of Prometheus's HTTP API answer
(`{"resultType": ..., "result": [...]}`), with values formatted as Prometheus formats them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import promql_parser as pp

from shoal.frontends.prometheus.promql.bounds import check_bounds
from shoal.frontends.prometheus.promql.errors import PromQLBadDataError, PromQLParseError
from shoal.frontends.prometheus.promql.errpos import line_col, locate
from shoal.frontends.prometheus.promql.evaluator import Evaluator, RangeValue, unwrap
from shoal.frontends.prometheus.promql.model import Labels, Vectors, format_time, format_value
from shoal.frontends.prometheus.promql.storage import PromStorage, SampleBudget

DEFAULT_LOOKBACK_MS = 300_000
DEFAULT_MAX_SAMPLES = 50_000_000


def parse(expr: str) -> Any:
    """promql-parser's tree of `expr`; a `PromQLParseError` with its message otherwise
    (also, before parsing, for an expression past the bounds of `bounds.check_bounds`)."""
    check_bounds(expr)
    try:
        return pp.parse(expr)
    except ValueError as e:
        offset, message = locate(expr, str(e), _parses)
        line, col = line_col(expr, offset)
        raise PromQLParseError(message, line=line, column=col) from None
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise PromQLParseError(f"{type(e).__name__}: {e}") from None


def _parses(text: str) -> bool:
    try:
        pp.parse(text)
    except ValueError:
        return False
    return True


@dataclass
class PromResult:
    result_type: str                      # vector | matrix | scalar | string
    vector: list[tuple[Labels, int, float]] = field(default_factory=list)
    matrix: list[tuple[Labels, np.ndarray, np.ndarray]] = field(default_factory=list)
    scalar: tuple[int, float | str] | None = None
    samples: int = 0

    def data(self) -> dict[str, Any]:
        """Prometheus's `data`: resultType and result, values as strings."""
        result: Any
        if self.result_type == "vector":
            result = [{"metric": dict(lab), "value": [format_time(t), format_value(v)]}
                      for lab, t, v in self.vector]
        elif self.result_type == "matrix":
            result = [{"metric": dict(lab),
                       "values": [[format_time(int(t)), format_value(float(v))]
                                  for t, v in zip(ts.tolist(), vs.tolist(), strict=True)]}
                      for lab, ts, vs in self.matrix]
        else:
            assert self.scalar is not None
            t, v = self.scalar
            result = [format_time(t), v if isinstance(v, str) else format_value(v)]
        return {"resultType": self.result_type, "result": result}


class PromQL:
    """PromQL over a `PromStorage` with Prometheus's lookback delta and sample limit."""

    def __init__(self, storage: PromStorage, *, lookback_ms: int = DEFAULT_LOOKBACK_MS,
                 max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        self.storage = storage
        self.lookback_ms = lookback_ms
        self.max_samples = max_samples

    def _evaluator(self, steps: np.ndarray, start_ms: int, end_ms: int,
                   timeout_s: float | None) -> Evaluator:
        budget = SampleBudget(self.max_samples, timeout_s=timeout_s)
        return Evaluator(self.storage, steps, start_ms=start_ms, end_ms=end_ms,
                         lookback_ms=self.lookback_ms, budget=budget)

    def instant(self, expr: str, time_ms: int, *, timeout_s: float | None = None
                ) -> PromResult:
        """`expr` at `time_ms`; `timeout_s` bounds the evaluation (`QueryTimeoutError`)."""
        node = parse(expr)
        steps = np.array([time_ms], dtype=np.int64)
        ev = self._evaluator(steps, time_ms, time_ms, timeout_s)
        value = ev.eval(node)
        used = ev.budget.used
        if isinstance(value, str):
            return PromResult("string", scalar=(time_ms, value), samples=used)
        if isinstance(value, np.ndarray):
            return PromResult("scalar", scalar=(time_ms, float(value[0])), samples=used)
        if isinstance(value, RangeValue):
            matrix = []
            t = int(value.te[0])
            for s in value.series:
                keep = (~s.stale) & (s.ts >= t - value.range_ms) & (s.ts <= t)
                if keep.any():
                    matrix.append((s.labels, s.ts[keep], s.values[keep]))
            return PromResult("matrix", matrix=matrix, samples=used)
        rows = [(lab, time_ms, float(value.values[i, 0]))
                for i, lab in enumerate(value.labels) if value.present[i, 0]]
        return PromResult("vector", vector=_ordered(node, rows, ev), samples=used)

    def range(self, expr: str, start_ms: int, end_ms: int, step_ms: int, *,
              timeout_s: float | None = None) -> PromResult:
        """`expr` at start, start + step, ... up to end (a matrix)."""
        node = parse(expr)
        if step_ms <= 0:
            raise PromQLBadDataError("zero or negative query resolution step widths are not "
                                     "accepted. Try a positive integer")
        if end_ms < start_ms:
            raise PromQLBadDataError("end timestamp must not be before start time")
        steps = np.arange(start_ms, end_ms + 1, step_ms, dtype=np.int64)
        ev = self._evaluator(steps, start_ms, end_ms, timeout_s)
        value = ev.eval(node)
        if isinstance(value, (str, RangeValue)):
            kind = "string" if isinstance(value, str) else "range vector"
            raise PromQLBadDataError(f"invalid expression type \"{kind}\" for range query, "
                                     f"must be Scalar or instant Vector")
        if isinstance(value, np.ndarray):
            value = Vectors([()], value[None, :], np.ones((1, len(steps)), dtype=bool))
        matrix = []
        for i in np.argsort([str(x) for x in value.labels], kind="stable").tolist():
            keep = value.present[i]
            if keep.any():
                matrix.append((value.labels[i], steps[keep], value.values[i][keep]))
        matrix.sort(key=lambda m: m[0])
        return PromResult("matrix", matrix=matrix, samples=ev.budget.used)


def _ordered(node: Any, rows: list[tuple[Labels, int, float]], ev: Evaluator
             ) -> list[tuple[Labels, int, float]]:
    """An instant vector in the order Prometheus gives it where that order is defined:
    `sort`/`sort_desc` (stable, by value) and `topk`/`bottomk` (per group, by value)."""
    root = unwrap(node)
    if isinstance(root, pp.Call) and root.func.name in ("sort", "sort_desc"):
        desc = root.func.name == "sort_desc"

        def key(row: tuple[Labels, int, float]) -> tuple[int, float]:
            v = row[2]
            return (0, 0.0) if v != v else (1, -v if desc else v)
        return sorted(rows, key=key)
    if isinstance(root, pp.AggregateExpr) and str(root.op) in ("topk", "bottomk"):
        position = {lab: i for i, lab in enumerate(ev.topk_order or [])}
        return sorted(rows, key=lambda r: position.get(r[0], len(position)))
    return rows
