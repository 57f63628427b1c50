"""OTLP messages -> rows, without a server: AnyValue and attribute nesting, every metric
type (summary included, which the Python SDK does not produce), refusals, schemas."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs_svc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_svc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from shoal.config import load_config
from shoal.errors import ConfigError
from shoal.frontends.otlp import SCHEMAS, OtlpTables
from shoal.frontends.otlp.codec import (REQUEST_TYPES, OtlpPayloadError, decode_request,
                                        encode_response)
from shoal.frontends.otlp.mapping import map_logs, map_metrics, map_request
from shoal.frontends.otlp.values import (any_value, attributes, attributes_json, nest,
                                         to_json)


def av(**kw) -> common_pb2.AnyValue:
    return common_pb2.AnyValue(**kw)


def kv(key: str, **kw) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=av(**kw))


def test_any_value_kinds():
    assert any_value(av(string_value="s")) == "s"
    assert any_value(av(int_value=-(2 ** 63))) == -(2 ** 63)
    assert any_value(av(double_value=0.5)) == 0.5
    assert any_value(av(double_value=float("nan"))) is None
    assert any_value(av(bool_value=False)) is False
    assert any_value(av(bytes_value=b"\x00\xff")) == "AP8="
    assert any_value(av()) is None
    arr = av(array_value=common_pb2.ArrayValue(values=[av(int_value=1), av(string_value="x")]))
    assert any_value(arr) == [1, "x"]
    kvl = av(kvlist_value=common_pb2.KeyValueList(values=[kv("a.b", bool_value=True)]))
    assert any_value(kvl) == {"a.b": True}          # keys inside a kvlist stay as sent


def test_nest_dotted_keys():
    assert nest([("http.method", "GET"), ("http.route", "/a"), ("n", 1)]) == \
        {"http": {"method": "GET", "route": "/a"}, "n": 1}
    # a prefix holding a value keeps the longer key literal at that level, in any order
    for items in ([("db.system", "pg"), ("db.system.name", "postgresql")],
                  [("db.system.name", "postgresql"), ("db.system", "pg")]):
        assert nest(items) == {"db": {"system": "pg", "system.name": "postgresql"}}
    assert nest([("a..b", 1), (".x", 2), ("y.", 3)]) == {"a..b": 1, ".x": 2, "y.": 3}
    assert nest([("k", 1), ("k", 2)]) == {"k": 2}
    attrs = [kv("a", kvlist_value=common_pb2.KeyValueList(values=[kv("x", int_value=1)])),
             kv("a.y", int_value=2)]
    assert attributes(attrs) == {"a": {"x": 1, "y": 2}}


_segments = st.sampled_from(["a", "b", "http", "method", ""])
_keys = st.lists(_segments, min_size=1, max_size=3).map(".".join)
_values = st.one_of(st.integers(-5, 5).map(lambda i: {"int_value": i}),
                    st.text(max_size=3).map(lambda t: {"string_value": t}),
                    st.just({"kvlist_value": common_pb2.KeyValueList(
                        values=[kv("z", bool_value=True)])}))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_keys, _values), max_size=6))
def test_attributes_json_plans_equal_the_generic_path(pairs):
    """The cached per-key-list plans give exactly the bytes of the generic nesting."""
    kvs = [kv(k, **v) for k, v in pairs]
    for _ in range(2):                       # the first call compiles, the second reuses
        assert attributes_json(kvs) == to_json(attributes(kvs))


def metrics_request(*metrics: metrics_pb2.Metric) -> metrics_svc.ExportMetricsServiceRequest:
    return metrics_svc.ExportMetricsServiceRequest(resource_metrics=[
        metrics_pb2.ResourceMetrics(
            resource={"attributes": [kv("service.name", string_value="m")]},
            scope_metrics=[metrics_pb2.ScopeMetrics(metrics=metrics)])])


def test_every_metric_type():
    t = 1_700_000_000_000_000_000
    req = metrics_request(
        metrics_pb2.Metric(name="g", gauge=metrics_pb2.Gauge(data_points=[
            metrics_pb2.NumberDataPoint(time_unix_nano=t, as_int=7),
            metrics_pb2.NumberDataPoint(time_unix_nano=t, as_double=float("inf"))])),
        metrics_pb2.Metric(name="s", unit="By", sum=metrics_pb2.Sum(
            aggregation_temporality=1, is_monotonic=True, data_points=[
                metrics_pb2.NumberDataPoint(start_time_unix_nano=t - 5, time_unix_nano=t,
                                            as_double=2.5,
                                            attributes=[kv("k.v", string_value="x")])])),
        metrics_pb2.Metric(name="h", histogram=metrics_pb2.Histogram(
            aggregation_temporality=2, data_points=[metrics_pb2.HistogramDataPoint(
                time_unix_nano=t, count=3, sum=6.0, bucket_counts=[1, 2, 0],
                explicit_bounds=[1.0, 5.0])])),
        metrics_pb2.Metric(name="e", exponential_histogram=metrics_pb2.ExponentialHistogram(
            data_points=[metrics_pb2.ExponentialHistogramDataPoint(
                time_unix_nano=t, count=5, scale=2, zero_count=1,
                positive=metrics_pb2.ExponentialHistogramDataPoint.Buckets(
                    offset=-1, bucket_counts=[2, 2]), min=0.0, max=9.0)])),
        metrics_pb2.Metric(name="q", summary=metrics_pb2.Summary(data_points=[
            metrics_pb2.SummaryDataPoint(time_unix_nano=t, count=10, sum=55.0,
                                         quantile_values=[
                metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=5.0),
                metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=1.0, value=10.0)])])),
        metrics_pb2.Metric(name="", gauge=metrics_pb2.Gauge(data_points=[
            metrics_pb2.NumberDataPoint(time_unix_nano=t, as_int=1)])),
        metrics_pb2.Metric(name="nodata"))
    mapped = map_metrics(req)
    assert [e.message for e in mapped.rejected] == ["data point 7: the metric has no name"]
    rows = mapped.batch.to_pylist()
    assert [r["name"] for r in rows] == ["g", "g", "s", "h", "e", "q"]
    g1, g2, s, h, e, q = rows
    assert (g1["metric_type"], g1["value"], g2["value"]) == ("gauge", 7.0, None)
    assert (s["aggregation_temporality"], s["is_monotonic"], s["value"], s["unit"]) == \
        ("DELTA", True, 2.5, "By")
    assert mapped.batch.column("start_timestamp").cast(pa.int64())[2].as_py() == t - 5
    assert json.loads(s["attributes"]) == {"k": {"v": "x"}}
    assert (h["count"], h["sum"], h["min"], h["aggregation_temporality"]) == \
        (3, 6.0, None, "CUMULATIVE")
    assert (json.loads(h["bucket_counts"]), json.loads(h["explicit_bounds"])) == \
        ([1, 2, 0], [1.0, 5.0])
    assert (e["count"], e["sum"], e["min"], e["max"]) == (5, None, 0.0, 9.0)
    assert json.loads(e["exponential"]) == {
        "scale": 2, "zero_count": 1, "zero_threshold": 0.0,
        "positive": {"offset": -1, "bucket_counts": [2, 2]},
        "negative": {"offset": 0, "bucket_counts": []}}
    assert (q["metric_type"], q["count"], q["sum"]) == ("summary", 10, 55.0)
    assert json.loads(q["quantiles"]) == [{"quantile": 0.5, "value": 5.0},
                                          {"quantile": 1.0, "value": 10.0}]
    assert all(r["service_name"] == "m" for r in rows)


def test_log_refusals_and_fallback_time():
    req = logs_svc.ExportLogsServiceRequest(resource_logs=[logs_pb2.ResourceLogs(
        scope_logs=[logs_pb2.ScopeLogs(log_records=[
            logs_pb2.LogRecord(observed_time_unix_nano=77, body=av(string_value="a")),
            logs_pb2.LogRecord(trace_id=b"\x01" * 3),
            logs_pb2.LogRecord(span_id=b"\x01" * 9),
            logs_pb2.LogRecord(body=av(int_value=3))])])])
    mapped = map_logs(req)
    assert [(e.line, e.field) for e in mapped.rejected] == [(2, "trace_id"), (3, "span_id")]
    rows = mapped.batch.to_pylist()
    assert [r["body"] for r in rows] == ["a", "3"]
    ts = mapped.batch.column("_timestamp").cast(pa.int64()).to_pylist()
    assert ts == [77, None]           # observed time as fallback; null gets the ingest time
    assert rows[1]["service_name"] is None and json.loads(rows[1]["resource"]) == {}


def test_batches_match_standard_schemas():
    for signal, schema in SCHEMAS.items():
        batch = map_request(signal, REQUEST_TYPES[signal]()).batch
        assert set(batch.schema.names) == set(schema.names) - {"props"}
        for f in batch.schema:
            assert f.metadata == schema.column(f.name).arrow_field().metadata


def test_decode_errors_and_responses():
    with pytest.raises(OtlpPayloadError, match="must be a JSON object"):
        decode_request("logs", b"[1]", "json")
    with pytest.raises(OtlpPayloadError, match="not a valid OTLP/JSON ExportLogsServiceRequest"):
        decode_request("logs", b'{"resourceLogs": 5}', "json")
    assert encode_response("traces", "json") == b"{}"
    assert json.loads(encode_response("metrics", "json", rejected=2, message="m")) == {
        "partialSuccess": {"rejectedDataPoints": "2", "errorMessage": "m"}}


def test_configuration():
    assert OtlpTables().for_signal("traces") == "otel_spans"
    with pytest.raises(ConfigError, match="not identifier-safe"):
        OtlpTables(logs="Bad-Name")
    cfg = load_config(env={"SHOAL_OTLP_GRPC_PORT": "0", "SHOAL_OTLP_LOGS_TABLE": "app_logs"})
    assert (cfg.otlp_grpc_port, cfg.otlp_spans_table) == (0, "otel_spans")
    assert OtlpTables.from_config(cfg).for_signal("logs") == "app_logs"
    assert load_config(env={}).listener_port("otlp_grpc") == (4317, False)   # best effort
    assert cfg.listener_port("otlp_grpc") == (0, True)
    with pytest.raises(ConfigError, match="otlp_grpc_port must be an integer"):
        load_config(env={"SHOAL_OTLP_GRPC_PORT": "grpc"})
