"""A real Prometheus remote-writes into a live `shoal serve`, and nothing is lost or doubled
across shoal being killed (SIGKILL) and stopped (SIGTERM) while Prometheus keeps scraping.

The target is a small HTTP server in this test (a counter, a gauge and a classic histogram
that change on every scrape), scraped every second. Prometheus keeps its own copy of every
sample in its TSDB; once its remote-write queue has drained (its own metrics: nothing
pending, the highest sent timestamp past the comparison time), every sample Prometheus holds
for the target's series in the window must be in shoal exactly once (read back with SQL
through `POST /v1/query`).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections import Counter
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.parser import text_string_to_metric_families

from shoal.types.prometheus import join_value, series_key
from tests.support.prometheus import PrometheusServer, ScrapeJob, prometheus_server
from tests.support.server import free_port, start_server
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

INGEST, QUERY = "ing-token", "query-token"


class Target:
    """An exporter whose metrics change on every scrape; counts the scrapes it served."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.scrapes_total = PromCounter("demo_scrapes", "Scrapes served.",
                                         registry=self.registry)
        self.level = Gauge("demo_level", "A level.", ["shard"], registry=self.registry)
        self.latency = Histogram("demo_latency_seconds", "Latency.", registry=self.registry,
                                 buckets=(0.1, 0.5, 1.0))
        self.served = 0
        self._lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = target.scrape()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def scrape(self) -> bytes:
        with self._lock:
            self.served += 1
            n = self.served
            self.scrapes_total.inc()
            self.level.labels("a").set(n * 0.25)
            self.level.labels("b").set(-n)
            self.latency.observe((n % 7) * 0.125)
            return generate_latest(self.registry)

    def __enter__(self) -> Target:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def prom_metrics(prom: PrometheusServer) -> dict[str, float]:
    """Prometheus's own metrics (its /metrics), summed over labels by sample name."""
    text = httpx.get(f"{prom.url}/metrics", timeout=30).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def shoal_samples(url: str) -> list[tuple[str, int, str]]:
    """(series, ms, value) of every row of the target's job in `prom_samples`, via SQL."""
    sql = ("SELECT series, _timestamp, value, special FROM prom_samples "
           "WHERE get_json_object(labels, '$.job') = 'target'")
    r = httpx.post(f"{url}/v1/query", json={"sql": sql}, timeout=60,
                   headers={"Authorization": f"Bearer {QUERY}"})
    if r.status_code == 404:          # the table is made by the first write
        return []
    assert r.status_code == 200, r.text
    doc = r.json()
    assert not doc.get("truncated"), "the answer was cut short"
    return [(series, round(datetime.fromisoformat(ts).timestamp() * 1000),
             repr(join_value(value, special))) for series, ts, value, special in doc["rows"]]


def prometheus_samples(prom: PrometheusServer, at_s: float) -> list[tuple[str, int, str]]:
    """(series, ms, value) of every raw sample Prometheus holds for the target's job in the
    10 minutes up to `at_s` (a range selector: raw samples, no evaluation)."""
    data = prom.query('{job="target"}[10m]', time=at_s)
    assert data["resultType"] == "matrix"
    out = []
    for series in data["result"]:
        labels = dict(series["metric"])
        key = series_key(labels.pop("__name__", ""), labels)
        out += [(key, round(float(t) * 1000), repr(float(v))) for t, v in series["values"]]
    return out


def test_remote_write_survives_shoal_restarts_exactly_once(tmp_path):
    port = free_port()
    data = tmp_path / "shoal"
    env = {"SHOAL_QUERY_ENGINE": "local"}
    tokens = {INGEST: "ingest", QUERY: "query"}

    def start():
        return start_server(data, port=port, tokens=tokens, env=env)

    def scraped(n: int) -> None:
        goal = target.served + n
        eventually(lambda: target.served, f"{n} more scrapes", until=lambda s: s >= goal)

    with Target() as target:
        shoal = start()
        try:
            with prometheus_server(tmp_path / "prom", remote_write=f"{shoal.url}/api/v1/write",
                                   remote_write_token=INGEST,
                                   scrape=[ScrapeJob("target", [target.address])]) as prom:
                eventually(lambda: len({s for s, _, _ in shoal_samples(shoal.url)
                                        if s.startswith("demo_scrapes_total")}),
                           "the first scrapes to land in shoal", until=lambda n: n >= 1)
                retried_before = prom_metrics(prom).get(
                    "prometheus_remote_storage_samples_retried_total", 0.0)

                shoal.kill()                    # SIGKILL: no goodbye, maybe mid-commit
                scraped(4)                      # Prometheus scrapes on, sends fail
                shoal = start()                 # same data dir, same port
                scraped(3)
                code = shoal.stop()             # SIGTERM: graceful
                assert code in (0, -signal.SIGTERM), shoal.log()
                scraped(4)
                shoal = start()
                scraped(3)

                at_ms = int(time.time() * 1000)
                at_s = at_ms / 1000

                def drained() -> dict[str, float]:
                    return prom_metrics(prom)

                m = eventually(drained, "Prometheus's remote-write queue to drain past T",
                               until=lambda m: (
                                   m.get("prometheus_remote_storage_samples_pending", 1) == 0
                                   and m.get("prometheus_remote_storage_queue_highest_sent_"
                                             "timestamp_seconds", 0) >= at_s),
                               timeout_s=300)
                # The outages were real (Prometheus had to retry), and Prometheus gave up
                # on nothing (no 4xx, no sample dropped as failed).
                assert m["prometheus_remote_storage_samples_retried_total"] > retried_before
                assert m.get("prometheus_remote_storage_samples_failed_total", 0) == 0

                expected = prometheus_samples(prom, at_s)
                window = range(at_ms - 600_000 + 1, at_ms + 1)
                got = [s for s in shoal_samples(shoal.url) if s[1] in window]
                assert len(expected) > 100
                assert {s for s, _, _ in expected} >= {
                    'demo_scrapes_total{instance="%s",job="target"}' % target.address,
                    'demo_level{instance="%s",job="target",shard="a"}' % target.address,
                    'demo_latency_seconds_bucket{instance="%s",job="target",le="0.5"}'
                    % target.address}
                doubled = [k for k, n in Counter((s, t) for s, t, _ in got).items() if n > 1]
                assert doubled == [], f"{len(doubled)} samples written twice: {doubled[:5]}"
                missing = sorted(set(expected) - set(got))
                assert missing == [], f"{len(missing)} samples lost: {missing[:5]}"
                assert sorted(got) == sorted(expected)
                assert not any(math.isnan(float(v)) for _, _, v in expected)

                # Metadata arrived too (Prometheus sends it beside the samples).
                r = httpx.post(f"{shoal.url}/v1/query", timeout=60,
                               headers={"Authorization": f"Bearer {QUERY}"},
                               json={"sql": "SELECT DISTINCT metric, type FROM prom_metadata "
                                            "WHERE metric LIKE 'demo_%'"})
                assert r.status_code == 200, r.text
                assert ["demo_level", "gauge"] in r.json()["rows"]
        finally:
            shoal.kill()
