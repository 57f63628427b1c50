"""PromQL aggregations (`sum by (job) (...)`, `topk(3, ...)`, ...) over all steps at once.

Rows are grouped by their result labels (`by`: only those labels; `without`: all but those
and the metric name); each group reduces its rows per step with numpy. `topk`/`bottomk`
keep the chosen input series (labels unchanged) at the steps where they were chosen;
`count_values` makes one series per distinct value. Semantics follow Prometheus 2.x: `min`/
`max` ignore NaN unless every value is NaN, `stddev`/`stdvar` are population statistics,
`quantile` interpolates between ranks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from shoal.frontends.prometheus.promql.errors import PromQLBadDataError
from shoal.frontends.prometheus.promql.model import NAME, Labels, Vectors, format_value, make_labels
from shoal.frontends.prometheus.promql.rangefuncs import quantile


def group_labels(labels: Labels, names: Sequence[str], without: bool) -> Labels:
    return _group_labels(labels, tuple(names), without)


@functools.lru_cache(maxsize=1 << 16)
def _group_labels(labels: Labels, names: tuple[str, ...], without: bool) -> Labels:
    """Cached: the same series are grouped again by every query that aggregates them."""
    if without:
        drop = set(names) | {NAME}
        return tuple(p for p in labels if p[0] not in drop)
    keep = set(names)
    return tuple(p for p in labels if p[0] in keep)


def aggregate(op: str, vec: Vectors, names: Sequence[str], without: bool,
              param: np.ndarray | str | None) -> tuple[Vectors, list[Labels] | None]:
    """The aggregation; for topk/bottomk also the output order of an instant query (label
    sets in Prometheus's order: groups in order of appearance, values sorted)."""
    steps = vec.values.shape[1]
    if len(vec) == 0:
        return Vectors.empty(steps), None
    keys = [group_labels(lab, names, without) for lab in vec.labels]
    index: dict[Labels, int] = {}
    gid = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
    groups = list(index)
    if op in ("topk", "bottomk"):
        return _topk(op, vec, gid, len(groups), param)
    if op == "count_values":
        return _count_values(vec, gid, groups, str(param)), None
    order = np.argsort(gid, kind="stable")
    gsorted = gid[order]
    starts = np.flatnonzero(np.concatenate(([True], gsorted[1:] != gsorted[:-1])))
    v = vec.values[order]
    p = vec.present[order]
    count = np.add.reduceat(p.astype(np.float64), starts, axis=0)
    out_p = count > 0
    with np.errstate(all="ignore"):
        if op == "sum":
            out = np.add.reduceat(np.where(p, v, 0.0), starts, axis=0)
        elif op == "count":
            out = count
        elif op == "group":
            out = np.ones_like(count)
        elif op == "avg":
            out = np.add.reduceat(np.where(p, v, 0.0), starts, axis=0) / np.maximum(count, 1)
        elif op in ("min", "max"):
            ufunc = np.fmin if op == "min" else np.fmax
            out = ufunc.reduceat(np.where(p, v, np.nan), starts, axis=0)
        elif op in ("stddev", "stdvar"):
            mean = np.add.reduceat(np.where(p, v, 0.0), starts, axis=0) / np.maximum(count, 1)
            dev = np.where(p, v - mean[gsorted], 0.0)
            out = np.add.reduceat(dev * dev, starts, axis=0) / np.maximum(count, 1)
            if op == "stddev":
                out = np.sqrt(out)
        elif op == "quantile":
            assert isinstance(param, np.ndarray)
            out = np.zeros_like(count)
            ends = np.append(starts[1:], len(gsorted))
            for g, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
                for j in np.flatnonzero(out_p[g]).tolist():
                    out[g, j] = quantile(float(param[j]), v[s:e, j][p[s:e, j]])
        else:
            raise PromQLBadDataError(f"unsupported aggregation {op}")
    return Vectors(groups, out, out_p).compact(), None


def _topk(op: str, vec: Vectors, gid: np.ndarray, ngroups: int, param: object
          ) -> tuple[Vectors, list[Labels]]:
    assert isinstance(param, np.ndarray)
    steps = vec.values.shape[1]
    k = np.where(np.isnan(param), 0, np.trunc(np.nan_to_num(param))).astype(np.int64)
    chosen = np.zeros_like(vec.present)
    instant_order: list[Labels] = []
    top = op == "topk"
    for g in range(ngroups):
        rows = np.flatnonzero(gid == g)
        v = vec.values[rows]
        p = vec.present[rows]
        nan = np.isnan(v)
        # Sort key: present before absent, numbers before NaN, then by value.
        val = np.where(nan | ~p, 0.0, -v if top else v)
        order = np.lexsort((val, nan, ~p), axis=0)    # best first along the rows
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(len(rows))[:, None].repeat(steps, 1),
                          axis=0)
        chosen[rows] = p & (rank < k[None, :])
        if steps == 1:
            instant_order.extend(vec.labels[int(rows[i])] for i in order[:, 0].tolist()
                                 if chosen[rows[i], 0])
    values = np.where(chosen, vec.values, 0.0)
    return Vectors(list(vec.labels), values, chosen).compact(), instant_order


def _count_values(vec: Vectors, gid: np.ndarray, groups: list[Labels], label: str
                  ) -> Vectors:
    steps = vec.values.shape[1]
    out: dict[Labels, np.ndarray] = {}
    for j in range(steps):
        rows = np.flatnonzero(vec.present[:, j])
        for r in rows.tolist():
            base = dict(groups[gid[r]])
            base[label] = format_value(float(vec.values[r, j]))
            key = make_labels(base)
            counts = out.setdefault(key, np.zeros(steps))
            counts[j] += 1
    if not out:
        return Vectors.empty(steps)
    values = np.vstack(list(out.values()))
    return Vectors(list(out), values, values > 0)
