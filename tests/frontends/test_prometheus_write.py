"""Prometheus remote write (`POST /api/v1/write`) over a real socket: what lands, and the
answers Prometheus acts on (204 committed, 400 dropped, 413, 415, 401, 429/503 retried).

Bodies are built with the protocol's own messages (`remote_write_pb2`) and snappy block
compression, as Prometheus sends them; the real-Prometheus end-to-end test is
`test_prometheus_remote_write_live.py`.
"""

from __future__ import annotations

import json
import math
import struct
import threading
from collections.abc import Iterator

import httpx
import pytest

import shoal
from shoal.frontends.prometheus.remote_write_pb2 import MetricMetadata, WriteRequest
from shoal.ingest.buffer import StagingBuffer
from shoal.ingest.write_path import WritePath
from shoal.server import create_app
from shoal.types.prometheus import STALE_NAN_BITS, join_value, series_id, series_key
from tests.support.promdata import REMOTE_WRITE_HEADERS as HEADERS
from tests.support.promdata import snappy, write_request
from tests.support.server import serve_app
from tests.support.waiting import eventually

STALE = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
BODY_CAP = 64 << 10


class Live:
    def __init__(self, url: str, db: shoal.Shoal, app) -> None:
        self.url, self.db, self.app = url, db, app

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.post(f"{self.url}/api/v1/write", content=body,
                          headers=HEADERS if headers is None else headers, timeout=30)

    def rows(self, table: str = "prom_samples") -> list[dict]:
        data, _ = self.db.read(table)
        return data.sort_by([("series", "ascending"), ("_timestamp", "ascending")]).to_pylist()

    def exists(self, table: str) -> bool:
        return table in {t.name for t in self.db.catalog.list_tables()}


def live_server(data_dir, **config) -> Iterator[Live]:
    db = shoal.connect(data_dir=str(data_dir), **config)
    app = create_app(db, config=db.config, max_body_bytes=BODY_CAP, sweep_ledger=False)
    try:
        with serve_app(app) as url:
            yield Live(url, db, app)
    finally:
        db.close()


@pytest.fixture
def live(tmp_path) -> Iterator[Live]:
    yield from live_server(tmp_path / "data")


def test_samples_land_one_row_each_with_series_columns(live):
    req = write_request(
        ({"__name__": "http_requests_total", "job": "api", "code": "200", "empty": ""},
         [(1_700_000_000_000, 5.0), (1_700_000_001_000, 7.0)]),
        ({"__name__": "up", "job": "api"}, [(1_700_000_000_500, 1.0)]))
    r = live.post(snappy(req))
    assert r.status_code == 204, r.text
    rows = live.rows()
    key = 'http_requests_total{code="200",job="api"}'
    assert [(r["series"], r["_timestamp"].timestamp(), r["value"]) for r in rows] == [
        (key, 1_700_000_000.0, 5.0), (key, 1_700_000_001.0, 7.0),
        ('up{job="api"}', 1_700_000_000.5, 1.0)]
    first = rows[0]
    assert first["metric"] == "http_requests_total"
    assert json.loads(first["labels"]) == {"code": "200", "job": "api"}
    assert first["series_id"] == series_id(series_key("http_requests_total",
                                                      {"code": "200", "job": "api"}))
    assert first["special"] is None and first["histogram"] is None


def test_stale_markers_nan_and_infinities_go_to_special(live):
    values = [STALE, math.nan, math.inf, -math.inf, 0.5]
    req = write_request(({"__name__": "g"}, [(1000 + i, v) for i, v in enumerate(values)]))
    assert live.post(snappy(req)).status_code == 204
    rows = live.rows()
    assert [(r["value"], r["special"]) for r in rows] == [
        (None, "stale"), (None, "NaN"), (None, "+Inf"), (None, "-Inf"), (0.5, None)]
    back = [join_value(r["value"], r["special"]) for r in rows]
    assert struct.pack("<d", back[0]) == struct.pack("<d", STALE)   # the marker's own bits
    assert math.isnan(back[1]) and back[2:] == [math.inf, -math.inf, 0.5]


def test_native_histograms_land_as_json_and_exemplars_are_dropped(live):
    req = write_request(({"__name__": "lat_seconds", "job": "a"}, []))
    ts = req.timeseries[0]
    ts.exemplars.add(value=0.3, timestamp=5000).labels.add(name="trace_id", value="abc")
    h = ts.histograms.add(count_int=6, sum=2.5, schema=3, zero_threshold=1e-128,
                          zero_count_int=1, timestamp=5000, reset_hint=2)
    h.positive_spans.add(offset=-2, length=2)
    h.positive_spans.add(offset=1, length=1)
    h.positive_deltas.extend([2, -1, 2])
    stale = ts.histograms.add(count_float=0, sum=STALE, timestamp=6000)
    assert stale.sum != stale.sum
    fh = req.timeseries.add()
    fh.labels.add(name="__name__", value="f")
    fh.histograms.add(count_float=math.inf, sum=1.0, timestamp=7000, zero_count_float=0.5)
    fh.histograms[0].negative_counts.extend([1.5, math.nan])
    assert live.post(snappy(req)).status_code == 204
    rows = {(r["metric"], r["_timestamp"].timestamp()): r for r in live.rows()}
    assert len(rows) == 3
    native = rows[("lat_seconds", 5.0)]
    assert native["value"] is None and native["special"] is None
    assert json.loads(native["histogram"]) == {
        "count": 6, "sum": 2.5, "schema": 3, "zero_threshold": 1e-128, "zero_count": 1,
        "reset_hint": "no", "negative_spans": [], "negative_deltas": [],
        "positive_spans": [[-2, 2], [1, 1]], "positive_deltas": [2, -1, 2]}
    marker = rows[("lat_seconds", 6.0)]
    assert marker["special"] == "stale" and marker["histogram"] is None
    floats = json.loads(rows[("f", 7.0)]["histogram"])
    assert floats["count"] == "+Inf" and floats["zero_count"] == 0.5
    assert floats["negative_counts"] == [1.5, "NaN"] and floats["positive_counts"] == []


def test_metadata_rows_land(live):
    req = WriteRequest()
    req.metadata.add(type=MetricMetadata.COUNTER, metric_family_name="http_requests_total",
                     help="Requests served.", unit="")
    req.metadata.add(type=MetricMetadata.HISTOGRAM, metric_family_name="lat_seconds",
                     help="Latency.", unit="seconds")
    assert live.post(snappy(req)).status_code == 204
    data, _ = live.db.read("prom_metadata")
    assert sorted((r["metric"], r["type"], r["help"], r["unit"]) for r in data.to_pylist()) == [
        ("http_requests_total", "counter", "Requests served.", None),
        ("lat_seconds", "histogram", "Latency.", "seconds")]
    assert not live.exists("prom_samples")      # metadata only: no samples table made


def test_a_replayed_body_is_written_once(live):
    req = write_request(({"__name__": "c", "i": "1"}, [(1000, 1.0), (2000, 2.0)]))
    req.metadata.add(type=MetricMetadata.GAUGE, metric_family_name="c", help="h")
    body = snappy(req)
    for _ in range(3):       # Prometheus resends the identical body after a timeout
        assert live.post(body).status_code == 204
    assert [r["value"] for r in live.rows()] == [1.0, 2.0]
    assert live.db.read("prom_metadata")[0].num_rows == 1
    metrics = httpx.get(f"{live.url}/metrics").text
    assert 'shoal_ingest_replays_total{table="prom_samples"} 2.0' in metrics
    # A different body (one more sample) is a new write.
    req.timeseries[0].samples.add(timestamp=3000, value=3.0)
    assert live.post(snappy(req)).status_code == 204
    assert [r["value"] for r in live.rows()] == [1.0, 1.0, 2.0, 2.0, 3.0]


GOOD = write_request(({"__name__": "x"}, [(1000, 1.0)]))


@pytest.mark.parametrize(("body", "message"), [
    (b"", "not valid snappy"),
    (b"\xff\xff\xff\xff\xff\xff", "not valid snappy"),
    (snappy(GOOD)[:-4], "snappy"),                                  # truncated
    (GOOD.SerializeToString(), "snappy"),                           # not compressed
    (snappy(b"\x0a\xff\xff\xff\x0f"), "not a protobuf prometheus.WriteRequest"),
    (snappy(GOOD.SerializeToString()[:-3]), "not a protobuf prometheus.WriteRequest"),
    (snappy(write_request(({}, [(1, 1.0)]))), "timeseries[0]: a series without labels"),
    (snappy(write_request(({"__name__": "x"}, []), ({"": "v"}, [(1, 1.0)]))),
     "timeseries[1]: a label with an empty name"),
    (snappy(write_request(({"a": ""}, [(1, 1.0)]))), "timeseries[0]: every label value"),
    (snappy(write_request(({"__name__": "x"}, [(1, 1.0), (2**62, 1.0)]))),
     "timeseries[0].samples[1]: timestamp"),
])
def test_malformed_bodies_are_400_with_a_message_and_write_nothing(live, body, message):
    r = live.post(body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("text/plain")
    assert message in r.text and r.text.count("\n") == 1
    assert not live.exists("prom_samples")


def test_repeated_label_name_is_400(live):
    req = write_request(({"__name__": "x"}, [(1, 1.0)]))
    req.timeseries[0].labels.add(name="__name__", value="y")
    r = live.post(snappy(req))
    assert r.status_code == 400 and "label '__name__' appears twice" in r.text


def test_too_large_is_413_before_and_after_decompression(live):
    big = write_request(({"__name__": "x", "pad": "p" * (BODY_CAP * 2)}, [(1, 1.0)]))
    body = snappy(big)
    assert len(body) < BODY_CAP      # compresses well: only the decoded size is over
    r = live.post(body)
    assert r.status_code == 413 and "exceeds the limit" in r.text
    r = live.post(b"\0" * (BODY_CAP + 1))
    assert r.status_code == 413
    assert not live.exists("prom_samples")


def test_too_many_samples_is_413_before_rows_are_built(live, monkeypatch):
    import shoal.frontends.prometheus.remote_write as rw

    monkeypatch.setattr(rw, "MAX_SAMPLES", 1000)       # the real cap is 100,000
    ok = write_request(*(({"__name__": "s", "i": str(i)}, [(1, 1.0)]) for i in range(1000)))
    assert live.post(snappy(ok)).status_code == 204
    over = write_request(({"__name__": "one"}, [(t, 1.0) for t in range(1001)]))
    r = live.post(snappy(over))
    assert r.status_code == 413 and "more than 1,000 samples" in r.text
    assert "max_samples_per_send" in r.text
    assert len(live.rows()) == 1000


@pytest.mark.parametrize("headers", [
    {"Content-Type": "application/json", "Content-Encoding": "snappy"},
    {"Content-Encoding": "snappy"},
    {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    {"Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request",
     "Content-Encoding": "snappy"},
])
def test_wrong_content_type_or_encoding_is_415(live, headers):
    r = live.post(snappy(GOOD), headers=headers)
    assert r.status_code == 415 and "remote write 1.0 takes" in r.text


def test_explicit_v1_proto_parameter_and_missing_encoding_are_accepted(live):
    headers = {**HEADERS,
               "Content-Type": "application/x-protobuf; proto=prometheus.WriteRequest"}
    assert live.post(snappy(GOOD), headers=headers).status_code == 204
    # No Content-Encoding: read as snappy, as Prometheus's own receiver does.
    r = live.post(snappy(write_request(({"__name__": "y"}, [(1, 2.0)]))),
                  headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 204 and [r["metric"] for r in live.rows()] == ["x", "y"]


def test_tokens_need_the_ingest_scope(tmp_path):
    for lv in live_server(tmp_path / "auth", tokens="ing=ingest;q=query"):
        assert lv.post(snappy(GOOD)).status_code == 401
        r = lv.post(snappy(GOOD), headers={**HEADERS, "Authorization": "Bearer q"})
        assert r.status_code == 403
        r = lv.post(snappy(GOOD), headers={**HEADERS, "Authorization": "Bearer ing"})
        assert r.status_code == 204 and len(lv.rows()) == 1


def test_not_accepting_is_503_with_retry_after(live):
    state = live.app.state.shoal
    state.accepting = False
    try:
        r = live.post(snappy(GOOD))
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
    finally:
        state.accepting = True
    assert live.post(snappy(GOOD)).status_code == 204


def test_full_staging_buffer_is_429_with_retry_after_and_the_retry_lands(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path))
    # Test-only wiring (as tests/server/test_ops_http.py): a buffer that holds one request
    # at a time until the test flushes it (a plain debounce timer, not ended early when no
    # other request is arriving); the long debounce is only a hang guard.
    buffer = StagingBuffer(db.catalog, db.coordinator, max_pending_bytes=1, debounce_s=120,
                           retry_after_s=2.5, early_flush=False)
    db._write_path = WritePath(db.catalog, db.coordinator, buffer=buffer)
    app = create_app(db, config=db.config, sweep_ledger=False)
    try:
        with serve_app(app) as url:
            lv = Live(url, db, app)
            first: list[httpx.Response] = []
            t = threading.Thread(target=lambda: first.append(lv.post(snappy(GOOD))))
            t.start()
            eventually(lambda: buffer.pending_bytes, "the first request to be buffered")
            second = snappy(write_request(({"__name__": "y"}, [(2000, 2.0)])))
            r = lv.post(second)
            assert r.status_code == 429 and r.headers["retry-after"] == "3", r.text
            buffer.flush("prom_samples")
            buffer.debounce_s = 0.0
            t.join(timeout=30)
            assert first[0].status_code == 204
            # The refused body wrote nothing, not even its key: Prometheus's resend lands.
            assert lv.post(second).status_code == 204
            assert [r["metric"] for r in lv.rows()] == ["x", "y"]
    finally:
        db.close()


def test_the_same_body_sent_concurrently_is_written_once(live):
    """Prometheus resends after a timeout while the first attempt may still be committing."""
    req = write_request(*(({"__name__": "c", "i": str(i)}, [(1000, float(i))])
                          for i in range(200)))
    body = snappy(req)
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(live.post(body).status_code))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert answers == [204] * 6
    assert sorted(r["value"] for r in live.rows()) == [float(i) for i in range(200)]


class MetadataRefused:
    """A write path whose first metadata write fails after the samples committed: a fault
    (shoal dying between the two commits) this test cannot time for real, so it is faked
    as backpressure on the metadata table only."""

    def __init__(self, inner) -> None:
        self.inner, self.catalog, self.refused = inner, inner.catalog, 0

    def ingest_arrow(self, table, *args, **kwargs):
        if table == "prom_metadata" and not self.refused:
            self.refused += 1
            from shoal.errors import BackpressureError
            raise BackpressureError("staging buffer full; retry later")
        return self.inner.ingest_arrow(table, *args, **kwargs)


def test_a_resend_after_a_half_written_body_completes_it_exactly_once(live, monkeypatch):
    sink = live.app.state.prom_write_sink
    monkeypatch.setattr(sink, "write_path", MetadataRefused(sink.write_path))
    req = write_request(({"__name__": "c"}, [(1000, 1.0), (2000, 2.0)]))
    req.metadata.add(type=MetricMetadata.COUNTER, metric_family_name="c", help="h")
    body = snappy(req)
    r = live.post(body)
    assert r.status_code == 429 and "retry-after" in r.headers    # Prometheus resends
    assert [r["value"] for r in live.rows()] == [1.0, 2.0]        # the samples committed
    assert live.post(body).status_code == 204
    assert [r["value"] for r in live.rows()] == [1.0, 2.0]        # not again
    assert live.db.read("prom_metadata")[0].num_rows == 1
