"""PromQL binary operators: arithmetic, comparisons (filtering or `bool`), and/or/unless, with
vector matching (`on`/`ignoring`, `group_left`/`group_right`), over all steps at once.

Matching is decided per step, as Prometheus decides it per evaluation: two series of the
"one" side with the same matching labels are an error only at a step where both have a
sample. Errors are worded as Prometheus 2.x words them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from shoal.frontends.prometheus.promql.errors import PromQLExecutionError
from shoal.frontends.prometheus.promql.model import (NAME, Labels, Vectors, drop_name, labels_text,
                                                     merge_rows)

ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^", "atan2"})
COMPARISON = frozenset({"==", "!=", ">", "<", ">=", "<="})
SET_OPS = frozenset({"and", "or", "unless"})


@dataclass(frozen=True)
class Matching:
    card: str = "one-to-one"          # one-to-one | many-to-one | one-to-many | many-to-many
    on: bool = False
    labels: tuple[str, ...] = ()
    include: tuple[str, ...] = field(default_factory=tuple)


def compute(op: str, a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """`a op b` elementwise (Go float semantics: x/0 is ±Inf or NaN; % is fmod)."""
    with np.errstate(all="ignore"):
        if op == "+":
            return np.add(a, b)
        if op == "-":
            return np.subtract(a, b)
        if op == "*":
            return np.multiply(a, b)
        if op == "/":
            return np.divide(a, b)
        if op == "%":
            return np.fmod(a, b)
        if op == "^":
            return np.power(a, b)
        if op == "atan2":
            return np.arctan2(a, b)
        if op == "==":
            return np.equal(a, b)
        if op == "!=":
            return np.not_equal(a, b)
        if op == ">":
            return np.greater(a, b)
        if op == "<":
            return np.less(a, b)
        if op == ">=":
            return np.greater_equal(a, b)
        if op == "<=":
            return np.less_equal(a, b)
    raise PromQLExecutionError(f"operator {op!r} not allowed here")


def scalar_scalar(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(compute(op, a, b), dtype=np.float64)


def vector_scalar(op: str, vec: Vectors, scalar: np.ndarray, *, scalar_left: bool,
                  return_bool: bool) -> Vectors:
    s = scalar[None, :]
    lhs, rhs = (s, vec.values) if scalar_left else (vec.values, s)
    result = compute(op, lhs, rhs)
    if op in COMPARISON:
        if return_bool:
            return Vectors([drop_name(x) for x in vec.labels], result.astype(np.float64),
                           vec.present.copy()).with_labels([drop_name(x) for x in vec.labels])
        return Vectors(list(vec.labels), vec.values, vec.present & result).compact()
    labels = [drop_name(x) for x in vec.labels]
    return Vectors(labels, result, vec.present.copy()).with_labels(labels)


def signature(labels: Labels, on: bool, names: Sequence[str]) -> Labels:
    if on:
        keep = set(names)
        return tuple(p for p in labels if p[0] in keep)
    drop = set(names) | {NAME}
    return tuple(p for p in labels if p[0] not in drop)


def _sig_presence(sigs: list[Labels], present: np.ndarray, index: dict[Labels, int]
                  ) -> np.ndarray:
    out = np.zeros((len(index), present.shape[1]), dtype=bool)
    for i, s in enumerate(sigs):
        out[index[s]] |= present[i]
    return out


def set_operation(op: str, lhs: Vectors, rhs: Vectors, m: Matching) -> Vectors:
    lsig = [signature(x, m.on, m.labels) for x in lhs.labels]
    rsig = [signature(x, m.on, m.labels) for x in rhs.labels]
    index: dict[Labels, int] = {}
    for s in lsig + rsig:
        index.setdefault(s, len(index))
    if op in ("and", "unless"):
        rp = _sig_presence(rsig, rhs.present, index)
        hit = np.array([rp[index[s]] for s in lsig]).reshape(lhs.present.shape)
        present = lhs.present & (hit if op == "and" else ~hit)
        return Vectors(list(lhs.labels), lhs.values, present).compact()
    lp = _sig_presence(lsig, lhs.present, index)
    hit = np.array([lp[index[s]] for s in rsig]).reshape(rhs.present.shape)
    labels = list(lhs.labels) + list(rhs.labels)
    return merge_rows(labels, np.vstack([lhs.values, rhs.values]),
                      np.vstack([lhs.present, rhs.present & ~hit])).compact()


def _result_labels(left: Labels, right: Labels, op: str, m: Matching,
                   return_bool: bool) -> Labels:
    lb = dict(left)
    if op in ARITHMETIC or return_bool:
        lb.pop(NAME, None)
    if m.card == "one-to-one":
        if m.on:
            keep = set(m.labels)
            lb = {k: v for k, v in lb.items() if k in keep}
        else:
            for name in m.labels:
                lb.pop(name, None)
    if m.include:
        rb = dict(right)
        for name in m.include:
            if rb.get(name, ""):
                lb[name] = rb[name]
            else:
                lb.pop(name, None)
    return tuple(sorted(lb.items()))


def vector_vector(op: str, lhs: Vectors, rhs: Vectors, m: Matching, *,
                  return_bool: bool) -> Vectors:
    """Arithmetic or comparison between two instant vectors."""
    steps = lhs.values.shape[1]
    swapped = m.card == "one-to-many"
    many, one = (rhs, lhs) if swapped else (lhs, rhs)
    msig = [signature(x, m.on, m.labels) for x in many.labels]
    osig = [signature(x, m.on, m.labels) for x in one.labels]
    by_sig: dict[Labels, list[int]] = {}
    for i, s in enumerate(osig):
        by_sig.setdefault(s, []).append(i)
    side = "left" if swapped else "right"
    for rows in by_sig.values():
        if len(rows) > 1:
            both = one.present[rows].sum(axis=0) > 1
            if both.any():
                j = int(np.argmax(both))
                a, b = [one.labels[r] for r in rows if one.present[r, j]][:2]
                matched = signature(a, m.on, m.labels) if m.on else drop_name(
                    tuple(p for p in a if p[0] not in set(m.labels)))
                raise PromQLExecutionError(
                    f"found duplicate series for the match group {labels_text(matched)} on "
                    f"the {side} hand-side of the operation: [{labels_text(a)}, "
                    f"{labels_text(b)}];many-to-many matching not allowed: matching labels "
                    f"must be unique on one side")
    out_labels: list[Labels] = []
    out_values: list[np.ndarray] = []
    out_present: list[np.ndarray] = []
    out_sig: list[Labels] = []
    for i, s in enumerate(msig):
        for r in by_sig.get(s, ()):
            mask = many.present[i] & one.present[r]
            if not mask.any():
                continue
            vl, vr = (one.values[r], many.values[i]) if swapped else (many.values[i],
                                                                        one.values[r])
            result = compute(op, vl, vr)
            if op in COMPARISON:
                if return_bool:
                    value = result.astype(np.float64)
                else:
                    mask = mask & result
                    value = vl
            else:
                value = result
            if not mask.any():
                continue
            out_labels.append(_result_labels(many.labels[i], one.labels[r], op, m,
                                             return_bool))
            out_values.append(value)
            out_present.append(mask)
            out_sig.append(s)
    if not out_labels:
        return Vectors.empty(steps)
    present = np.vstack(out_present)
    if m.card == "one-to-one":
        _check_unique(out_sig, present, "multiple matches for labels: many-to-one matching "
                                        "must be explicit (group_left/group_right)")
    else:
        _check_unique(out_labels, present, "multiple matches for labels: grouping labels "
                                           "must ensure unique matches")
    return merge_rows(out_labels, np.vstack(out_values), present)


def _check_unique(keys: list[Labels], present: np.ndarray, message: str) -> None:
    rows: dict[Labels, list[int]] = {}
    for i, k in enumerate(keys):
        rows.setdefault(k, []).append(i)
    for idx in rows.values():
        if len(idx) > 1 and (present[idx].sum(axis=0) > 1).any():
            raise PromQLExecutionError(message)
