"""Must show: the `prometheus-api-client` library talks to shoal as to Prometheus.

A live `shoal serve` holds a small history (`tests.support.promdata`); the client's
`custom_query`, `custom_query_range`, `get_current_metric_value`, `get_metric_range_data`
and `all_metrics` get well-formed answers. A malformed query gets Prometheus's error
document with the same errorType and HTTP status the real Prometheus gives for it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from tests.support.promdata import history, load_samples, openmetrics, samples
from tests.support.prometheus import prometheus_server
from tests.support.server import start_server

pytestmark = pytest.mark.services

T0 = 1_699_999_200
END = T0 + 3600


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    families = history(T0, minutes=60)
    work = tmp_path_factory.mktemp("promql-client")
    with prometheus_server(work / "prom", backfill_text=openmetrics(families)) as prom, \
            start_server(work / "shoal", extra_args=["--lazy-spark"]) as shoal:
        load_samples(shoal.url, list(samples(families)))
        yield prom.url, shoal.url


def test_the_client_reads_shoal(urls):
    _, shoal = urls
    pc = PrometheusConnect(url=shoal, disable_ssl=True)
    at = datetime.fromtimestamp(END, tz=timezone.utc)
    start = datetime.fromtimestamp(T0 + 600, tz=timezone.utc)

    result = pc.custom_query("sum by (job) (rate(http_requests_total[5m]))",
                             params={"time": END})
    assert sorted(r["metric"]["job"] for r in result) == ["api", "web"]
    assert all(float(r["value"][1]) > 0 and r["value"][0] == END for r in result)

    matrix = pc.custom_query_range("avg(temperature)", start_time=start, end_time=at,
                                   step="60")
    assert len(matrix) == 1 and matrix[0]["metric"] == {}
    assert [p[0] for p in matrix[0]["values"]] == list(range(T0 + 600, END + 1, 60))

    current = pc.get_current_metric_value("temperature", label_config={"job": "api"},
                                          params={"time": END})
    assert sorted(r["metric"]["instance"] for r in current) == ["i1", "i2"]
    assert all(r["metric"]["__name__"] == "temperature" for r in current)

    ranged = pc.get_metric_range_data("http_requests_total", label_config={"instance": "i1"},
                                      start_time=start, end_time=at)
    assert sorted(r["metric"]["job"] for r in ranged) == ["api", "web"]
    # one chunk = the whole range as `name[duration]` at the end time: raw samples
    assert all(len(r["values"]) > 10 for r in ranged)

    names = pc.all_metrics()
    assert {"http_requests_total", "temperature", "job_info",
            "request_duration_seconds_bucket"} <= set(names)


def test_a_malformed_query_fails_as_in_prometheus(urls):
    prom, shoal = urls
    bad = "sum(rate(http_requests_total[5m])"
    with pytest.raises(PrometheusApiClientException) as raised:
        PrometheusConnect(url=shoal, disable_ssl=True).custom_query(bad)
    assert "parse error" in str(raised.value)
    want = httpx.get(f"{prom}/api/v1/query", params={"query": bad})
    got = httpx.get(f"{shoal}/api/v1/query", params={"query": bad})
    assert got.status_code == want.status_code == 400
    assert got.json()["status"] == "error"
    assert got.json()["errorType"] == want.json()["errorType"] == "bad_data"
    # POST with a form body, as Grafana sends it, answers the same
    posted = httpx.post(f"{shoal}/api/v1/query", data={"query": bad})
    assert posted.status_code == 400 and posted.json()["errorType"] == "bad_data"


def test_api_limits_and_parameters(urls):
    _, shoal = urls
    too_fine = httpx.get(f"{shoal}/api/v1/query_range", params={
        "query": "temperature", "start": T0, "end": END, "step": "0.1"})
    assert too_fine.status_code == 400
    assert "11,000 points" in too_fine.json()["error"]
    bad_time = httpx.get(f"{shoal}/api/v1/query", params={"query": "1", "time": "yesterday"})
    assert bad_time.status_code == 400 and '"time"' in bad_time.json()["error"]
    rfc = httpx.post(f"{shoal}/api/v1/query_range", data={
        "query": "temperature", "start": "2023-11-14T22:00:00Z",
        "end": "2023-11-14T22:10:00.000Z", "step": "5m"})
    assert rfc.status_code == 200
    assert [p[0] for p in rfc.json()["data"]["result"][0]["values"]] == [
        1699999200, 1699999500, 1699999800]
    series = httpx.get(f"{shoal}/api/v1/series", params={"match[]": 'temperature{job="web"}'})
    assert sorted(s["instance"] for s in series.json()["data"]) == ["i1", "i2", "i3"]
    values = httpx.get(f"{shoal}/api/v1/label/instance/values")
    assert values.json()["data"] == ["i1", "i2", "i3"]
    labels = httpx.get(f"{shoal}/api/v1/labels").json()["data"]
    assert {"__name__", "job", "instance", "le", "team"} <= set(labels)
    info = httpx.get(f"{shoal}/api/v1/status/buildinfo").json()
    assert info["status"] == "success" and info["data"]["version"]
