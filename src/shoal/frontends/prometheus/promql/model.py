"""The values a PromQL expression evaluates to, over all evaluation steps at once.

An instant vector over N steps is a `Vectors`: one row per distinct label set, a float
matrix `values` (rows x steps) and a boolean matrix `present` saying at which steps the
series has a sample. Evaluating every step at once lets each operator work on whole numpy
arrays instead of one sample at a time; an instant query is simply N = 1. A scalar is an
array of N floats; a string is a `str`. `RawSeries` holds a selected series' samples in time
order (the input of range functions and of `x[5m]` at an instant).

Labels are a sorted tuple of (name, value) pairs, `__name__` included, empty values left
out (Prometheus treats an empty label as an absent one).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from shoal.frontends.prometheus.promql.errors import PromQLExecutionError

NAME = "__name__"
Labels = tuple[tuple[str, str], ...]


def make_labels(items: Mapping[str, str] | Iterable[tuple[str, str]]) -> Labels:
    pairs = items.items() if isinstance(items, Mapping) else items
    return tuple(sorted((k, v) for k, v in pairs if v != ""))


@functools.lru_cache(maxsize=1 << 16)
def drop_name(labels: Labels) -> Labels:
    """`labels` without the metric name (cached: label sets recur in every query)."""
    return tuple(p for p in labels if p[0] != NAME)


def labels_text(labels: Labels) -> str:
    """Prometheus's `labels.Labels.String()`: `{a="x", b="y"}`."""
    inner = ", ".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class RawSeries:
    """One series' samples, sorted by time, staleness markers removed or flagged."""

    labels: Labels
    ts: np.ndarray          # int64 ms
    values: np.ndarray      # float64
    stale: np.ndarray       # bool: a staleness marker (its value is meaningless)


@dataclass
class Vectors:
    """An instant vector at every step: rows are series (distinct label sets)."""

    labels: list[Labels]
    values: np.ndarray       # float64 (rows, steps)
    present: np.ndarray      # bool (rows, steps)
    sample_ts: np.ndarray | None = None   # int64 ms of each selected sample (selectors)

    @staticmethod
    def empty(steps: int) -> Vectors:
        return Vectors([], np.zeros((0, steps)), np.zeros((0, steps), dtype=bool))

    def __len__(self) -> int:
        return len(self.labels)

    def compact(self) -> Vectors:
        """Without rows that have no sample at any step."""
        keep = self.present.any(axis=1)
        if keep.all():
            return self
        idx = np.flatnonzero(keep)
        return Vectors([self.labels[i] for i in idx], self.values[idx], self.present[idx],
                       None if self.sample_ts is None else self.sample_ts[idx])

    def with_labels(self, labels: list[Labels]) -> Vectors:
        """The same samples under new labels; rows that now share a label set are merged,
        which is an error where two of them have a sample at the same step."""
        return merge_rows(labels, self.values, self.present)


def merge_rows(labels: list[Labels], values: np.ndarray, present: np.ndarray,
               message: str = "vector cannot contain metrics with the same labelset"
               ) -> Vectors:
    """Rows with equal labels merged into one (their samples must not overlap in time)."""
    index: dict[Labels, int] = {}
    groups: list[list[int]] = []
    for i, lab in enumerate(labels):
        j = index.setdefault(lab, len(groups))
        if j == len(groups):
            groups.append([i])
        else:
            groups[j].append(i)
    if len(groups) == len(labels):
        return Vectors(list(labels), values, present)
    out_v = np.zeros((len(groups), values.shape[1]))
    out_p = np.zeros((len(groups), values.shape[1]), dtype=bool)
    for j, rows in enumerate(groups):
        if len(rows) == 1:
            out_v[j], out_p[j] = values[rows[0]], present[rows[0]]
            continue
        p = present[rows]
        if (p.sum(axis=0) > 1).any():
            raise PromQLExecutionError(message)
        out_p[j] = p.any(axis=0)
        pick = np.argmax(p, axis=0)
        out_v[j] = values[rows][pick, np.arange(values.shape[1])]
    return Vectors(list(index), out_v, out_p)


def format_value(v: float) -> str:
    """A sample value as Prometheus's JSON writes it (`strconv.FormatFloat(v, 'f', -1)`)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    text = repr(v)
    if "e" in text or "E" in text:
        return np.format_float_positional(v, trim="-")
    return text


def format_time(ms: int) -> float | int:
    """A timestamp in the API's unix seconds (milliseconds kept exactly)."""
    return ms // 1000 if ms % 1000 == 0 else ms / 1000
