"""Reading series for PromQL from shoal's tables, through the query lane's pruning cascade.

Sources: the table `config.prometheus_table` and every other table whose schema has the
Prometheus layout's columns (`shoal.types.prometheus`: scrape jobs bind tables of their own
with that layout). A selector is answered in two reads per table, both planned by
`QueryEngine.read` (stage 1 catalog pruning, stage 2 block stats and membership filters):

1. the series: (`series_id`, `metric`, `labels`) of the blocks that may hold the metric
   (`metric` = name, or IN the names a `__name__` regex matches among the distinct names) in
   the time bounds; label matchers are then decided once per distinct series, not per
   sample. This index is cached per (table, snapshot, metric predicate, bounds).
2. the samples: (`series_id`, `_timestamp`, `value`, `special`) only, under the same
   predicate (plus `series_id IN (...)` when the matchers kept a few of many series), then
   sorted per series with numpy; a sample sent twice (same series and time) counts once.

Samples with neither a value nor a `special` (native histograms) are not read as floats:
PromQL here evaluates classic (float) series only. The OTLP metrics table, when given, adds
its points as series (`shoal.frontends.prometheus.promql.otlp` says how they map).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.format.base import And, BlockPredicate, Equals, InSet, TimeRange
from shoal.lru import MISSING, Lru
from shoal.frontends.prometheus.promql.errors import (PromQLBadDataError, PromQLTimeoutError,
                                                      PromQLTooManySamplesError)
from shoal.frontends.prometheus.promql.model import NAME, Labels, RawSeries, make_labels
from shoal.frontends.prometheus.promql.otlp import OtlpSeriesSource
from shoal.frontends.prometheus.promql.params import clamp_ms
from shoal.frontends.prometheus.promql.regex import RegexError, compile_anchored
from shoal.types.prometheus import STALE

if TYPE_CHECKING:
    from shoal.catalog.base import TableInfo

LAYOUT_COLUMNS = frozenset({"_timestamp", "metric", "labels", "series_id", "value", "special"})
SERIES_INSET_MAX = 2000     # beyond this many kept series, `series_id IN` stops helping
_decode = msgspec.json.Decoder(dict[str, Any]).decode


@dataclass(frozen=True)
class LabelMatcher:
    """One label matcher; regexes are fully anchored, as Prometheus anchors them."""

    name: str
    op: str          # "=", "!=", "=~", "!~"
    value: str

    def __post_init__(self) -> None:
        if self.op in ("=~", "!~"):
            try:
                object.__setattr__(self, "_regex", compile_anchored(self.value))
            except RegexError as e:
                raise PromQLBadDataError(
                    f"invalid regular expression {self.value!r} for label {self.name}: {e}"
                ) from None

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = self._regex.fullmatch(value) is not None  # type: ignore[attr-defined]
        return hit if self.op == "=~" else not hit


def matches_all(matchers: Sequence[LabelMatcher], labels: Labels) -> bool:
    got = dict(labels)
    return all(m.matches(got.get(m.name, "")) for m in matchers)


class Reader:
    """What the storage needs of the query lane: the tables and a pruned scan of one."""

    def __init__(self, tables: Callable[[], list[TableInfo]],
                 read: Callable[..., tuple[pa.Table, Any]]) -> None:
        self.tables = tables
        self.read = read


@dataclass(frozen=True)
class _Plan:
    """One table's part of a selection: the sample predicate and the matching series."""

    table: str
    snapshot: int
    predicate: BlockPredicate
    kept: dict[int, Labels]


class PromStorage:
    """Series and samples of the Prometheus-layout tables (see the module docstring)."""

    def __init__(self, reader: Reader, *, prometheus_table: str,
                 otlp_table: str | None = None, otlp_prefix: str = "",
                 max_samples: int = 50_000_000,
                 cache_bytes: int = 64 << 20) -> None:
        self.reader = reader
        self.prometheus_table = prometheus_table
        self.otlp = None if otlp_table is None else OtlpSeriesSource(reader.read, otlp_table,
                                                                        prefix=otlp_prefix)
        self.max_samples = max_samples
        self._series_cache = Lru(cache_bytes)

    # ---- tables ----------------------------------------------------------------------------
    def source_tables(self, infos: list[TableInfo] | None = None) -> list[tuple[str, int]]:
        """(name, current snapshot id) of every table with the samples layout."""
        out = []
        for info in self.reader.tables() if infos is None else infos:
            names = set(info.schema.names)
            if names >= LAYOUT_COLUMNS:      # prometheus_table and scrape jobs' tables
                out.append((info.name, info.current_snapshot_id))
        return out

    # ---- series ----------------------------------------------------------------------------
    def _otlp_snapshot(self, infos: list[TableInfo] | None = None) -> int | None:
        if self.otlp is None:
            return None
        for info in self.reader.tables() if infos is None else infos:
            if info.name == self.otlp.table:
                return info.current_snapshot_id
        return None

    def _otlp_series(self, matchers: Sequence[LabelMatcher], lo_ms: int, hi_ms: int,
                     infos: list[TableInfo] | None = None) -> list[RawSeries]:
        """The OTLP metrics table's series that match (`shoal.frontends.prometheus.promql.otlp`)."""
        lo_ms, hi_ms = clamp_ms(lo_ms), clamp_ms(hi_ms)
        snap = self._otlp_snapshot(infos)
        if snap is None or self.otlp is None:
            return []
        name_matchers = [m for m in matchers if m.name == NAME]
        wanted = {o for prom, otlp in self.otlp.names(snap, lo_ms, hi_ms).items()
                  if all(m.matches(prom) for m in name_matchers) for o in otlp}
        return [s for s in self.otlp.series(snap, sorted(wanted), lo_ms, hi_ms)
                if matches_all(matchers, s.labels)]

    def metric_names(self, lo_ms: int, hi_ms: int) -> list[str]:
        lo_ms, hi_ms = clamp_ms(lo_ms), clamp_ms(hi_ms)
        names: set[str] = set()
        snap = self._otlp_snapshot()
        if snap is not None and self.otlp is not None:
            names.update(self.otlp.names(snap, lo_ms, hi_ms))
        for table, snap in self.source_tables():
            t, _ = self.reader.read(table, TimeRange(lo_ms * 1_000_000, hi_ms * 1_000_000),
                                    snapshot_id=snap, columns=["metric"])
            names.update(x for x in pc.unique(t.column("metric")).to_pylist() if x)
        return sorted(names)

    def _name_predicate(self, matchers: Sequence[LabelMatcher], lo_ms: int,
                        hi_ms: int) -> BlockPredicate | None | bool:
        """The `metric` predicate of a selector: Equals, InSet, None (any name) or False
        (no name can match)."""
        name_matchers = [m for m in matchers if m.name == NAME]
        equal = [m.value for m in name_matchers if m.op == "="]
        if equal:
            return Equals("metric", equal[0])
        if not name_matchers:
            return None
        names = [n for n in self.metric_names(lo_ms, hi_ms)
                 if all(m.matches(n) for m in name_matchers)]
        if not names:
            return False
        return InSet("metric", tuple(names))

    def _series_of(self, table: str, snap: int, pred: BlockPredicate
                   ) -> dict[int, Labels]:
        key = (table, snap, pred)
        hit = self._series_cache.get(key)
        if hit is not MISSING:
            return dict(hit)
        t, _ = self.reader.read(table, pred, snapshot_id=snap,
                                columns=["series_id", "metric", "labels"])
        sids = t.column("series_id").to_numpy(zero_copy_only=False)
        out: dict[int, Labels] = {}
        if len(sids):
            _, first = np.unique(sids, return_index=True)
            metrics = t.column("metric").take(pa.array(first)).to_pylist()
            labels = t.column("labels").take(pa.array(first)).to_pylist()
            for i, m, lab in zip(first.tolist(), metrics, labels, strict=True):
                doc = _decode(lab) if isinstance(lab, (str, bytes)) else dict(lab or {})
                pairs = [(k, str(v)) for k, v in doc.items()]
                if m:
                    pairs.append((NAME, m))
                out[int(sids[i])] = make_labels(pairs)
        self._series_cache.put(key, tuple(out.items()), 64 + 96 * len(out))
        return out

    def series(self, matchers: Sequence[LabelMatcher], lo_ms: int, hi_ms: int
               ) -> dict[int, Labels]:
        """The series (id -> labels) that match and have samples in [lo, hi]."""
        out = {sid: lab for plan in self._plan(matchers, lo_ms, hi_ms)
               for sid, lab in plan.kept.items()}
        for s in self._otlp_series(matchers, lo_ms, hi_ms):
            out[hash(s.labels)] = s.labels
        return out

    def _plan(self, matchers: Sequence[LabelMatcher], lo_ms: int, hi_ms: int,
              infos: list[TableInfo] | None = None) -> list[_Plan]:
        lo_ms, hi_ms = clamp_ms(lo_ms), clamp_ms(hi_ms)
        name_pred = self._name_predicate(matchers, lo_ms, hi_ms)
        if name_pred is False:
            return []
        time_pred = TimeRange(lo_ms * 1_000_000, hi_ms * 1_000_000)
        pred: BlockPredicate = (time_pred if name_pred is None or name_pred is True
                                else And((name_pred, time_pred)))
        plans = []
        for table, snap in self.source_tables(infos):
            every = self._series_of(table, snap, pred)
            key = ("kept", table, snap, pred, tuple(matchers))
            hit = self._series_cache.get(key)
            if hit is MISSING:
                kept = {sid: lab for sid, lab in every.items() if matches_all(matchers, lab)}
                self._series_cache.put(key, kept, 64 + 16 * len(kept))
            else:
                kept = hit
            if not kept:
                continue
            sample_pred = pred
            if len(kept) < len(every) and len(kept) <= SERIES_INSET_MAX:
                sample_pred = And((pred, InSet("series_id", tuple(sorted(kept)))))
            plans.append(_Plan(table, snap, sample_pred, kept))
        return plans

    # ---- samples ---------------------------------------------------------------------------
    def select(self, matchers: Sequence[LabelMatcher], lo_ms: int, hi_ms: int,
               budget: SampleBudget | None = None) -> list[RawSeries]:
        """The matching series' samples in [lo_ms, hi_ms], sorted by labels."""
        lo_ms, hi_ms = clamp_ms(lo_ms), clamp_ms(hi_ms)
        infos = self.reader.tables()          # one catalog listing for the whole selection
        otlp = self._otlp_series(matchers, lo_ms, hi_ms, infos)
        if budget is not None:
            budget.take(sum(len(s.ts) for s in otlp))
        plans = self._plan(matchers, lo_ms, hi_ms, infos)
        labels: dict[int, Labels] = {}
        for plan in plans:
            labels.update(plan.kept)
        if not labels:
            return sorted(otlp, key=lambda r: r.labels)
        # Series are numbered 0..n-1 (a hash lookup in Arrow per row), so grouping the rows
        # by series is a radix sort of small integers.
        # numbered in label order, so the grouped rows are already the answer's order
        ordered = sorted(labels, key=labels.__getitem__)
        universe = np.array(ordered, dtype=np.int64)
        parts = []
        for plan in plans:
            t, _ = self.reader.read(plan.table, plan.predicate, snapshot_id=plan.snapshot,
                                    columns=["series_id", "_timestamp", "value", "special"])
            parts.append(_sample_arrays(t, universe, lo_ms, hi_ms))
        dense = np.concatenate([p[0] for p in parts])
        if budget is not None:
            budget.take(len(dense))
        ts = np.concatenate([p[1] for p in parts])
        val = np.concatenate([p[2] for p in parts])
        stale = np.concatenate([p[3] for p in parts])
        # Extents are read in time order and a series' rows keep their order: a stable sort
        # by series is usually enough; a full lexsort only when it is not.
        order = np.argsort(dense, kind="stable")
        dense, ts, val, stale = dense[order], ts[order], val[order], stale[order]
        if len(dense) > 1 and ((np.diff(ts) < 0) & (dense[1:] == dense[:-1])).any():
            order = np.lexsort((ts, dense))
            dense, ts, val, stale = dense[order], ts[order], val[order], stale[order]
        # A sample sent twice (same series, same time): keep the last one read.
        if len(dense) > 1:
            dup = (dense[1:] == dense[:-1]) & (ts[1:] == ts[:-1])
            if dup.any():
                keep = np.append(~dup, True)
                dense, ts, val, stale = dense[keep], ts[keep], val[keep], stale[keep]
        counts = np.bincount(dense, minlength=len(universe))
        ends = np.cumsum(counts)
        out = [RawSeries(labels[int(universe[i])], ts[e - c:e], val[e - c:e], stale[e - c:e])
               for i, (c, e) in enumerate(zip(counts.tolist(), ends.tolist(), strict=True))
               if c]
        if otlp:
            out += otlp
            out.sort(key=lambda r: r.labels)
            return out
        return PackedSeries(out, ts, val, stale, counts[counts > 0])


class PackedSeries(list[RawSeries]):
    """Series whose samples are consecutive slices of shared arrays, in the list's order
    (what `select` reads): range functions use the arrays as they are."""

    def __init__(self, series: list[RawSeries], ts: np.ndarray, values: np.ndarray,
                 stale: np.ndarray, counts: np.ndarray) -> None:
        super().__init__(series)
        self.ts = ts
        self.values = values
        self.stale = stale
        self.counts = counts


class SampleBudget:
    """Prometheus's `--query.max-samples` (the samples one query may load) and the query's
    deadline (`timeout_s`), checked as evaluation proceeds."""

    def __init__(self, limit: int, *, timeout_s: float | None = None) -> None:
        self.limit = limit
        self.used = 0
        self.timeout_s = timeout_s
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def take(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise PromQLTooManySamplesError(self.limit)
        self.check_time()

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            assert self.timeout_s is not None
            raise PromQLTimeoutError(self.timeout_s)


def _sample_arrays(t: pa.Table, universe: np.ndarray, lo_ms: int, hi_ms: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(series number in `universe`, ts_ms, value, stale) of the rows in [lo, hi] of the
    series in `universe` (stage 3 of the read)."""
    index = pc.index_in(t.column("series_id"), value_set=pa.array(universe, pa.int64()))
    dense = pc.fill_null(index, -1).to_numpy(zero_copy_only=False)
    dense = dense.astype(np.int16 if len(universe) < (1 << 15) else np.int32, copy=False)
    ts = (t.column("_timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
          // 1_000_000)
    value = t.column("value")
    special = t.column("special")
    val = value.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)  # null: NaN
    has_special = pc.is_valid(special).to_numpy(zero_copy_only=False)
    stale = np.zeros(len(dense), dtype=bool)
    if has_special.any():
        val = val.copy()            # written below (a zero-copy view may be read-only)
        spec = special.to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(has_special).tolist():
            s = spec[i]
            if s == STALE:
                stale[i] = True
            else:
                val[i] = {"NaN": np.nan, "+Inf": np.inf, "-Inf": -np.inf}.get(s, np.nan)
    native = pc.is_null(value).to_numpy(zero_copy_only=False) & ~has_special
    keep = (ts >= lo_ms) & (ts <= hi_ms) & ~native & (dense >= 0)
    if keep.all():
        return dense, ts, val, stale
    return dense[keep], ts[keep], val[keep], stale[keep]
