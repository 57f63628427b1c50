"""Functions over range vectors (`rate(x[5m])`, `avg_over_time(x[5m])`, ...), Prometheus 2.x
semantics, evaluated for every step at once.

A window is closed, [t - range, t] (Prometheus 2.x; 3.x left-opened it), with `t` the step's
time minus the selector's offset (or its `@` time). Staleness markers are not samples of a
window. Per series the window of every step is found with two `searchsorted` calls; the
functions then work on the windows' first/last indices, prefix sums or `reduceat`, so a
series costs a few numpy passes, not a loop per sample. The rarer functions (quantile,
stddev, deriv, ...) loop over windows, each a numpy slice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from shoal.frontends.prometheus.promql.errors import PromQLBadDataError
from shoal.frontends.prometheus.promql.model import RawSeries, Vectors, drop_name, make_labels

KEEPS_NAME = frozenset({"last_over_time"})
RANGE_FUNCTIONS = frozenset({
    "rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear", "resets",
    "changes", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "last_over_time", "quantile_over_time", "stddev_over_time",
    "stdvar_over_time", "present_over_time", "absent_over_time"})


PACKED = frozenset({"rate", "increase", "delta", "irate", "idelta", "count_over_time",
                    "present_over_time", "last_over_time", "sum_over_time", "avg_over_time",
                    "min_over_time", "max_over_time", "resets", "changes"})
_SHIFT = 42          # series index << 42 | ms since the earliest sample: one sorted key


def evaluate(name: str, series: Sequence[RawSeries], te: np.ndarray, range_ms: int,
             params: Sequence[np.ndarray]) -> Vectors:
    """`name` over each series' windows ending at `te` (int64 ms, one per step)."""
    if name in PACKED and series:
        return _evaluate_packed(name, series, te, range_ms, params)
    steps = len(te)
    rows, values, present = [], [], []
    for s in series:
        keep = ~s.stale
        ts, v = (s.ts, s.values) if keep.all() else (s.ts[keep], s.values[keep])
        lo = np.searchsorted(ts, te - range_ms, side="left")
        hi = np.searchsorted(ts, te, side="right")
        out, ok = _one(name, ts, v, lo, hi, te, range_ms, params, np.zeros(1, np.int64))
        if ok.any():
            rows.append(s.labels if name in KEEPS_NAME else drop_name(s.labels))
            values.append(out)
            present.append(ok)
    if not rows:
        return Vectors.empty(steps)
    return Vectors(rows, np.vstack(values), np.vstack(present)).with_labels(rows)


def _evaluate_packed(name: str, series: Sequence[RawSeries], te: np.ndarray, range_ms: int,
                     params: Sequence[np.ndarray]) -> Vectors:
    """Every series at once: their samples concatenated under one sorted key (series index,
    time), so one `searchsorted` finds the windows of every series at every step."""
    packed = getattr(series, "counts", None)
    if packed is not None:          # storage's PackedSeries: the arrays as read
        ts, v, stale = series.ts, series.values, series.stale  # type: ignore[attr-defined]
        counts = np.asarray(packed, dtype=np.int64)
    else:
        ts = np.concatenate([s.ts for s in series])
        v = np.concatenate([s.values for s in series])
        stale = np.concatenate([s.stale for s in series])
        counts = np.array([len(s.ts) for s in series], dtype=np.int64)
    owner = np.repeat(np.arange(len(series), dtype=np.int64), counts)
    if stale.any():                 # markers are not samples of a window
        keep = ~stale
        ts, v, owner = ts[keep], v[keep], owner[keep]
        counts = np.bincount(owner, minlength=len(series)).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    steps = len(te)
    if len(ts) == 0:
        return Vectors.empty(steps)
    base = int(ts.min())
    key = (owner << _SHIFT) | (ts - base)
    row = (np.arange(len(series), dtype=np.int64) << _SHIFT)[:, None]
    span = (1 << _SHIFT) - 1                      # times past it clamp to the series' end
    lo = np.searchsorted(key, row | np.clip(te - range_ms - base, 0, span)[None, :], "left")
    top = np.clip(te - base, -1, span)[None, :]
    hi = np.where(top < 0, lo, np.searchsorted(key, row | np.maximum(top, 0), "right"))
    te2 = np.broadcast_to(te[None, :], lo.shape)
    out, ok = _one(name, ts, v, lo, hi, te2, range_ms, params, starts)
    has = np.asarray(ok.any(axis=1), dtype=bool)
    labels = [s.labels if name in KEEPS_NAME else drop_name(s.labels)
              for s, h in zip(series, has.tolist(), strict=True) if h]
    if not labels:
        return Vectors.empty(steps)
    return Vectors(labels, out[has], ok[has]).with_labels(labels)


def _one(name: str, ts: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray,
         te: np.ndarray, range_ms: int, params: Sequence[np.ndarray], starts: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:
    """`name` over windows [lo, hi) of `v` (any shape of lo/hi/te); `starts`: where each
    series begins in `v` (no reset or change is counted across a series boundary)."""
    n = hi - lo
    last = np.clip(hi - 1, 0, max(len(v) - 1, 0))
    if len(v) == 0:
        return np.zeros(lo.shape), np.zeros(lo.shape, dtype=bool)
    with np.errstate(all="ignore"):
        if name in ("rate", "increase", "delta"):
            return _extrapolated(ts, v, lo, hi, te, range_ms, counter=name != "delta",
                                 per_second=name == "rate", starts=starts)
        if name in ("irate", "idelta"):
            ok = n >= 2
            prev = np.clip(hi - 2, 0, len(v) - 1)
            diff = v[last] - v[prev]
            if name == "irate":
                diff = np.where(v[last] < v[prev], v[last], diff)
                interval = (ts[last] - ts[prev]) / 1000.0
                ok &= interval != 0
                diff = diff / np.where(interval == 0, 1.0, interval)
            return diff, ok
        if name == "count_over_time":
            return n.astype(np.float64), n > 0
        if name == "present_over_time":
            return np.ones(lo.shape), n > 0
        if name == "last_over_time":
            return v[last], n > 0
        if name in ("sum_over_time", "avg_over_time", "min_over_time", "max_over_time"):
            ufunc = {"sum_over_time": np.add, "avg_over_time": np.add,
                     "min_over_time": np.fmin, "max_over_time": np.fmax}[name]
            out = _reduce_windows(ufunc, v, lo.ravel(), hi.ravel()).reshape(lo.shape)
            if name == "avg_over_time":
                out = out / np.where(n > 0, n, 1)
            return out, n > 0
        if name in ("resets", "changes"):
            if name == "resets":
                hit = v[1:] < v[:-1]
            else:
                hit = (v[1:] != v[:-1]) & ~(np.isnan(v[1:]) & np.isnan(v[:-1]))
            hit[starts[starts > 0] - 1] = False          # no pair across two series
            prefix = np.concatenate(([0, 0], np.cumsum(hit)))   # prefix[k]: hits at 1..k-1
            top = len(v)
            count = (prefix[np.clip(np.maximum(hi, lo + 1), 0, top)]
                     - prefix[np.clip(np.minimum(lo + 1, hi), 0, top)])
            return np.maximum(count, 0).astype(np.float64), n > 0
    fn = _WINDOW_FUNCTIONS.get(name)
    if fn is None:
        raise PromQLBadDataError(f"unknown function with name \"{name}\"")
    assert lo.ndim == 1, "window functions run one series at a time"
    result = np.zeros(len(te), dtype=np.float64)
    ok = n > 0
    for j in np.flatnonzero(ok).tolist():
        p = [float(x[j]) for x in params]
        res = fn(ts[lo[j]:hi[j]], v[lo[j]:hi[j]], int(te[j]), p)
        if res is None:
            ok[j] = False
        else:
            result[j] = res
    return result, ok


def _reduce_windows(ufunc: np.ufunc, v: np.ndarray, lo: np.ndarray, hi: np.ndarray
                    ) -> np.ndarray:
    """`ufunc.reduce` over each [lo, hi) window (empty windows give garbage; masked)."""
    padded = np.append(v, 0.0)
    idx = np.empty(2 * len(lo), dtype=np.int64)
    idx[0::2] = np.minimum(lo, len(v))
    idx[1::2] = np.minimum(np.maximum(hi, lo + 1), len(v))
    return ufunc.reduceat(padded, idx)[0::2]


def _extrapolated(ts: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  te: np.ndarray, range_ms: int, *, counter: bool, per_second: bool,
                  starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prometheus 2.x `extrapolatedRate`: the change over the window (counter resets added
    back), extrapolated towards the window's edges by at most half an average interval
    (and never below a counter's zero point)."""
    n = hi - lo
    ok = n >= 2
    a = np.clip(lo, 0, len(v) - 1)
    b = np.clip(hi - 1, 0, len(v) - 1)
    first, last = v[a], v[b]
    t_first, t_last = ts[a], ts[b]
    result = last - first
    if counter:
        drops = v[1:] < v[:-1]
        drops[starts[starts > 0] - 1] = False       # no reset across two series
        if drops.any():
            corr = np.zeros(len(v))
            corr[1:][drops] = v[:-1][drops]
            prefix = np.concatenate(([0.0], np.cumsum(corr)))  # prefix[k] = sum corr[:k]
            result += np.where(ok, prefix[np.clip(hi, 0, len(v))]
                               - prefix[np.clip(lo + 1, 0, len(v))], 0.0)
    sampled = (t_last - t_first) / 1000.0
    to_start = (t_first - (te - range_ms)) / 1000.0
    to_end = (te - t_last) / 1000.0
    average = sampled / np.maximum(n - 1, 1)
    if counter:
        zero_ok = (result > 0) & (first >= 0)
        to_zero = sampled * (first / np.where(result == 0, 1.0, result))
        np.copyto(to_start, to_zero, where=zero_ok & (to_zero < to_start))
    threshold = average * 1.1
    half = average / 2
    interval = sampled + np.where(to_start < threshold, to_start, half)
    interval += np.where(to_end < threshold, to_end, half)
    interval /= np.where(sampled == 0, 1.0, sampled)
    if per_second:
        interval /= range_ms / 1000.0
    result *= interval
    return result, ok


# ---- per-window functions (a loop over windows) ---------------------------------------------
def _linear_regression(ts: np.ndarray, v: np.ndarray, intercept_ms: int
                       ) -> tuple[float, float]:
    if (v == v[0]).all():
        if math.isinf(v[0]):
            return math.nan, math.nan
        return 0.0, float(v[0])
    x = (ts - intercept_ms) / 1000.0
    xm, ym = x.mean(), v.mean()
    dx = x - xm
    slope = float((dx * (v - ym)).sum() / (dx * dx).sum())
    return slope, float(ym - slope * xm)


def _deriv(ts: np.ndarray, v: np.ndarray, _te: int, _p: list[float]) -> float | None:
    if len(v) < 2:
        return None
    return _linear_regression(ts, v, int(ts[0]))[0]


def _predict_linear(ts: np.ndarray, v: np.ndarray, te: int, p: list[float]) -> float | None:
    if len(v) < 2:
        return None
    slope, intercept = _linear_regression(ts, v, te)
    return slope * p[0] + intercept


def quantile(q: float, values: np.ndarray) -> float:
    """Prometheus's `quantile`: linear interpolation between the closest ranks."""
    if len(values) == 0 or math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    s = np.sort(values)
    rank = q * (len(s) - 1)
    lower = max(0, math.floor(rank))
    upper = min(len(s) - 1, lower + 1)
    weight = rank - math.floor(rank)
    return float(s[lower] * (1 - weight) + s[upper] * weight)


def _quantile_over_time(_ts: np.ndarray, v: np.ndarray, _te: int, p: list[float]) -> float:
    return quantile(p[0], v)


def _stdvar(_ts: np.ndarray, v: np.ndarray, _te: int, _p: list[float]) -> float:
    return float(np.mean((v - v.mean()) ** 2))


def _stddev(ts: np.ndarray, v: np.ndarray, te: int, p: list[float]) -> float:
    return math.sqrt(_stdvar(ts, v, te, p))


_WINDOW_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray, int, list[float]],
                                      float | None]] = {
    "deriv": _deriv, "predict_linear": _predict_linear,
    "quantile_over_time": _quantile_over_time, "stddev_over_time": _stddev,
    "stdvar_over_time": _stdvar,
}


def absent_over_time(series: Sequence[RawSeries], te: np.ndarray, range_ms: int,
                     labels: dict[str, str]) -> Vectors:
    """1 where no series has a sample in the window, with the selector's equality labels."""
    any_sample = np.zeros(len(te), dtype=bool)
    for s in series:
        ts = s.ts[~s.stale]
        lo = np.searchsorted(ts, te - range_ms, side="left")
        hi = np.searchsorted(ts, te, side="right")
        any_sample |= hi > lo
    return Vectors([make_labels(labels)], np.ones((1, len(te))), ~any_sample[None, :]
                   ).compact()
