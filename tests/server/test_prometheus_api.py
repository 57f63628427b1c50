"""The Prometheus HTTP API's own behaviour beyond the differential test: staleness markers,
metadata, the sample limit, the scope, and the error documents.

A live `shoal serve` (`--lazy-spark`: PromQL never needs Spark) with a tiny
`SHOAL_PROMQL_MAX_SAMPLES`, so the limit is reachable with a few samples.
"""

from __future__ import annotations

import struct

import httpx
import pytest

from shoal.types.prometheus import PROM_METADATA_SCHEMA, STALE_NAN_BITS
from tests.support.promdata import load_samples
from tests.support.server import start_server

pytestmark = pytest.mark.services

T0 = 1_700_000_000
STALE = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
QUERY_TOKEN, INGEST_TOKEN, ADMIN_TOKEN = "q-token", "i-token", "a-token"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def shoal(tmp_path_factory):
    tokens = {QUERY_TOKEN: ["query"], INGEST_TOKEN: ["ingest"], ADMIN_TOKEN: ["admin"]}
    with start_server(tmp_path_factory.mktemp("prom-api"), tokens=tokens,
                      env={"SHOAL_PROMQL_MAX_SAMPLES": "500"},
                      extra_args=["--lazy-spark"]) as server:
        rows = []
        # `up` has a sample every 15 s until T0+60, then a staleness marker at T0+75
        for i in range(5):
            rows.append(((T0 + 15 * i) * 1000, {"__name__": "up", "job": "a"}, 1.0))
        rows.append(((T0 + 75) * 1000, {"__name__": "up", "job": "a"}, STALE))
        rows.append(((T0 + 120) * 1000, {"__name__": "up", "job": "a"}, 1.0))
        # `big`: 600 samples, over the limit of 500
        rows += [((T0 + i) * 1000, {"__name__": "big", "i": str(i % 3)}, float(i))
                 for i in range(600)]
        rows.append(((T0 + 30) * 1000, {"__name__": "odd", "job": "a"}, float("nan")))
        rows.append(((T0 + 30) * 1000, {"__name__": "odd", "job": "b"}, float("inf")))
        load_samples(server.url, rows, headers=AUTH)
        yield server


def _query(url: str, expr: str, at: float, token: str = QUERY_TOKEN) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/query", params={"query": expr, "time": at},
                     headers={"Authorization": f"Bearer {token}"}, timeout=60)


def test_a_staleness_marker_ends_the_series_until_its_next_sample(shoal):
    def present(at: float) -> bool:
        return bool(_query(shoal.url, "up", at).json()["data"]["result"])
    assert present(T0 + 70)            # the sample of T0+60, inside the lookback
    assert not present(T0 + 80)        # the marker of T0+75 ends it at once
    assert not present(T0 + 119)
    assert present(T0 + 121)           # the next sample brings it back
    # range windows skip the marker: 5 samples in [T0, T0+100]
    r = _query(shoal.url, "count_over_time(up[100s])", T0 + 100)
    assert r.json()["data"]["result"][0]["value"][1] == "5"


def test_special_values_are_written_as_prometheus_writes_them(shoal):
    result = _query(shoal.url, "odd", T0 + 40).json()["data"]["result"]
    assert {r["metric"]["job"]: r["value"][1] for r in result} == {"a": "NaN", "b": "+Inf"}


def test_too_many_samples_is_422_execution(shoal):
    r = _query(shoal.url, "sum_over_time(big[1h])", T0 + 700)
    assert r.status_code == 422
    assert r.json() == {"status": "error", "errorType": "execution",
                        "error": "query processing would load too many samples into memory "
                                 "in query execution"}
    # a subquery whose inner steps alone exceed the limit is refused before it runs
    inner = _query(shoal.url, "max_over_time(vector(1)[1y:1s])", T0 + 650)
    assert inner.status_code == 422 and inner.json()["errorType"] == "execution"
    small = _query(shoal.url, "sum_over_time(big[100s])", T0 + 650)
    assert small.status_code == 200 and len(small.json()["data"]["result"]) == 3


def test_the_api_needs_the_query_scope(shoal):
    assert httpx.get(f"{shoal.url}/api/v1/query", params={"query": "up"}).status_code == 401
    assert _query(shoal.url, "up", T0, token=INGEST_TOKEN).status_code == 403
    assert _query(shoal.url, "up", T0, token=ADMIN_TOKEN).status_code == 200


def test_a_post_takes_a_form_body_only(shoal):
    headers = {"Authorization": f"Bearer {QUERY_TOKEN}"}
    r = httpx.post(f"{shoal.url}/api/v1/query", content=b'{"query": "up"}',
                   headers={**headers, "Content-Type": "application/json"})
    assert r.status_code == 415 and r.json()["errorType"] == "bad_data"
    r = httpx.post(f"{shoal.url}/api/v1/query", data={"query": "up", "time": str(T0 + 70)},
                   headers=headers)
    assert r.status_code == 200 and len(r.json()["data"]["result"]) == 1


def test_metadata_is_the_newest_row_per_metric(shoal):
    columns = [{"name": c.name, "type": c.type.kind} for c in PROM_METADATA_SCHEMA.columns
               if c.name not in ("_timestamp", "props")]
    r = httpx.post(f"{shoal.url}/v1/tables", headers=AUTH,
                   json={"name": "prom_metadata", "columns": columns})
    assert r.status_code == 201, r.text
    body = b"\n".join([
        b'{"_timestamp": 1000000000, "metric": "up", "type": "gauge", "help": "old", "unit": ""}',
        b'{"_timestamp": 2000000000, "metric": "up", "type": "gauge", "help": "new", "unit": ""}',
        b'{"_timestamp": 1500000000, "metric": "big", "type": "counter", "help": "b", '
        b'"unit": "bytes"}'])
    assert httpx.post(f"{shoal.url}/v1/ingest/prom_metadata", content=body,
                      headers=AUTH).status_code == 200
    headers = {"Authorization": f"Bearer {QUERY_TOKEN}"}
    doc = httpx.get(f"{shoal.url}/api/v1/metadata", headers=headers).json()
    assert doc == {"status": "success", "data": {
        "big": [{"type": "counter", "help": "b", "unit": "bytes"}],
        "up": [{"type": "gauge", "help": "new", "unit": ""}]}}
    one = httpx.get(f"{shoal.url}/api/v1/metadata", params={"metric": "up"},
                    headers=headers).json()
    assert list(one["data"]) == ["up"]


def test_a_query_past_its_timeout_is_503_timeout(shoal):
    """The request's `timeout` (smaller than the server's query_timeout_s) bounds the
    evaluation; the answer is Prometheus's timeout document."""
    r = httpx.get(f"{shoal.url}/api/v1/query", params={
        "query": "sum_over_time(big[100s])", "time": T0 + 650, "timeout": "0.000001"},
        headers={"Authorization": f"Bearer {QUERY_TOKEN}"})
    assert r.status_code == 503
    assert r.json()["status"] == "error" and r.json()["errorType"] == "timeout"
    assert r.json()["error"].startswith("query timed out in expression evaluation")
