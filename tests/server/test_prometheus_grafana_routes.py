"""The routes Grafana's Prometheus data source calls besides the queries answer in
Prometheus's documents, compared key for key with a real Prometheus (Debian's) that scrapes
the same target as a live `shoal serve`'s scrape job; a path under `/api/v1/` that neither
serves is Prometheus's error document with 404 `not_found`, never shoal's own error shape.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.exposition import exposition_server
from tests.support.prometheus import ScrapeJob, prometheus_server
from tests.support.server import start_server
from tests.support.waiting import eventually

pytestmark = [pytest.mark.timeout(600), pytest.mark.services]

BODY = "# TYPE orders_total counter\norders_total{shop=\"north\"} 17\n"
# Grafana's calls, with the parameters it sends
ROUTES: list[tuple[str, dict[str, str]]] = [   # (status/tsdb: compared once scraped, below)
    ("status/buildinfo", {}),
    ("status/runtimeinfo", {}),
    ("status/config", {}),
    ("status/flags", {}),
    ("targets", {}),
    ("rules", {}),
    ("alerts", {}),
    ("query_exemplars", {"query": "orders_total", "start": "1700000000", "end": "1700003600"}),
    ("format_query", {"query": "sum  by(shop)(rate(orders_total[5m]))"}),
    ("labels", {}),
    ("label/__name__/values", {}),
    ("metadata", {}),
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Any:
    work = tmp_path_factory.mktemp("grafana-routes")
    with exposition_server() as target:
        target.set(BODY)
        with start_server(work / "shoal", env={"SHOAL_PIPELINES": "true",
                                               "SHOAL_ALLOWED_HOSTS": "127.0.0.1"},
                          extra_args=["--lazy-spark"]) as shoal, prometheus_server(
                work / "prom", scrape=[ScrapeJob("orders", [target.address])]) as prom:
            r = httpx.post(f"{shoal.url}/v1/query", timeout=60, json={
                "sql": "CREATE TABLE orders WITH (scrape_targets = "
                       f"'{target.address}', scrape_interval = '1s', scrape_timeout = '1s', "
                       "scrape_labels = 'env=test')"})
            assert r.status_code == 200, r.text
            yield shoal.url, prom.url, target.address


def _get(url: str, path: str, params: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/{path}", params=params or {}, timeout=60)


def _shape(doc: Any) -> Any:
    """The keys of a document, recursively (list items by the first one's shape)."""
    if isinstance(doc, dict):
        return {k: _shape(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_shape(doc[0])] if doc else []
    return type(doc).__name__


def _up_targets(url: str) -> list[dict[str, Any]]:
    active = _get(url, "targets").json()["data"]["activeTargets"]
    return active if active and all(t["health"] == "up" for t in active) else []


@pytest.mark.parametrize(("path", "params"), ROUTES, ids=[p for p, _ in ROUTES])
def test_grafana_routes_answer_as_prometheus_does(pair, path, params):
    shoal, prom, _ = pair
    ours, theirs = _get(shoal, path, params), _get(prom, path, params)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert ours.headers["content-type"].startswith("application/json")
    a, b = ours.json(), theirs.json()
    assert a["status"] == b["status"] == "success"
    if path in ("status/buildinfo", "status/config", "rules", "alerts", "query_exemplars"):
        assert _shape(a["data"]) == _shape(b["data"]), path
    elif path in ("status/runtimeinfo",):
        assert set(b["data"]) - set(a["data"]) == set(), path
    elif path == "format_query":
        assert a["data"] == b["data"] == "sum by (shop) (rate(orders_total[5m]))"
    elif path in ("labels", "label/__name__/values", "status/flags", "metadata"):
        assert type(a["data"]) is type(b["data"]), path


def test_targets_list_the_scrape_jobs_as_prometheus_lists_its_own(pair):
    shoal, prom, address = pair
    ours = eventually(lambda: _up_targets(shoal), "shoal's target to be scraped")
    theirs = eventually(lambda: _up_targets(prom), "Prometheus's target to be scraped")
    assert [set(t) for t in ours] == [set(t) for t in theirs]
    [t] = ours
    assert t["labels"] == {"env": "test", "instance": address, "job": "orders"}
    assert t["scrapeUrl"] == f"http://{address}/metrics"
    assert t["health"] == "up" and t["lastError"] == ""
    assert t["lastScrape"].endswith("Z") and t["scrapeInterval"] == "1s"
    for state, count in (("active", 1), ("dropped", 0), ("any", 1)):
        doc = _get(shoal, "targets", {"state": state}).json()["data"]
        assert len(doc["activeTargets"]) == count and doc["droppedTargets"] == []
    assert "job_name: \"orders\"" in _get(shoal, "status/config").json()["data"]["yaml"]


def test_tsdb_status_counts_the_series_of_the_last_two_hours(pair):
    shoal, prom, _ = pair
    eventually(lambda: _up_targets(shoal), "shoal's target to be scraped")
    eventually(lambda: _up_targets(prom), "Prometheus's target to be scraped")
    ours, theirs = (_get(u, "status/tsdb").json()["data"] for u in (shoal, prom))
    assert _shape(ours) == _shape(theirs)
    # one series of the exposition plus the five a scrape adds (up, scrape_duration_seconds..)
    assert ours["headStats"]["numSeries"] == theirs["headStats"]["numSeries"] == 6
    assert {"name": "orders_total", "value": 1} in ours["seriesCountByMetricName"]
    assert {"name": "job=orders", "value": 6} in ours["seriesCountByLabelValuePair"]


def test_unknown_routes_and_bad_input_are_prometheus_errors(pair):
    shoal, prom, _ = pair
    r = _get(shoal, "no_such_thing")
    assert r.status_code == 404
    assert r.json() == {"status": "error", "errorType": "not_found",
                        "error": "no API endpoint /api/v1/no_such_thing"}
    for path in ("format_query", "query_exemplars"):
        ours, theirs = (_get(u, path, {"query": "sum(("}) for u in (shoal, prom))
        assert ours.status_code == theirs.status_code == 400
        assert set(ours.json()) == set(theirs.json()) == {"status", "errorType", "error"}
        assert ours.json()["errorType"] == theirs.json()["errorType"] == "bad_data"
    r = httpx.delete(f"{shoal}/api/v1/query", timeout=60)
    assert r.status_code == 405 and r.json()["status"] == "error"
