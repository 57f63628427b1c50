"""shoal's scraper against the real Prometheus (2.42, Debian's) scraping the same targets:
a live `shoal serve`'s own /metrics, Debian's node exporter, and targets this test serves with
fixed values (text format and OpenMetrics; a counter, a histogram, a gauge, a summary).

Both sides are compared one scrape's worth at a time: Prometheus's instant query `{job=...}`
at "now" answers the series of its last scrape of the job (a series that went away has a
staleness marker and is left out), and shoal's answer is the series of its last scrape,
through SQL over the bound table. Some series exist only after the first scrape of a target
(shoal's own HTTP metrics for `GET /metrics`), so the comparison waits until both have
scraped at least twice and then must agree; the test fails with the difference if they never
do. Nothing else talks to the live server meanwhile (its series would change under us).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import shoal
from shoal.client import Shoal
from shoal.frontends.prometheus.kind import resolve_scrape_binding
from shoal.frontends.prometheus.scrape import Scraper
from tests.support.exposition import exposition_server
from tests.support.prometheus import ScrapeJob, node_exporter, prometheus_server
from tests.support.server import start_server
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(600), pytest.mark.services]

FIXED_TEXT = """\
# HELP orders_total Orders taken.
# TYPE orders_total counter
orders_total{shop="north"} 17
orders_total{shop="south"} 4
# HELP latency_seconds Request latency.
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 3
latency_seconds_bucket{le="0.5"} 5
latency_seconds_bucket{le="+Inf"} 6
latency_seconds_sum 1.75
latency_seconds_count 6
# HELP queue_depth Items waiting.
# TYPE queue_depth gauge
queue_depth{queue="a",job="inner"} -2.5
# TYPE rpc summary
rpc{quantile="0.5"} 0.25
rpc_sum 9
rpc_count 30
"""

FIXED_OPENMETRICS = """\
# TYPE jobs counter
# HELP jobs Jobs run.
jobs_total{kind="batch"} 12
jobs_created{kind="batch"} 1700000000
# TYPE wait_seconds histogram
# UNIT wait_seconds seconds
wait_seconds_bucket{le="1.0"} 2
wait_seconds_bucket{le="+Inf"} 3
wait_seconds_sum 4.5
wait_seconds_count 3
wait_seconds_created 1700000000
# TYPE temperature gauge
temperature NaN
# EOF
"""


def prometheus_now(prom: Any, job: str) -> dict[frozenset[tuple[str, str]], str]:
    """Series (label sets with __name__) of Prometheus's last scrape of `job`, and values."""
    result = prom.query(f'{{job="{job}"}}')["result"]
    return {frozenset(r["metric"].items()): r["value"][1] for r in result}


def shoal_last(db: Shoal, table: str) -> dict[frozenset[tuple[str, str]], str]:
    """Series of shoal's last scrape into `table` (through SQL) and their values as
    Prometheus's API writes them."""
    data = db.sql(f"SELECT metric, labels, value, special, _timestamp FROM {table} "
                  "WHERE metric = 'up'").table.to_pylist()
    last = max(r["_timestamp"] for r in data)
    rows = db.sql(f"SELECT metric, labels, value, special, _timestamp FROM {table}"
                  ).table.to_pylist()
    out = {}
    for r in rows:
        if r["_timestamp"] != last or r["special"] == "stale":
            continue
        labels = r["labels"] if isinstance(r["labels"], dict) else json.loads(r["labels"])
        key = frozenset({**labels, "__name__": r["metric"]}.items())
        out[key] = r["special"] if r["special"] else _prom_number(r["value"])
    return out


def _prom_number(v: float) -> str:
    # Prometheus's API formats with Go's strconv 'f', -1: shortest repr, no exponent for
    # the values used here.
    return str(int(v)) if v == int(v) else repr(v)


def _diff(a: dict[frozenset[tuple[str, str]], str],
          b: dict[frozenset[tuple[str, str]], str]) -> dict[str, list[dict[str, str]]]:
    return {"only_prometheus": [dict(k) for k in a.keys() - b.keys()][:10],
            "only_shoal": [dict(k) for k in b.keys() - a.keys()][:10]}


@pytest.fixture
def targets(tmp_path):
    server = start_server(tmp_path / "served")
    try:
        with node_exporter(tmp_path / "ne") as ne, \
                exposition_server() as text, exposition_server() as om:
            text.set(FIXED_TEXT)
            om.set(FIXED_OPENMETRICS, openmetrics=True)
            yield {"shoal": server.url.split("//", 1)[1], "node": ne,
                   "fixed": f"{text.address},{om.address}"}
    finally:
        server.stop()


def test_shoal_scrapes_the_same_series_as_prometheus(tmp_path, targets):
    jobs = [ScrapeJob("shoal", [targets["shoal"]], interval="2s", timeout="2s"),
            ScrapeJob("node", [targets["node"]], interval="2s", timeout="2s"),
            ScrapeJob("fixed", targets["fixed"].split(","), interval="2s", timeout="2s",
                      labels={"env": "test"})]
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts="127.0.0.1")
    try:
        for job in ("shoal", "node", "fixed"):
            extra = ", scrape_labels = 'env=test'" if job == "fixed" else ""
            db.sql(f"CREATE TABLE s_{job} WITH (scrape_targets = '{targets[job]}', "
                   f"scrape_job = '{job}', scrape_interval = '2s', scrape_timeout = '2s'"
                   f"{extra})")
        scrapers = {job: Scraper(db, resolve_scrape_binding(db, f"s_{job}"))
                    for job in ("shoal", "node", "fixed")}
        with prometheus_server(tmp_path / "prom", scrape=jobs) as prom:
            # both sides scrape every target at least twice before comparing
            eventually(lambda: prom.query("count_over_time(up[5m]) >= 2")["result"],
                       "two Prometheus scrapes of each target",
                       until=lambda r: len(r) == 4)
            for s in scrapers.values():
                assert all(r.up for r in s.scrape()), "shoal's first scrape"

            def compare() -> dict[str, Any]:
                out = {}
                for job, s in scrapers.items():
                    results = s.scrape()
                    assert all(r.up for r in results), results
                    out[job] = _diff(prometheus_now(prom, job), shoal_last(db, f"s_{job}"))
                return {j: d for j, d in out.items() if d["only_prometheus"] or d["only_shoal"]}

            assert eventually(compare, "the same series from shoal and Prometheus",
                              until=lambda d: not d) == {}
            assert len(prometheus_now(prom, "shoal")) > 50      # not vacuous
            theirs = prometheus_now(prom, "node")
            ours = shoal_last(db, "s_node")
            assert len(ours) > 200 and ours.keys() == theirs.keys()
            names = {dict(k)["__name__"] for k in ours}
            assert {"up", "scrape_series_added", "node_cpu_seconds_total",
                    "node_memory_MemTotal_bytes"} <= names

            # the fixed targets: same values too (all fixed, so one scrape each suffices)
            fixed_prom = prometheus_now(prom, "fixed")
            fixed_shoal = shoal_last(db, "s_fixed")
            assert len(fixed_prom) == 2 * 5 + 11 + 8     # synthetic + the two expositions
            volatile = {"scrape_duration_seconds", "scrape_series_added"}
            assert {k: v for k, v in fixed_shoal.items()
                    if dict(k)["__name__"] not in volatile} == \
                {k: v for k, v in fixed_prom.items() if dict(k)["__name__"] not in volatile}
            assert any(dict(k)["__name__"] == "jobs_created" for k in fixed_shoal)
            assert any(dict(k).get("exported_job") == "inner" for k in fixed_shoal)

            # and the same metadata (types, help, units) for the fixed targets' families
            meta = db.sql("SELECT metric, type, help, unit FROM prom_metadata").table.to_pylist()
            ours_meta = {m["metric"]: (m["type"], m["help"], m["unit"]) for m in meta}
            families = ("orders_total", "latency_seconds", "queue_depth", "rpc", "jobs",
                        "wait_seconds", "temperature")
            theirs_meta = {}
            for fam in families:
                [entry] = prom.api("metadata", metric=fam)[fam]
                theirs_meta[fam] = (entry["type"], entry["help"], entry["unit"])
            assert {f: ours_meta[f] for f in families} == theirs_meta
        for s in scrapers.values():
            s.close()
    finally:
        db.close()


def test_shoal_serve_runs_a_bound_scrape_job_and_reports_it(tmp_path):
    with node_exporter(tmp_path / "ne") as ne, start_server(
            tmp_path / "data", env={"SHOAL_PIPELINES": "true",
                                    "SHOAL_ALLOWED_HOSTS": "127.0.0.1"}) as server:
        r = httpx.post(f"{server.url}/v1/query", timeout=120, json={
            "sql": f"CREATE TABLE node WITH (scrape_targets = '{ne}', scrape_interval = '1s',"
                   " scrape_timeout = '1s')"})
        assert r.status_code == 200, r.text
        bad = httpx.post(f"{server.url}/v1/query", timeout=120, json={
            "sql": "CREATE TABLE nope WITH (scrape_targets = 'evil.example:9100')"})
        assert bad.status_code == 403 and bad.json()["error"]["code"] == "location_not_allowed"
        bad = httpx.post(f"{server.url}/v1/query", timeout=120, json={
            "sql": f"CREATE TABLE nope WITH (scrape_targets = '{ne}', scrape_interval = 'x')"})
        assert bad.status_code == 400 and "scrape_interval" in bad.json()["error"]["message"]

        def ups() -> list[Any]:
            r = httpx.post(f"{server.url}/v1/query", timeout=120, json={
                "sql": "SELECT count(*) FROM node WHERE metric = 'up' AND value = 1"})
            assert r.status_code == 200, r.text
            return r.json()["rows"]

        eventually(ups, "two scrapes committed by the server", until=lambda r: r[0][0] >= 2)

        def metrics() -> str:
            return httpx.get(f"{server.url}/metrics", timeout=60).text

        text = eventually(metrics, "the scrape pipeline's metrics",
                          until=lambda t: 'shoal_scrape_pipeline_up{table="node"} 1.0' in t)
        assert 'shoal_scrape_scrapes_total{table="node"}' in text
        assert 'shoal_scrape_targets_up{table="node"} 1.0' in text
