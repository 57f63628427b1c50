"""Scrape jobs: the binding's DDL, and scrapes of real HTTP targets (a local
server serving set expositions, over real sockets) on an injected clock.

What a user would see in the table: Prometheus's sample names and labels (job, instance,
exported_* on a conflict, honor_labels), the scrape's start as the sample time, the synthetic
series, staleness markers, `up` 0 for a target that fails or times out, the metadata table,
and rounds on the interval grid of the clock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import shoal
from shoal.client import Shoal
from shoal.errors import InvalidPropertyError, InvalidSchemaError, LocationNotAllowedError
from shoal.frontends.prometheus.kind import ScrapeKind, resolve_scrape_binding
from shoal.frontends.prometheus.scrape import Scraper
from shoal.frontends.supervisor import BindingState
from shoal.frontends.prometheus.binding import ScrapeBinding, parse_binding, parse_duration
from shoal.types.prometheus import PROM_SAMPLES_SCHEMA
from tests.support.clock import ManualClock
from tests.support.exposition import ExpositionTarget, exposition_server
from tests.support.server import free_port

T0 = 1_790_000_000.0        # the injected clock's start (seconds)
T0_MS = int(T0 * 1000)

TEXT = """\
# HELP requests_total Requests served.
# TYPE requests_total counter
requests_total{code="200",job="inner"} 7
requests_total{code="500"} 2
# HELP temp Temperature.
# TYPE temp gauge
temp{instance="probe-1"} 21.5
# TYPE latency histogram
latency_bucket{le="0.1"} 3
latency_bucket{le="1"} 5
latency_bucket{le="+Inf"} 6
latency_sum 2.5
latency_count 6
stamped 4 1789999999000
"""

SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
             "scrape_samples_post_metric_relabeling", "scrape_series_added"}


@pytest.fixture
def db(tmp_path) -> Iterator[Shoal]:
    d = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="127.0.0.1")
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def target() -> Iterator[ExpositionTarget]:
    with exposition_server() as t:
        yield t


def rows(db: Shoal, table: str) -> list[dict[str, Any]]:
    data, _ = db.read(table)
    out = data.to_pylist()
    for r in out:
        if isinstance(r["labels"], str | bytes):
            r["labels"] = json.loads(r["labels"])
        r["ms"] = int(r["_timestamp"].timestamp() * 1000) if r["_timestamp"] else None
    return out


def bind(db: Shoal, targets: str, **props: str) -> ScrapeBinding:
    extra = "".join(f", scrape_{k} = '{v}'" for k, v in props.items())
    db.sql(f"CREATE TABLE m WITH (scrape_targets = '{targets}'{extra})")
    binding = resolve_scrape_binding(db, "m")
    assert binding is not None
    return binding


def series_of(rs: list[dict[str, Any]], ms: int) -> dict[str, dict[str, Any]]:
    return {r["series"]: r for r in rs if r["ms"] == ms}


# ---- the binding's DDL ----------------------------------------------------------------------
def test_a_table_made_with_scrape_targets_gets_the_prometheus_layout(db):
    db.sql("CREATE TABLE m WITH (scrape_targets = '127.0.0.1:9100, 127.0.0.1:9101', "
           "scrape_interval = '1m30s', scrape_timeout = '500ms', scrape_job = 'node', "
           "scrape_labels = 'env=prod, dc=x', scrape_honor_labels = 'true')")
    assert db.catalog.load_table("m").schema.names == PROM_SAMPLES_SCHEMA.names
    b = resolve_scrape_binding(db, "m")
    assert b == ScrapeBinding(table="m", targets=("127.0.0.1:9100", "127.0.0.1:9101"),
                              interval_s=90.0, timeout_s=0.5, job="node",
                              labels=(("dc", "x"), ("env", "prod")), honor_labels=True)
    db.sql("CREATE TABLE ok (metric string, labels dynamic, series string, series_id long, "
           "value real, special string, histogram dynamic) "
           "WITH (scrape_targets = '127.0.0.1:1')")
    assert resolve_scrape_binding(db, "ok").job == "ok"          # default job: the table


@pytest.mark.parametrize(("props", "says"), [
    ("scrape_targets = 'http://127.0.0.1:9100/metrics'", "target 1"),
    ("scrape_targets = '127.0.0.1:9100,127.0.0.1'", "target 2"),
    ("scrape_targets = '127.0.0.1:9100', scrape_interval = '15 seconds'", "scrape_interval"),
    ("scrape_targets = '127.0.0.1:9100', scrape_interval = '0s'", "scrape_interval"),
    ("scrape_targets = '127.0.0.1:9100', scrape_interval = '5s', scrape_timeout = '10s'",
     "must not exceed"),
    ("scrape_targets = '127.0.0.1:9100', scrape_scheme = 'ftp'", "scrape_scheme"),
    ("scrape_targets = '127.0.0.1:9100', scrape_path = 'metrics'", "scrape_path"),
    ("scrape_targets = '127.0.0.1:9100', scrape_labels = 'env'", "pair 1"),
    ("scrape_targets = '127.0.0.1:9100', scrape_labels = 'a=1,job=x'", "reserved"),
    ("scrape_targets = '127.0.0.1:9100', scrape_honor_labels = 'maybe'", "scrape_honor_labels"),
])
def test_a_bad_scrape_property_is_refused_at_create_naming_it(db, props, says):
    with pytest.raises(InvalidPropertyError, match=says):
        db.sql(f"CREATE TABLE bad WITH ({props})")
    assert "bad" not in [t.name for t in db.catalog.list_tables()]


def test_targets_must_be_allowed_hosts_and_columns_the_layout(db):
    with pytest.raises(LocationNotAllowedError, match="SHOAL_ALLOWED_HOSTS"):
        db.sql("CREATE TABLE bad WITH (scrape_targets = '127.0.0.1:9100,evil.example:9100')")
    with pytest.raises(InvalidSchemaError, match='column "value" is type string'):
        db.sql("CREATE TABLE bad (value string) WITH (scrape_targets = '127.0.0.1:9100')")
    with pytest.raises(InvalidSchemaError, match="lacks the Prometheus columns"):
        db.sql("CREATE TABLE bad (value real) WITH (scrape_targets = '127.0.0.1:9100')")
    # a table bound before the policy changed does not run: the binding checks again
    db.sql("CREATE TABLE m WITH (scrape_targets = '127.0.0.1:9100')")
    strict = shoal.connect(data_dir=str(db.config.data_path), allowed_hosts="other")
    try:
        with pytest.raises(LocationNotAllowedError):
            resolve_scrape_binding(strict, "m")
    finally:
        strict.close()


def test_durations_read_as_prometheus_writes_them():
    assert [parse_duration(d, what="x") for d in ("15s", "500ms", "1m30s", "2h", "0.25", 3)] \
        == [15.0, 0.5, 90.0, 7200.0, 0.25, 3.0]
    assert parse_binding("t", {"scrape_targets": "[::1]:9100"}).targets == ("[::1]:9100",)


# ---- one scrape ---------------------------------------------------------------------------
def test_a_scrape_stores_the_series_prometheus_would(db, target):
    target.set(TEXT)
    binding = bind(db, target.address, job="app", labels="env=prod")
    clock = ManualClock(T0)
    with Scraper(db, binding, clock=clock) as scraper:
        [result] = scraper.scrape()
    assert result.up and result.samples == 9 and result.error is None
    got = series_of(rows(db, "m"), T0_MS)
    inst = target.address
    base = f'env="prod",instance="{inst}",job="app"'
    assert set(got) - {f"{n}{{{base}}}" for n in SYNTHETIC} == {
        f'requests_total{{code="200",env="prod",exported_job="inner",instance="{inst}",'
        f'job="app"}}',
        f'requests_total{{code="500",{base}}}',
        f'temp{{env="prod",exported_instance="probe-1",instance="{inst}",job="app"}}',
        f'latency_bucket{{env="prod",instance="{inst}",job="app",le="0.1"}}',
        f'latency_bucket{{env="prod",instance="{inst}",job="app",le="1"}}',
        f'latency_bucket{{env="prod",instance="{inst}",job="app",le="+Inf"}}',
        f"latency_sum{{{base}}}", f"latency_count{{{base}}}"}
    assert got[f"temp{{env=\"prod\",exported_instance=\"probe-1\",instance=\"{inst}\","
               'job="app"}']["value"] == 21.5
    assert got[f"latency_sum{{{base}}}"]["value"] == 2.5
    assert got[f"latency_sum{{{base}}}"]["labels"] == {"env": "prod", "instance": inst,
                                                      "job": "app"}
    stamped = [r for r in rows(db, "m") if r["metric"] == "stamped"]
    assert [(r["ms"], r["value"]) for r in stamped] == [(1789999999000, 4.0)]
    synthetic = {n: got[f"{n}{{{base}}}"]["value"] for n in SYNTHETIC}
    assert synthetic["up"] == 1.0
    assert synthetic["scrape_samples_scraped"] == 9.0
    assert synthetic["scrape_samples_post_metric_relabeling"] == 9.0
    assert synthetic["scrape_series_added"] == 9.0
    assert synthetic["scrape_duration_seconds"] >= 0
    # Prometheus's request headers
    [headers] = target.requests
    assert headers["accept"].startswith("application/openmetrics-text;version=1.0.0,")
    assert "text/plain;version=0.0.4;q=0.5" in headers["accept"]
    assert headers["x-prometheus-scrape-timeout-seconds"] == "10"
    assert headers["accept-encoding"] == "gzip"


def test_honor_labels_keeps_the_targets_own_labels(db, target):
    target.set('requests_total{job="inner",instance="probe-1"} 7\nother 1\n')
    binding = bind(db, target.address, job="app", honor_labels="true")
    with Scraper(db, binding, clock=ManualClock(T0)) as scraper:
        scraper.scrape()
    got = {r["series"] for r in rows(db, "m") if r["metric"] in ("requests_total", "other")}
    assert got == {'requests_total{instance="probe-1",job="inner"}',
                   f'other{{instance="{target.address}",job="app"}}'}


def test_openmetrics_keeps_created_series_and_metadata_lands_once(db, target):
    om = ("# TYPE jobs counter\n# HELP jobs Jobs run.\njobs_total 3\njobs_created 1.5e9\n"
          "# TYPE wait histogram\nwait_bucket{le=\"1.0\"} 1\nwait_bucket{le=\"+Inf\"} 2\n"
          "wait_sum 3\nwait_count 2\nwait_created 1.5e9\n# EOF\n")
    target.set(om, openmetrics=True)
    binding = bind(db, target.address)
    clock = ManualClock(T0)
    with Scraper(db, binding, clock=clock) as scraper:
        scraper.scrape()
        clock.advance(15)
        scraper.scrape()                      # metadata unchanged: not written again
        target.set(om.replace("Jobs run.", "Jobs run, all of them."), openmetrics=True)
        clock.advance(15)
        scraper.scrape()
    names = {r["metric"] for r in rows(db, "m")} - SYNTHETIC
    assert names == {"jobs_total", "jobs_created", "wait_bucket", "wait_sum", "wait_count",
                     "wait_created"}
    meta = sorted((r["metric"], r["type"], r["help"]) for r in db.read("prom_metadata")[0]
                  .to_pylist())
    assert meta == [("jobs", "counter", "Jobs run, all of them."), ("jobs", "counter", "Jobs run."),
                    ("wait", "histogram", "")]


def test_a_series_that_goes_away_and_a_failing_target_get_staleness_markers(db, target):
    target.set("a 1\nb 2\n")
    binding = bind(db, target.address, job="j")
    clock = ManualClock(T0)
    inst = target.address
    with Scraper(db, binding, clock=clock) as scraper:
        scraper.scrape()
        target.set("a 1\nc 3\n")
        clock.advance(15)
        [second] = scraper.scrape()
        target.status = 500
        clock.advance(15)
        [third] = scraper.scrape()
    all_rows = rows(db, "m")
    at = {ms: {r["series"]: (r["value"], r["special"]) for r in all_rows if r["ms"] == ms}
          for ms in (T0_MS, T0_MS + 15_000, T0_MS + 30_000)}
    sel = f'{{instance="{inst}",job="j"}}'
    assert at[T0_MS + 15_000][f"b{sel}"] == (None, "stale")
    assert at[T0_MS + 15_000][f"c{sel}"] == (3.0, None)
    assert at[T0_MS + 15_000][f"scrape_series_added{sel}"] == (1.0, None)
    assert second.stale_markers == 1
    assert not third.up and "HTTP status 500" in (third.error or "")
    failed = at[T0_MS + 30_000]
    assert failed == {f"a{sel}": (None, "stale"), f"c{sel}": (None, "stale"),
                      f"up{sel}": (0.0, None), f"scrape_samples_scraped{sel}": (0.0, None),
                      f"scrape_samples_post_metric_relabeling{sel}": (0.0, None),
                      f"scrape_series_added{sel}": (0.0, None),
                      f"scrape_duration_seconds{sel}": failed[f"scrape_duration_seconds{sel}"]}


def test_a_refused_a_garbled_and_a_hanging_target_are_down(db, target):
    refused = f"127.0.0.1:{free_port()}"
    target.set("this is { not an exposition\n")
    binding = bind(db, f"{target.address},{refused}", timeout="300ms", interval="1s")
    with Scraper(db, binding, clock=ManualClock(T0)) as scraper:
        garbled, down = scraper.scrape()
        assert not garbled.up and "cannot parse" in (garbled.error or "")
        assert not down.up and "ConnectError" in (down.error or "")
        target.set("a 1\n")
        target.hold.clear()                  # the target accepts and never answers
        hanging, _ = scraper.scrape()
        target.hold.set()
    assert not hanging.up and hanging.error == "timed out after 0.3s"
    ups = sorted((r["labels"]["instance"], r["value"]) for r in rows(db, "m")
                 if r["metric"] == "up")
    assert ups == sorted([(target.address, 0.0)] * 2 + [(refused, 0.0)] * 2)


# ---- rounds on the clock --------------------------------------------------------------------
def test_rounds_follow_the_interval_on_the_clock_and_skip_missed_starts(db, target):
    binding = bind(db, target.address, interval="10s", timeout="5s")
    clock = ManualClock(T0)
    target.set("a 1\n")
    waits: list[float] = []
    stop = threading.Event()

    def sleep(event: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 2:
            clock.advance(seconds + 25)      # this round overran: T0+20..40 missed
        else:
            clock.advance(seconds)
        if len(waits) == 3:
            event.set()
        return event.is_set()

    kind = ScrapeKind(db, clock=clock, sleep=sleep)
    state = BindingState("scrape", "m", counters={n: 0 for n, _ in kind.counters},
                         gauges={n: None for n, _ in kind.gauges})
    kind.run(binding, stop, state)
    ups = sorted(r["ms"] - T0_MS for r in rows(db, "m") if r["metric"] == "up")
    assert ups == [0, 10_000, 45_000]
    assert waits == [10.0, 10.0, 5.0]
    assert state.counters["scrapes"] == 3 and state.counters["scrape_failures"] == 0
    assert state.counters["samples"] == 3 and state.gauges["targets_up"] == 1.0
    assert state.up and state.error is None
    target.status = 503
    with Scraper(db, binding, clock=clock) as scraper:
        kind.round(scraper, state)
    assert not state.up and "HTTP status 503" in (state.error or "")
    assert state.counters["scrape_failures"] == 1


def test_an_oversized_body_fails_the_scrape_in_bounded_memory(db, target):
    target.set("a 1\n" * 10_000)
    binding = bind(db, target.address)
    with Scraper(db, binding, clock=ManualClock(T0), max_body_bytes=1024) as scraper:
        [result] = scraper.scrape()
    assert not result.up and result.error == "body exceeds 1024 bytes"


def test_the_kind_follows_changes_of_the_binding(db):
    kind = ScrapeKind(db)
    db.sql("CREATE TABLE m WITH (scrape_targets = '127.0.0.1:9100')")
    db.sql("CREATE TABLE plain (n long)")
    assert [t.name for t in db.catalog.list_tables() if kind.is_bound(t.properties)] == ["m"]
    before = kind.resolve("m")
    assert kind.resolve("plain") is None and kind.resolve("missing") is None
    db.catalog.set_properties("m", {"scrape_interval": "30s"})
    assert kind.resolve("m") != before and kind.resolve("m").interval_s == 30.0
    db.catalog.set_properties("m", {"scrape_interval": "soon"})
    with pytest.raises(InvalidPropertyError, match="scrape_interval"):
        kind.resolve("m")
    db.catalog.set_properties("m", {"scrape_targets": None})
    assert kind.resolve("m") is None


def test_a_taken_exported_name_is_prefixed_again():
    from shoal.frontends.prometheus.scrape import apply_target_labels

    sample = {"job": "inner", "exported_job": "older", "x": "1"}
    target = {"job": "app", "instance": "h:1"}
    assert apply_target_labels(sample, target, honor_labels=False) == {
        "job": "app", "instance": "h:1", "exported_job": "older",
        "exported_exported_job": "inner", "x": "1"}
    assert apply_target_labels({"job": "", "x": "1"}, target, honor_labels=True) == {
        "job": "app", "instance": "h:1", "x": "1"}
