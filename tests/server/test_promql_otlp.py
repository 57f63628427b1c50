"""PromQL over the OTLP metrics table: OTLP/HTTP metrics sent to a live `shoal serve` are
queryable through the Prometheus API under Prometheus's OTLP translation (names and label
names with `.` -> `_`, `service.name` -> `job`, cumulative sums as counters, histograms as
`_bucket{le}`/`_sum`/`_count`); delta sums are not mapped.

By default they keep out of Prometheus's own namespace: each name gets `otel_` in front, so
a remote-written `cpu_temp` and an OTLP `cpu.temp` stay two metrics. Asked for with
`SHOAL_PROMQL_OTLP_METRICS=bare` they take Prometheus's names; `off` leaves them out.
"""

from __future__ import annotations

from contextlib import contextmanager

import httpx
import pytest

from tests.support.promdata import load_samples
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


@contextmanager
def _serve(tmp_path_factory, mode: str | None):
    env = {"SHOAL_PROMQL_OTLP_METRICS": mode} if mode else {}
    with start_server(tmp_path_factory.mktemp("promql-otlp"), env=env,
                      extra_args=["--lazy-spark"]) as server:
        for n in range(1, 5):
            r = httpx.post(f"{server.url}/v1/metrics", json=_export(T0 + 15 * n, n))
            assert r.status_code == 200, r.text
        # a Prometheus series of the same name as the OTLP gauge, remote-written
        load_samples(server.url, [((T0 + 45) * 1000, {"__name__": "cpu_temp", "job": "node"},
                                   99.0)])
        yield server


@pytest.fixture(scope="module")
def shoal(tmp_path_factory):
    with _serve(tmp_path_factory, None) as server:
        yield server


def _result(url: str, expr: str) -> list[dict]:
    r = httpx.get(f"{url}/api/v1/query", params={"query": expr, "time": T0 + 60})
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def test_gauges_and_cumulative_sums_are_series(shoal):
    [gauge] = _result(shoal.url, "otel_cpu_temp")
    assert gauge["metric"] == {"__name__": "otel_cpu_temp", "job": "checkout",
                               "instance": "pod-1", "http_method": "GET"}
    assert gauge["value"][1] == "24.5"
    [counter] = _result(shoal.url, 'otel_http_requests{job="checkout"}')
    assert counter["value"][1] == "400"
    # 4 samples 15 s apart rising by 100 each: 300 over 45 s
    [delta] = _result(shoal.url, "otel_http_requests - otel_http_requests offset 45s")
    assert delta["value"][1] == "300"


def test_histograms_become_buckets_sum_and_count(shoal):
    buckets = {r["metric"]["le"]: r["value"][1]
               for r in _result(shoal.url, "otel_http_duration_bucket")}
    assert buckets == {"0.1": "8", "1": "24", "+Inf": "40"}
    assert _result(shoal.url, "otel_http_duration_count")[0]["value"][1] == "40"
    assert _result(shoal.url, "otel_http_duration_sum")[0]["value"][1] == "18"
    # cumulative [8, 24, 40]: rank 20 falls in (0.1, 1]: 0.1 + 0.9 * 12/16
    [q] = _result(shoal.url, "histogram_quantile(0.5, otel_http_duration_bucket)")
    assert float(q["value"][1]) == pytest.approx(0.775)


def test_delta_sums_are_not_mapped(shoal):
    assert _result(shoal.url, "otel_http_errors") == []
    names = httpx.get(f"{shoal.url}/api/v1/label/__name__/values").json()["data"]
    assert {"otel_cpu_temp", "otel_http_requests", "otel_http_duration_bucket"} <= set(names)
    assert "otel_http_errors" not in names


def test_otlp_metrics_stay_out_of_the_prometheus_namespace_by_default(shoal):
    # the Prometheus series alone answers its name; the OTLP gauge only under its prefix
    [prom] = _result(shoal.url, "cpu_temp")
    assert prom["metric"] == {"__name__": "cpu_temp", "job": "node"}
    assert [r["metric"]["job"] for r in _result(shoal.url, "otel_cpu_temp")] == ["checkout"]
    names = httpx.get(f"{shoal.url}/api/v1/label/__name__/values").json()["data"]
    assert not {"http_requests", "http_duration_bucket"} & set(names)


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    with _serve(tmp_path_factory, "bare") as server:
        yield server


def test_bare_names_are_asked_for_and_then_share_the_namespace(bare):
    jobs = sorted(r["metric"]["job"] for r in _result(bare.url, "cpu_temp"))
    assert jobs == ["checkout", "node"]
    assert _result(bare.url, "otel_cpu_temp") == []
    assert _result(bare.url, 'http_requests{job="checkout"}')[0]["value"][1] == "400"


def test_off_leaves_otlp_metrics_out_of_promql(tmp_path_factory):
    with _serve(tmp_path_factory, "off") as server:
        assert [r["metric"]["job"] for r in _result(server.url, "cpu_temp")] == ["node"]
        assert _result(server.url, "otel_cpu_temp") == []
        names = httpx.get(f"{server.url}/api/v1/label/__name__/values").json()["data"]
        assert names == ["cpu_temp"]
