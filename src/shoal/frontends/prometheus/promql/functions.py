"""PromQL functions over instant vectors: math, clamping, label rewriting, sorting,
`histogram_quantile` over classic `le` buckets (Prometheus 2.x `bucketQuantile`: buckets
with equal bounds coalesced, counts forced monotonic, linear interpolation within the
bucket), all over every step at once.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from shoal.frontends.prometheus.promql.errors import PromQLExecutionError
from shoal.frontends.prometheus.promql.model import NAME, Labels, Vectors, drop_name, make_labels
from shoal.frontends.prometheus.promql.regex import RegexError, compile_anchored

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")

MATH = {
    "abs": np.abs, "ceil": np.ceil, "floor": np.floor, "exp": np.exp, "ln": np.log,
    "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt, "sgn": np.sign,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "deg": np.degrees,
    "rad": np.radians,
}


def math_function(name: str, vec: Vectors) -> Vectors:
    with np.errstate(all="ignore"):
        values = MATH[name](vec.values)
    labels = [drop_name(x) for x in vec.labels]
    return Vectors(labels, values, vec.present.copy()).with_labels(labels)


def round_(vec: Vectors, to_nearest: np.ndarray) -> Vectors:
    """Go's `math.Floor(v*inverse+0.5) / inverse`, `inverse = 1/to_nearest`."""
    inverse = 1.0 / to_nearest[None, :]
    with np.errstate(all="ignore"):
        values = np.floor(vec.values * inverse + 0.5) / inverse
    labels = [drop_name(x) for x in vec.labels]
    return Vectors(labels, values, vec.present.copy()).with_labels(labels)


def clamp(vec: Vectors, lo: np.ndarray | None, hi: np.ndarray | None) -> Vectors:
    values = vec.values
    present = vec.present.copy()
    with np.errstate(all="ignore"):
        if lo is not None and hi is not None:
            present &= ~(hi < lo)[None, :]
        if hi is not None:
            values = np.where(np.isnan(values), values, np.minimum(values, hi[None, :]))
            values = np.where(np.isnan(hi)[None, :], np.nan, values)
        if lo is not None:
            values = np.where(np.isnan(values), values, np.maximum(values, lo[None, :]))
            values = np.where(np.isnan(lo)[None, :], np.nan, values)
    labels = [drop_name(x) for x in vec.labels]
    return Vectors(labels, values, present).with_labels(labels)


def _check_label_name(name: str, function: str) -> None:
    if not _LABEL_NAME.match(name):
        raise PromQLExecutionError(f"invalid destination label name in {function}(): {name}")


def expand(template: str, match: Any) -> str:
    """Go's `Regexp.ExpandString`: `$1`, `${1}`, `$name`, `${name}`, `$$`."""
    out: list[str] = []
    i = 0
    while i < len(template):
        c = template[i]
        if c != "$" or i + 1 >= len(template):
            out.append(c)
            i += 1
            continue
        nxt = template[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
            continue
        if nxt == "{":
            end = template.find("}", i + 2)
            name = template[i + 2:end] if end > 0 else ""
            if end < 0 or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                out.append(c)
                i += 1
                continue
            i = end + 1
        else:
            m = re.match(r"[A-Za-z0-9_]+", template[i + 1:])
            if m is None:
                out.append(c)
                i += 1
                continue
            name = m.group(0)
            i += 1 + len(name)
        try:
            group = match.group(int(name) if name.isdigit() else name)
        except IndexError:
            group = None
        out.append(group or "")
    return "".join(out)


def _set_label(labels: dict[str, str], name: str, value: str) -> None:
    """Prometheus's rule for a computed label: an empty value removes it."""
    if value:
        labels[name] = value
    else:
        labels.pop(name, None)


def label_replace(vec: Vectors, dst: str, replacement: str, src: str, regex: str) -> Vectors:
    try:
        pattern = compile_anchored(regex)
    except RegexError as e:
        raise PromQLExecutionError(
            f"invalid regular expression in label_replace(): {regex}: {e}") from None
    _check_label_name(dst, "label_replace")
    labels = []
    for lab in vec.labels:
        d = dict(lab)
        m = pattern.fullmatch(d.get(src, ""))
        if m is not None:
            _set_label(d, dst, expand(replacement, m))
        labels.append(make_labels(d))
    return Vectors(labels, vec.values, vec.present).with_labels(labels)


def label_join(vec: Vectors, dst: str, sep: str, srcs: list[str]) -> Vectors:
    _check_label_name(dst, "label_join")
    labels = []
    for lab in vec.labels:
        d = dict(lab)
        _set_label(d, dst, sep.join(d.get(s, "") for s in srcs))
        labels.append(make_labels(d))
    return Vectors(labels, vec.values, vec.present).with_labels(labels)


def _bucket_quantile(q: float, bounds: np.ndarray, counts: np.ndarray) -> float:
    """Prometheus 2.x `bucketQuantile` over buckets sorted by upper bound."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(bounds) == 0 or not (math.isinf(bounds[-1]) and bounds[-1] > 0):
        return math.nan
    # coalesce equal bounds, then force counts monotonic
    uniq, start = np.unique(bounds, return_index=True)
    if len(uniq) != len(bounds):
        counts = np.add.reduceat(counts, start)
        bounds = uniq
    counts = np.fmax.accumulate(counts)
    if len(bounds) < 2:
        return math.nan
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = int(np.searchsorted(counts[:-1], rank, side="left"))
    if b == len(bounds) - 1:
        return float(bounds[-2])
    if b == 0 and bounds[0] <= 0:
        return float(bounds[0])
    start_bound = 0.0
    end_bound = float(bounds[b])
    count = float(counts[b])
    if b > 0:
        start_bound = float(bounds[b - 1])
        count -= float(counts[b - 1])
        rank -= float(counts[b - 1])
    return start_bound + (end_bound - start_bound) * (rank / count)


def histogram_quantile(q: np.ndarray, vec: Vectors) -> Vectors:
    steps = vec.values.shape[1]
    groups: dict[Labels, list[tuple[float, int]]] = {}
    for i, lab in enumerate(vec.labels):
        d = dict(lab)
        le = d.pop("le", None)
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        d.pop(NAME, None)
        groups.setdefault(make_labels(d), []).append((bound, i))
    out_labels, out_values, out_present = [], [], []
    for key, members in groups.items():
        members.sort()
        bounds = np.array([b for b, _ in members])
        rows = [i for _, i in members]
        v = vec.values[rows]
        p = vec.present[rows]
        values = np.zeros(steps)
        present = p.any(axis=0)
        for j in np.flatnonzero(present).tolist():
            sel = p[:, j]
            values[j] = _bucket_quantile(float(q[j]), bounds[sel], v[sel, j].copy())
        out_labels.append(key)
        out_values.append(values)
        out_present.append(present)
    if not out_labels:
        return Vectors.empty(steps)
    return Vectors(out_labels, np.vstack(out_values), np.vstack(out_present))
