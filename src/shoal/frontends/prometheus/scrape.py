"""One scrape job (`shoal.frontends.prometheus.binding.ScrapeBinding`), scraped as Prometheus
does it.

`Scraper(db, binding).scrape()` fetches every target once (concurrently), and commits each
target's samples to the bound table in one `ingest_arrow` call (one commit per target
scrape), in the layout of `shoal.types.prometheus`:

- Fetch: `GET <scheme>://<target><path>` with Prometheus's headers (`Accept` preferring
  OpenMetrics 1.0.0 over text 0.0.4, `Accept-Encoding: gzip`,
  `X-Prometheus-Scrape-Timeout-Seconds`), through `shoal.outbound`: the location policy
  (`SHOAL_ALLOWED_HOSTS`) is checked on every hop, the resolved addresses included, and a
  redirect is followed only to an allowed host and port (at most 5 hops); a refused hop fails
  the scrape with the reason, and nothing is sent to the refused host. The whole scrape, body
  included, must end within the timeout; a body over `max_body_bytes` fails the scrape
  (bounded memory).
- Parse: `application/openmetrics-text` with prometheus_client's OpenMetrics parser, anything
  else with its text-format parser. Samples keep the names Prometheus stores (`x_total`,
  `h_bucket{le=..}`, `h_sum`, `h_count`, and OpenMetrics `_created` series, which
  Prometheus 2.42 stores as ordinary series: checked against the real server).
- Labels: the target labels `job`, `instance` (the target) and the binding's extra labels
  are added to every sample. A sample label of the same name is renamed `exported_<name>`
  (again prefixed while taken) unless `honor_labels`, in which case the sample's wins.
  Empty label values are absent labels.
- Time: a sample's time is the scrape's start (the injected `clock`, in ms) unless the
  exposition gives one.
- Synthetic series per target and scrape: `up`, `scrape_duration_seconds`,
  `scrape_samples_scraped`, `scrape_samples_post_metric_relabeling` (no relabeling, so the
  same) and `scrape_series_added` (series not in the target's previous scrape). A failed
  scrape writes `up` 0, its duration and zeros, and nothing else of the exposition.
- Staleness: a series of the target's previous successful scrape that is missing now gets
  a staleness marker (`special` = `stale`) at this scrape's time; a failed scrape marks all
  of them. Samples with their own timestamps are not tracked (as in Prometheus).
- Metadata (`# TYPE`, `# HELP`, `# UNIT`) goes to `prometheus_metadata_table` (made on first
  use) when a family is first seen by this scraper or its metadata changed. Family names are
  Prometheus's: OpenMetrics `x` for `x_total`; the text format's TYPE name (`x_total`).

Not done (yet): relabeling, sample/label limits, TLS and authorization options, native
histograms (they travel only in the protobuf format, which is not requested), end-of-run
staleness markers when a binding stops.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families)
from prometheus_client.parser import text_string_to_metric_families as text_families

from shoal.errors import (OutboundFetchError, OutboundRefusedError, ScrapeFailedError,
                          TableAlreadyExistsError, TableNotFoundError)
from shoal.frontends.prometheus.binding import ScrapeBinding
from shoal.locations import LocationPolicy
from shoal.outbound import OutboundClient
from shoal.types.prometheus import (NAME_LABEL, PROM_METADATA_SCHEMA, STALE_NAN_BITS,
                                    SampleRows)
from shoal.types.schema import DEFAULT_COLUMNS

if TYPE_CHECKING:
    from shoal.client import Shoal

log = logging.getLogger("shoal.scrape")

ACCEPT = ("application/openmetrics-text;version=1.0.0,"
          "application/openmetrics-text;version=0.0.1;q=0.75,"
          "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
USER_AGENT = "shoal-scraper/1 (Prometheus-compatible)"
MAX_BODY_BYTES = 64 << 20
STALE_VALUE: float = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]

LabelSet = tuple[tuple[str, str], ...]      # sorted, __name__ included, no empty values
Clock = Callable[[], float]


@dataclass
class ParsedScrape:
    """An exposition as Prometheus would store it (before the target labels)."""

    samples: list[tuple[str, dict[str, str], float, int | None]] = field(default_factory=list)
    metadata: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # type,help,unit


@dataclass(frozen=True)
class TargetScrape:
    """What one scrape of one target did."""

    target: str
    start_ms: int
    up: bool
    duration_s: float
    samples: int = 0            # in the exposition (scrape_samples_scraped)
    series_added: int = 0
    stale_markers: int = 0
    rows: int = 0               # committed, synthetic series and markers included
    error: str | None = None


def parse_exposition(body: bytes, content_type: str) -> ParsedScrape:
    """Samples and metadata of an exposition; `ValueError` when it does not parse."""
    text = body.decode("utf-8")
    openmetrics = content_type.split(";")[0].strip().lower() == "application/openmetrics-text"
    families = openmetrics_families(text) if openmetrics else text_families(text)
    out = ParsedScrape()
    for fam in families:
        if fam.type != "unknown" or fam.documentation or fam.unit:
            name = fam.name
            if not openmetrics and fam.type == "counter" and any(
                    s.name == f"{name}_total" for s in fam.samples):
                name = f"{name}_total"      # the text format's TYPE line names the sample
            # prometheus_client calls untyped "unknown", as Prometheus's metadata API does
            out.metadata[name] = (fam.type, fam.documentation or "", fam.unit or "")
        for s in fam.samples:
            ts = None if s.timestamp is None else _millis(s.timestamp)
            out.samples.append((s.name, dict(s.labels), float(s.value), ts))
    return out


def _millis(ts: Any) -> int:
    sec = getattr(ts, "sec", None)
    if sec is not None:                                  # OpenMetrics Timestamp(sec, nsec)
        return int(sec) * 1000 + int(ts.nsec) // 1_000_000
    return round(float(ts) * 1000)


def target_labels(binding: ScrapeBinding, target: str) -> dict[str, str]:
    """The labels a target adds to each of its samples."""
    return {"job": binding.job, "instance": target, **dict(binding.labels)}


def apply_target_labels(sample: Mapping[str, str], target: Mapping[str, str], *,
                        honor_labels: bool) -> dict[str, str]:
    """A sample's labels with the target's added, Prometheus's conflict rule applied."""
    out = dict(sample)
    conflicts: list[tuple[str, str]] = []
    for name, value in target.items():
        existing = out.get(name, "")
        if honor_labels:
            if existing == "":
                out[name] = value
            continue
        if existing != "":
            conflicts.append((name, existing))
        out[name] = value
    for name, value in sorted(conflicts, key=lambda c: len(c[0])):   # as Prometheus orders
        renamed = f"exported_{name}"
        while out.get(renamed, "") != "":
            renamed = f"exported_{renamed}"
        out[renamed] = value
    return out


class Scraper:
    """Scrapes one binding's targets; keeps each target's last series for staleness and the
    metadata already written. Not thread-safe: one caller (the run loop or the CLI)."""

    def __init__(self, db: Shoal, binding: ScrapeBinding, *, clock: Clock = time.time,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.db = db
        self.binding = binding
        self.clock = clock
        self.max_body_bytes = max_body_bytes
        self.metadata_table = db.config.prometheus_metadata_table
        self._client = OutboundClient(
            LocationPolicy.from_config(db.config),
            headers={"Accept": ACCEPT, "Accept-Encoding": "gzip", "User-Agent": USER_AGENT,
                     "X-Prometheus-Scrape-Timeout-Seconds": f"{binding.timeout_s:g}"})
        self._last: dict[str, set[LabelSet]] = {}      # for staleness (no own timestamps)
        self._known: dict[str, set[LabelSet]] = {}     # every series of the last scrape
        self._heads: dict[str, dict[Any, Any]] = {}    # SampleRows' series cache, per target
        # per target: a sample's (name, labels as exposed) -> its LabelSet and full labels
        self._labelled: dict[str, dict[Any, tuple[LabelSet, dict[str, str]]]] = {}
        self._metadata: dict[str, tuple[str, str, str]] = {}
        self._pool = ThreadPoolExecutor(max_workers=min(8, len(binding.targets)),
                                        thread_name_prefix=f"shoal-scrape-{binding.table}")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def __enter__(self) -> Scraper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- one round --------------------------------------------------------------------
    def scrape(self) -> list[TargetScrape]:
        """Scrape every target once (concurrently), then commit each target's rows."""
        start_ms = int(self.clock() * 1000)
        fetched = list(self._pool.map(lambda t: self._fetch(t), self.binding.targets))
        return [self._commit(target, start_ms, result)
                for target, result in zip(self.binding.targets, fetched, strict=True)]

    def _fetch(self, target: str) -> tuple[ParsedScrape | ScrapeFailedError, float]:
        began = time.perf_counter()
        try:
            parsed: ParsedScrape | ScrapeFailedError = self._get(target)
        except ScrapeFailedError as e:
            parsed = e
        return parsed, time.perf_counter() - began

    def _get(self, target: str) -> ParsedScrape:
        try:
            with self._client.open(self.binding.url(target),
                                   timeout=self.binding.timeout_s) as fetched:
                status = fetched.response.status_code
                if status != 200:
                    raise ScrapeFailedError(target, f"server returned HTTP status {status}")
                body = fetched.read(self.max_body_bytes)
                content_type = fetched.response.headers.get("content-type", "text/plain")
        except OutboundFetchError as e:
            raise ScrapeFailedError(target, e.reason) from None
        except OutboundRefusedError as e:       # the policy refused a hop: say which and why
            raise ScrapeFailedError(target, str(e)) from None
        try:
            return parse_exposition(body, content_type)
        except (ValueError, UnicodeDecodeError, IndexError, KeyError) as e:
            # prometheus_client's parsers raise these on malformed input
            raise ScrapeFailedError(target, f"cannot parse the exposition: {e}") from None

    def _commit(self, target: str, start_ms: int,
                fetched: tuple[ParsedScrape | ScrapeFailedError, float]) -> TargetScrape:
        parsed, duration = fetched
        tl = target_labels(self.binding, target)
        heads = self._heads.setdefault(target, {})
        labelled = self._labelled.setdefault(target, {})
        if len(heads) > 2 * len(self._known.get(target, ())) + 1000:
            heads.clear()           # bounded: about the series of the last scrape
            labelled.clear()
        rows = SampleRows(series_cache=heads)
        previous = self._last.get(target, set())
        if isinstance(parsed, ScrapeFailedError):
            stale = previous
            self._last[target] = set()
            self._known[target] = set()
            log.warning("%s", parsed)
            result = TargetScrape(target, start_ms, False, duration, stale_markers=len(stale),
                                  error=parsed.reason)
        else:
            seen: set[LabelSet] = set()
            known: set[LabelSet] = set()
            honor = self.binding.honor_labels
            for name, labels, value, ts in parsed.samples:
                raw = (name, tuple(labels.items()))
                hit = labelled.get(raw)
                if hit is None:
                    full = apply_target_labels(labels, tl, honor_labels=honor)
                    full[NAME_LABEL] = name
                    hit = labelled[raw] = (
                        tuple(sorted((k, v) for k, v in full.items() if v != "")), full)
                key, full = hit
                if key in known and ts is None:
                    continue            # Prometheus keeps the first of duplicate samples
                known.add(key)
                if ts is None:
                    seen.add(key)
                rows.add(start_ms if ts is None else ts, full, value)
            stale = previous - seen
            added = len(known - self._known.get(target, set()))
            self._last[target], self._known[target] = seen, known
            result = TargetScrape(target, start_ms, True, duration,
                                  samples=len(parsed.samples), series_added=added,
                                  stale_markers=len(stale))
        for key in sorted(stale):
            rows.add(start_ms, dict(key), STALE_VALUE)
        for name, value in _report(result).items():
            rows.add(start_ms, {**tl, NAME_LABEL: name}, value)
        self.db.ingest_arrow(self.binding.table, rows.batch(), mode="drop")
        if not isinstance(parsed, ScrapeFailedError):
            self._write_metadata(parsed.metadata, start_ms)
        return TargetScrape(**{**result.__dict__, "rows": len(rows)})

    def _write_metadata(self, metadata: Mapping[str, tuple[str, str, str]],
                        start_ms: int) -> None:
        changed = [(m, t) for m, t in metadata.items() if self._metadata.get(m) != t]
        if not changed:
            return
        self._ensure_metadata_table()
        n = len(changed)
        batch = pa.RecordBatch.from_pydict({
            "_timestamp": pa.array([start_ms * 1_000_000] * n, pa.int64()).cast(
                PROM_METADATA_SCHEMA.column("_timestamp").arrow_field().type),
            "metric": [m for m, _ in changed], "type": [t[0] for _, t in changed],
            "help": [t[1] for _, t in changed], "unit": [t[2] for _, t in changed]})
        self.db.ingest_arrow(self.metadata_table, batch, mode="drop")
        self._metadata.update(changed)

    def _ensure_metadata_table(self) -> None:
        try:
            self.db.catalog.load_table(self.metadata_table)
        except TableNotFoundError:
            user = [c for c in PROM_METADATA_SCHEMA.columns if c not in DEFAULT_COLUMNS]
            try:
                self.db.create_table(self.metadata_table, user, mode="drop")
            except TableAlreadyExistsError:
                log.debug("metadata table %s was created concurrently", self.metadata_table)


def _report(r: TargetScrape) -> dict[str, float]:
    return {"up": 1.0 if r.up else 0.0, "scrape_duration_seconds": r.duration_s,
            "scrape_samples_scraped": float(r.samples),
            "scrape_samples_post_metric_relabeling": float(r.samples),
            "scrape_series_added": float(r.series_added)}
