"""Evaluating a parsed PromQL expression (promql-parser's tree) over shoal's series.

`Evaluator(storage, steps_ms, ...)` evaluates a node at every step of `steps_ms` at once
(an instant query has one step) and returns one of: `Vectors` (an instant vector at each
step), a numpy array (a scalar per step), a `str`, or a `RangeValue` (a range vector: a
matrix selector or subquery, only as a function's argument or an instant query's answer).

Selectors: a sample is found at step t (minus `offset`, or at `@`) as the last sample at or
before t no older than the lookback delta (5 m by default); a staleness marker there ends
the series until its next sample. Each selector reads its series once for all steps, over
[first step - range - lookback, last step] (shifted by its offset / `@`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import promql_parser as pp

from shoal.frontends.prometheus.promql import functions as fn
from shoal.frontends.prometheus.promql import rangefuncs
from shoal.frontends.prometheus.promql.aggregate import aggregate
from shoal.frontends.prometheus.promql.binary import (SET_OPS, Matching, scalar_scalar,
                                                      set_operation, vector_scalar, vector_vector)
from shoal.frontends.prometheus.promql.errors import PromQLBadDataError, PromQLTooManySamplesError
from shoal.frontends.prometheus.promql.model import (NAME, Labels, RawSeries, Vectors, drop_name,
                                                     make_labels)
from shoal.frontends.prometheus.promql.storage import LabelMatcher, PromStorage, SampleBudget

_MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_CARD = {"OneToOne": "one-to-one", "ManyToOne": "many-to-one", "OneToMany": "one-to-many",
         "ManyToMany": "many-to-many"}
DATE_FUNCTIONS = frozenset({"minute", "hour", "day_of_week", "day_of_month", "day_of_year",
                            "days_in_month", "month", "year"})


@dataclass
class RangeValue:
    """A range vector: per series its samples, and the windows' ends (`te`) and length."""

    series: list[RawSeries]
    te: np.ndarray
    range_ms: int


Value = Vectors | np.ndarray | str | RangeValue


def _ms(node: Any, attr: str) -> int:
    """A duration attribute of a node in ms (promql-parser turns it into a timedelta, which
    fails past timedelta's range: a bad_data error then, not a crash)."""
    try:
        delta = getattr(node, attr, None)
    except (ValueError, OverflowError) as e:
        raise PromQLBadDataError(f"{attr} duration out of range: {e}") from None
    return 0 if delta is None else round(delta.total_seconds() * 1000)


def selector_matchers(node: Any) -> list[list[LabelMatcher]]:
    """The matcher sets of a vector selector (more than one for `{a="x" or b="y"}`)."""
    base = []
    if node.name is not None:
        base.append(LabelMatcher(NAME, "=", node.name))
    plain = [LabelMatcher(m.name, _MATCH_OPS[str(m.op).split(".")[-1]], m.value)
             for m in node.matchers.matchers]
    if node.matchers.or_matchers:
        return [base + plain + [LabelMatcher(m.name, _MATCH_OPS[str(m.op).split(".")[-1]],
                                             m.value) for m in alt]
                for alt in node.matchers.or_matchers]
    return [base + plain]


def unwrap(node: Any) -> Any:
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node


class Evaluator:
    """Evaluates nodes at `steps` (int64 ms); `start_ms`/`end_ms` are the query's for
    `@ start()` / `@ end()`."""

    def __init__(self, storage: PromStorage, steps: np.ndarray, *, start_ms: int,
                 end_ms: int, lookback_ms: int, budget: SampleBudget,
                 subquery_step_ms: int = 60_000) -> None:
        self.storage = storage
        self.steps = steps
        self.n = len(steps)
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.lookback_ms = lookback_ms
        self.budget = budget
        self.subquery_step_ms = subquery_step_ms
        # the output order of the last topk/bottomk evaluated (an instant query's answer
        # keeps it when that aggregation is the root)
        self.topk_order: list[Labels] | None = None

    # ---- dispatch --------------------------------------------------------------------------
    def eval(self, node: Any) -> Value:
        self.budget.check_time()
        if isinstance(node, pp.NumberLiteral):
            return np.full(self.n, float(node.val))
        if isinstance(node, pp.StringLiteral):
            return str(node.val)
        if isinstance(node, pp.ParenExpr):
            return self.eval(node.expr)
        if isinstance(node, pp.UnaryExpr):
            return self._negate(self.eval(node.expr))
        if isinstance(node, pp.VectorSelector):
            return self._vector_selector(node)
        if isinstance(node, pp.MatrixSelector):
            return self._matrix_selector(node)
        if isinstance(node, pp.SubqueryExpr):
            return self._subquery(node)
        if isinstance(node, pp.Call):
            return self._call(node)
        if isinstance(node, pp.AggregateExpr):
            return self._aggregate(node)
        if isinstance(node, pp.BinaryExpr):
            return self._binary(node)
        raise PromQLBadDataError(f"unsupported expression {type(node).__name__}")

    def vector(self, node: Any) -> Vectors:
        value = self.eval(node)
        if not isinstance(value, Vectors):
            raise PromQLBadDataError(f"expected an instant vector, got {_kind(value)}")
        return value

    def scalar(self, node: Any) -> np.ndarray:
        value = self.eval(node)
        if not isinstance(value, np.ndarray):
            raise PromQLBadDataError(f"expected a scalar, got {_kind(value)}")
        return value

    def string(self, node: Any) -> str:
        value = self.eval(node)
        if not isinstance(value, str):
            raise PromQLBadDataError(f"expected a string, got {_kind(value)}")
        return value

    # ---- selectors -------------------------------------------------------------------------
    def _times(self, node: Any) -> np.ndarray:
        """Each step's reference time of a selector: the step (or its `@`) minus offset."""
        at = getattr(node, "at", None)
        base = self.steps
        if at is not None:
            kind = str(at.type).split(".")[-1]
            if kind == "Start":
                at_ms = self.start_ms
            elif kind == "End":
                at_ms = self.end_ms
            else:
                at_ms = round(at.at.timestamp() * 1000)
            base = np.full(self.n, at_ms, dtype=np.int64)
        return base - _ms(node, "offset")

    def _select(self, node: Any, lo_ms: int, hi_ms: int) -> list[RawSeries]:
        sets = selector_matchers(node)
        if len(sets) == 1:
            return self.storage.select(sets[0], lo_ms, hi_ms, self.budget)
        merged: dict[Labels, RawSeries] = {}
        for matchers in sets:
            for s in self.storage.select(matchers, lo_ms, hi_ms, self.budget):
                merged.setdefault(s.labels, s)
        return [merged[k] for k in sorted(merged)]

    def _vector_selector(self, node: Any) -> Vectors:
        te = self._times(node)
        series = self._select(node, int(te.min()) - self.lookback_ms, int(te.max()))
        return self.instant_of(series, te)

    def instant_of(self, series: Sequence[RawSeries], te: np.ndarray) -> Vectors:
        labels, values, present, stamps = [], [], [], []
        for s in series:
            if len(s.ts) == 0:
                continue
            idx = np.searchsorted(s.ts, te, side="right") - 1
            ok = idx >= 0
            idx = np.clip(idx, 0, len(s.ts) - 1)
            ok &= (s.ts[idx] >= te - self.lookback_ms) & ~s.stale[idx]
            if ok.any():
                labels.append(s.labels)
                values.append(s.values[idx])
                present.append(ok)
                stamps.append(s.ts[idx])
        if not labels:
            return Vectors.empty(self.n)
        return Vectors(labels, np.vstack(values), np.vstack(present), np.vstack(stamps))

    def _matrix_selector(self, node: Any) -> RangeValue:
        vs = node.vector_selector
        te = self._times(vs)
        range_ms = _ms(node, "range")
        series = self._select(vs, int(te.min()) - range_ms, int(te.max()))
        return RangeValue(series, te, range_ms)

    def _subquery(self, node: Any) -> RangeValue:
        te = self._times(node)
        range_ms = _ms(node, "range")
        step = _ms(node, "step") or self.subquery_step_ms
        lo = int(te.min()) - range_ms
        first = (lo // step) * step
        if first < lo:
            first += step
        count = (int(te.max()) - first) // step + 1
        if count > self.budget.limit - self.budget.used:
            # the inner query alone would hold more points than the sample limit allows
            raise PromQLTooManySamplesError(self.budget.limit)
        inner_steps = np.arange(first, int(te.max()) + 1, step, dtype=np.int64)
        if len(inner_steps) == 0:
            return RangeValue([], te, range_ms)
        inner = Evaluator(self.storage, inner_steps, start_ms=self.start_ms,
                          end_ms=self.end_ms, lookback_ms=self.lookback_ms,
                          budget=self.budget, subquery_step_ms=self.subquery_step_ms)
        value = inner.eval(node.expr)
        if isinstance(value, np.ndarray):
            value = Vectors([()], value[None, :], np.ones((1, len(value)), dtype=bool))
        if not isinstance(value, Vectors):
            raise PromQLBadDataError(f"subquery is only allowed on instant vector, got "
                                     f"{_kind(value)}")
        series = []
        for i, lab in enumerate(value.labels):
            keep = value.present[i]
            series.append(RawSeries(lab, inner_steps[keep], value.values[i][keep],
                                    np.zeros(int(keep.sum()), dtype=bool)))
        self.budget.take(int(value.present.sum()))
        return RangeValue(series, te, range_ms)

    # ---- operators -------------------------------------------------------------------------
    def _negate(self, value: Value) -> Value:
        if isinstance(value, np.ndarray):
            return -value
        if isinstance(value, Vectors):
            labels = [drop_name(x) for x in value.labels]
            return Vectors(labels, -value.values, value.present).with_labels(labels)
        raise PromQLBadDataError(f"unary expression only allowed on expressions of type "
                                 f"scalar or instant vector, got {_kind(value)}")

    def _binary(self, node: Any) -> Value:
        op = str(node.op)
        mod = node.modifier
        return_bool = bool(mod.return_bool) if mod is not None else False
        lhs = self.eval(node.lhs)
        rhs = self.eval(node.rhs)
        if isinstance(lhs, np.ndarray) and isinstance(rhs, np.ndarray):
            return scalar_scalar(op, lhs, rhs)
        if isinstance(lhs, Vectors) and isinstance(rhs, np.ndarray):
            return vector_scalar(op, lhs, rhs, scalar_left=False, return_bool=return_bool)
        if isinstance(lhs, np.ndarray) and isinstance(rhs, Vectors):
            return vector_scalar(op, rhs, lhs, scalar_left=True, return_bool=return_bool)
        if not (isinstance(lhs, Vectors) and isinstance(rhs, Vectors)):
            raise PromQLBadDataError(f"binary expression must contain only scalar and "
                                     f"instant vector types, got {_kind(lhs)} and {_kind(rhs)}")
        matching = Matching()
        if mod is not None:
            card = _CARD[str(mod.card).split(".")[-1]]
            on, labels = False, ()
            if mod.matching is not None:
                on = str(mod.matching.type).split(".")[-1] == "Include"
                labels = tuple(mod.matching.labels)
            matching = Matching(card=card, on=on, labels=labels,
                                include=tuple(mod.group_labels or ()))
        if op in SET_OPS:
            return set_operation(op, lhs, rhs, matching)
        if matching.card == "many-to-many":
            matching = Matching("one-to-one", matching.on, matching.labels, matching.include)
        return vector_vector(op, lhs, rhs, matching, return_bool=return_bool)

    def _aggregate(self, node: Any) -> Vectors:
        op = str(node.op)
        names: list[str] = []
        without = False
        if node.modifier is not None:
            names = list(node.modifier.labels)
            without = str(node.modifier.type).split(".")[-1] == "Without"
        param: np.ndarray | str | None = None
        if node.param is not None:
            param = self.string(node.param) if op == "count_values" else self.scalar(
                node.param)
        vec = self.vector(node.expr)
        result, order = aggregate(op, vec, names, without, param)
        if order is not None:
            self.topk_order = order
        return result

    # ---- functions -------------------------------------------------------------------------
    def _call(self, node: Any) -> Value:
        name = node.func.name
        args = list(node.args)
        if name in rangefuncs.RANGE_FUNCTIONS:
            matrix_at = 1 if name == "quantile_over_time" else 0
            params = [self.scalar(a) for i, a in enumerate(args) if i != matrix_at]
            rv = self.eval(args[matrix_at])
            if not isinstance(rv, RangeValue):
                raise PromQLBadDataError(f"expected type range vector in call to function "
                                         f"\"{name}\", got {_kind(rv)}")
            self.budget.take(sum(len(s.ts) for s in rv.series))
            if name == "absent_over_time":
                return rangefuncs.absent_over_time(rv.series, rv.te, rv.range_ms,
                                                   self._absent_labels(args[0]))
            return rangefuncs.evaluate(name, rv.series, rv.te, rv.range_ms, params)
        if name == "time":
            return self.steps / 1000.0
        if name == "pi":
            return np.full(self.n, math.pi)
        if name == "vector":
            return Vectors([()], self.scalar(args[0])[None, :].copy(),
                           np.ones((1, self.n), dtype=bool))
        if name == "scalar":
            vec = self.vector(args[0])
            count = vec.present.sum(axis=0)
            first = np.argmax(vec.present, axis=0) if len(vec) else np.zeros(self.n, int)
            value = (vec.values[first, np.arange(self.n)] if len(vec)
                     else np.full(self.n, np.nan))
            return np.where(count == 1, value, np.nan)
        if name == "absent":
            vec = self.vector(args[0])
            none = np.asarray(~vec.present.any(axis=0) if len(vec)
                              else np.ones(self.n, dtype=bool))
            return Vectors([make_labels(self._absent_labels(args[0]))], np.ones((1, self.n)),
                           none.reshape(1, self.n)).compact()
        if name == "timestamp":
            vec = self.vector(args[0])
            if vec.sample_ts is not None and isinstance(unwrap(args[0]), pp.VectorSelector):
                stamps = vec.sample_ts / 1000.0
            else:
                stamps = np.broadcast_to(self.steps / 1000.0, vec.values.shape)
            labels = [drop_name(x) for x in vec.labels]
            return Vectors(labels, np.array(stamps, dtype=np.float64),
                           vec.present).with_labels(labels)
        if name in fn.MATH:
            return fn.math_function(name, self.vector(args[0]))
        if name == "round":
            nearest = self.scalar(args[1]) if len(args) > 1 else np.ones(self.n)
            return fn.round_(self.vector(args[0]), nearest)
        if name in ("clamp", "clamp_min", "clamp_max"):
            vec = self.vector(args[0])
            if name == "clamp":
                return fn.clamp(vec, self.scalar(args[1]), self.scalar(args[2]))
            if name == "clamp_min":
                return fn.clamp(vec, self.scalar(args[1]), None)
            return fn.clamp(vec, None, self.scalar(args[1]))
        if name in ("sort", "sort_desc"):
            return self.vector(args[0])
        if name == "label_replace":
            return fn.label_replace(self.vector(args[0]), *[self.string(a) for a in args[1:]])
        if name == "label_join":
            strings = [self.string(a) for a in args[1:]]
            return fn.label_join(self.vector(args[0]), strings[0], strings[1], strings[2:])
        if name == "histogram_quantile":
            return fn.histogram_quantile(self.scalar(args[0]), self.vector(args[1]))
        if name in DATE_FUNCTIONS:
            return self._date(name, args)
        raise PromQLBadDataError(f"function \"{name}\" is not supported by shoal")

    def _absent_labels(self, arg: Any) -> dict[str, str]:
        """absent()'s labels: the selector's equality matchers, less names matched twice."""
        node = unwrap(arg)
        if isinstance(node, pp.MatrixSelector):
            node = node.vector_selector
        if not isinstance(node, pp.VectorSelector):
            return {}
        out: dict[str, str] = {}
        seen: set[str] = set()
        for m in selector_matchers(node)[0]:
            if m.name == NAME:
                continue
            if m.op == "=" and m.name not in seen:
                out[m.name] = m.value
            elif m.op == "=":
                out.pop(m.name, None)
            seen.add(m.name)
        return out

    def _date(self, name: str, args: list[Any]) -> Vectors:
        if args:
            vec = self.vector(args[0])
            labels = [drop_name(x) for x in vec.labels]
            seconds, present = vec.values, vec.present
        else:
            labels = [()]
            seconds = (self.steps / 1000.0)[None, :]
            present = np.ones((1, self.n), dtype=bool)
        dt = (np.nan_to_num(seconds) * 1000).astype("datetime64[ms]")
        days = dt.astype("datetime64[D]")
        months = dt.astype("datetime64[M]")
        years = dt.astype("datetime64[Y]")
        if name == "minute":
            out = (dt.astype("datetime64[m]").astype(np.int64) % 60)
        elif name == "hour":
            out = dt.astype("datetime64[h]").astype(np.int64) % 24
        elif name == "day_of_week":
            out = (days.astype(np.int64) + 4) % 7
        elif name == "day_of_month":
            out = (days - months.astype("datetime64[D]")).astype(np.int64) + 1
        elif name == "day_of_year":
            out = (days - years.astype("datetime64[D]")).astype(np.int64) + 1
        elif name == "days_in_month":
            out = ((months + 1).astype("datetime64[D]") - months.astype("datetime64[D]")
                   ).astype(np.int64)
        elif name == "month":
            out = months.astype(np.int64) % 12 + 1
        else:
            out = years.astype(np.int64) + 1970
        values = np.where(np.isnan(seconds), np.nan, out.astype(np.float64))
        return Vectors(labels, values, present.copy()).with_labels(labels)


def _kind(value: object) -> str:
    if isinstance(value, Vectors):
        return "instant vector"
    if isinstance(value, RangeValue):
        return "range vector"
    if isinstance(value, str):
        return "string"
    return "scalar"
