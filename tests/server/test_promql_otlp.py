"""PromQL over the OTLP metrics table: OTLP/HTTP metrics sent to a live `shoal serve` are
queryable through the Prometheus API under Prometheus's OTLP translation (names and label
names with `.` -> `_`, `service.name` -> `job`, cumulative sums as counters, histograms as
`_bucket{le}`/`_sum`/`_count`); delta sums are not mapped.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.server import start_server

pytestmark = pytest.mark.services

T0 = 1_700_000_000


def _attr(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def _export(t: int, n: int) -> dict:
    ns = str(t * 1_000_000_000)
    attrs = [_attr("http.method", "GET")]
    return {"resourceMetrics": [{
        "resource": {"attributes": [_attr("service.name", "checkout"),
                                    _attr("service.instance.id", "pod-1")]},
        "scopeMetrics": [{"metrics": [
            {"name": "cpu.temp", "gauge": {"dataPoints": [
                {"timeUnixNano": ns, "asDouble": 20.5 + n, "attributes": attrs}]}},
            {"name": "http.requests", "sum": {
                "aggregationTemporality": 2, "isMonotonic": True, "dataPoints": [
                    {"timeUnixNano": ns, "asInt": str(100 * n), "attributes": attrs}]}},
            {"name": "http.errors", "sum": {
                "aggregationTemporality": 1, "isMonotonic": True, "dataPoints": [
                    {"timeUnixNano": ns, "asInt": "3", "attributes": attrs}]}},
            {"name": "http.duration", "histogram": {
                "aggregationTemporality": 2, "dataPoints": [
                    {"timeUnixNano": ns, "count": str(10 * n), "sum": 4.5 * n,
                     "bucketCounts": [str(2 * n), str(4 * n), str(4 * n)],
                     "explicitBounds": [0.1, 1], "attributes": attrs}]}},
        ]}]}]}


@pytest.fixture(scope="module")
def shoal(tmp_path_factory):
    with start_server(tmp_path_factory.mktemp("promql-otlp"),
                      extra_args=["--lazy-spark"]) as server:
        for n in range(1, 5):
            r = httpx.post(f"{server.url}/v1/metrics", json=_export(T0 + 15 * n, n))
            assert r.status_code == 200, r.text
        yield server


def _result(url: str, expr: str) -> list[dict]:
    r = httpx.get(f"{url}/api/v1/query", params={"query": expr, "time": T0 + 60})
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def test_gauges_and_cumulative_sums_are_series(shoal):
    [gauge] = _result(shoal.url, "cpu_temp")
    assert gauge["metric"] == {"__name__": "cpu_temp", "job": "checkout",
                               "instance": "pod-1", "http_method": "GET"}
    assert gauge["value"][1] == "24.5"
    [counter] = _result(shoal.url, 'http_requests{job="checkout"}')
    assert counter["value"][1] == "400"
    # 4 samples 15 s apart rising by 100 each: 300 over 45 s
    [delta] = _result(shoal.url, "http_requests - http_requests offset 45s")
    assert delta["value"][1] == "300"


def test_histograms_become_buckets_sum_and_count(shoal):
    buckets = {r["metric"]["le"]: r["value"][1]
               for r in _result(shoal.url, "http_duration_bucket")}
    assert buckets == {"0.1": "8", "1": "24", "+Inf": "40"}
    assert _result(shoal.url, "http_duration_count")[0]["value"][1] == "40"
    assert _result(shoal.url, "http_duration_sum")[0]["value"][1] == "18"
    # cumulative [8, 24, 40]: rank 20 falls in (0.1, 1]: 0.1 + 0.9 * 12/16
    [q] = _result(shoal.url, "histogram_quantile(0.5, http_duration_bucket)")
    assert float(q["value"][1]) == pytest.approx(0.775)


def test_delta_sums_are_not_mapped(shoal):
    assert _result(shoal.url, "http_errors") == []
    names = httpx.get(f"{shoal.url}/api/v1/label/__name__/values").json()["data"]
    assert {"cpu_temp", "http_requests", "http_duration_bucket"} <= set(names)
    assert "http_errors" not in names
