"""OTLP/HTTP and OTLP/gRPC protocol behaviour against a running server, with hand-built
requests: malformed bodies, JSON encoding, gzip, partial success, idempotency, auth,
unsupported media types and backpressure mapped to the responses exporters retry."""

from __future__ import annotations

import gzip
import json

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs_svc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_svc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from shoal.errors import BackpressureError
from tests.frontends.otlp_sdk import TRANSPORTS, resource, span_exporter

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
TRACE = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TID = bytes.fromhex("5b8efff798038103d269b633813fc60c")


def span(i: int, *, span_id: bytes | None = None, **kw) -> trace_pb2.Span:
    return trace_pb2.Span(trace_id=TID, span_id=span_id or (i + 1).to_bytes(8, "big"),
                          name=f"op{i}", start_time_unix_nano=1_000 + i,
                          end_time_unix_nano=2_000 + i, **kw)


def traces(*spans: trace_pb2.Span, service: str = "svc") -> trace_svc.ExportTraceServiceRequest:
    kv = common_pb2.KeyValue(key="service.name",
                             value=common_pb2.AnyValue(string_value=service))
    return trace_svc.ExportTraceServiceRequest(resource_spans=[trace_pb2.ResourceSpans(
        resource={"attributes": [kv]}, scope_spans=[trace_pb2.ScopeSpans(spans=spans)])])


def grpc_export(live, request: bytes, metadata=()) -> bytes:
    with grpc.insecure_channel(live.grpc) as channel:
        call = channel.unary_unary(TRACE)
        return call(request, metadata=metadata, timeout=10)


def status_of(response: httpx.Response) -> status_pb2.Status:
    st = status_pb2.Status()
    if response.headers["content-type"].startswith("application/json"):
        doc = response.json()
        st.code, st.message = doc.get("code", 0), doc.get("message", "")
    else:
        st.ParseFromString(response.content)
    return st


def test_malformed_protobuf_is_400_and_writes_nothing(otlp_server):
    bad = b"\x0a\xff\xff\xff\x0f\x01"            # field 1, length far past the end
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=bad, headers=PB)
        assert r.status_code == 400
        assert r.headers["content-type"] == "application/x-protobuf"
        st = status_of(r)
        assert st.code == 3     # INVALID_ARGUMENT
        assert "not a valid OTLP ExportTraceServiceRequest (protobuf, 6 bytes)" in st.message
        r = http.post("/v1/logs", content=gzip.compress(bad),
                      headers={**PB, "Content-Encoding": "gzip"})
        assert r.status_code == 400 and "ExportLogsServiceRequest" in status_of(r).message
        r = http.post("/v1/metrics", content=b'{"resourceMetrics": [', headers=JS)
        assert r.status_code == 400 and r.headers["content-type"] == "application/json"
        assert "not valid JSON" in r.json()["message"]
    with pytest.raises(grpc.RpcError) as err:
        grpc_export(otlp_server, bad)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid OTLP ExportTraceServiceRequest" in err.value.details()
    for table in ("otel_spans", "otel_logs", "otel_metrics"):
        assert not otlp_server.exists(table)


def test_json_encoding_hex_ids_and_json_response(otlp_server):
    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "js"}}]},
        "scopeSpans": [{"scope": {"name": "lib"}, "spans": [{
            "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "eee19b7ec3c1b174",
            "parentSpanId": "", "name": "j", "kind": 2,
            "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": 1544712661000000000,
            "attributes": [{"key": "n", "value": {"intValue": "42"}},
                           {"key": "b", "value": {"bytesValue": "AAE="}},
                           {"key": "kv", "value": {"kvlistValue": {"values": [
                               {"key": "x", "value": {"doubleValue": 1.5}}]}}}],
            "links": [{"traceId": "5b8efff798038103d269b633813fc60c",
                       "spanId": "0000000000000001"}],
            "status": {"code": 1}, "unknownField": {"ignored": True}}]}]}]}
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=json.dumps(body), headers=JS)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json" and r.json() == {}
    (row,) = otlp_server.rows("otel_spans").to_pylist()
    assert row["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert row["span_id"] == "eee19b7ec3c1b174" and row["parent_span_id"] is None
    assert (row["kind"], row["status_code"], row["duration_ns"]) == ("SERVER", "OK",
                                                                    1_000_000_000)
    assert json.loads(row["attributes"]) == {"n": 42, "b": "AAE=", "kv": {"x": 1.5}}
    assert json.loads(row["links"])[0]["span_id"] == "0000000000000001"
    bad = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]})
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=bad, headers=JS)
    assert r.status_code == 400 and '"traceId" must be a hex string' in r.json()["message"]


def test_gzip_and_partial_success(otlp_server):
    req = traces(span(0), span(1, span_id=b"\x01\x02\x03\x04\x05"), span(2))
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=gzip.compress(req.SerializeToString()),
                      headers={**PB, "Content-Encoding": "gzip"})
    assert r.status_code == 200
    resp = trace_svc.ExportTraceServiceResponse.FromString(r.content)
    assert resp.partial_success.rejected_spans == 1
    assert "span 2: span_id must be 8 bytes" in resp.partial_success.error_message
    assert sorted(otlp_server.rows("otel_spans").column("name").to_pylist()) == ["op0", "op2"]
    # the same over gRPC
    resp = trace_svc.ExportTraceServiceResponse.FromString(
        grpc_export(otlp_server, req.SerializeToString()))
    assert resp.partial_success.rejected_spans == 1
    assert otlp_server.rows("otel_spans").num_rows == 4


def test_empty_request_writes_nothing(otlp_server):
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/logs", content=b"", headers=PB)
    assert r.status_code == 200 and r.content == b""
    assert not otlp_server.exists("otel_logs")


def test_idempotency_key_http_and_grpc(otlp_server):
    req = traces(span(0), span(1, span_id=b"\x00" * 8)).SerializeToString()
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        answers = [http.post("/v1/traces", content=req,
                             headers={**PB, "X-Idempotency-Key": "batch-1"})
                   for _ in range(3)]
        bad_key = http.post("/v1/traces", content=req,
                            headers={**PB, "X-Idempotency-Key": "x" * 300})
        reserved = http.post("/v1/traces", content=req,
                             headers={**PB, "X-Idempotency-Key": "prw:prom_samples:abc"})
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert len({a.content for a in answers}) == 1       # the replay reports the same rejects
    assert trace_svc.ExportTraceServiceResponse.FromString(
        answers[2].content).partial_success.rejected_spans == 1
    assert bad_key.status_code == 400 and reserved.status_code == 400
    for _ in range(2):
        grpc_export(otlp_server, req, metadata=(("x-idempotency-key", "batch-2"),))
    grpc_export(otlp_server, req, metadata=(("x-idempotency-key", "batch-1"),))
    assert otlp_server.rows("otel_spans").num_rows == 2      # one per key


def test_unsupported_content_type_is_415(otlp_server):
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=b"x", headers={"Content-Type": "text/plain"})
        assert r.status_code == 415 and "application/x-protobuf" in r.json()["message"]
        r = http.post("/v1/traces", content=b"x", headers={**PB, "Content-Encoding": "br"})
        assert r.status_code == 415


def test_ingest_scope_on_http_and_grpc(make_otlp_server):
    req = traces(span(0)).SerializeToString()
    with make_otlp_server(tokens="ing=ingest;qry=query") as live:
        with httpx.Client(base_url=live.url, timeout=10) as http:
            r = http.post("/v1/traces", content=req, headers=PB)
            assert r.status_code == 401 and status_of(r).code == 16
            r = http.post("/v1/traces", content=req,
                          headers={**PB, "Authorization": "Bearer qry"})
            assert r.status_code == 403 and status_of(r).code == 7
            r = http.post("/v1/traces", content=req,
                          headers={**PB, "Authorization": "Bearer ing"})
            assert r.status_code == 200
        for metadata, code in (((), grpc.StatusCode.UNAUTHENTICATED),
                               ((("authorization", "Bearer nope"),),
                                grpc.StatusCode.UNAUTHENTICATED),
                               ((("authorization", "Bearer qry"),),
                                grpc.StatusCode.PERMISSION_DENIED)):
            with pytest.raises(grpc.RpcError) as err:
                grpc_export(live, req, metadata)
            assert err.value.code() == code
        grpc_export(live, req, (("authorization", "Bearer ing"),))
        assert live.rows("otel_spans").num_rows == 2


class FlakyWritePath:
    """Refuses the first `failures` ingests with backpressure (before writing anything)."""

    def __init__(self, inner, failures: int, retry_after_s: float = 0.2) -> None:
        self.inner, self.failures, self.retry_after_s = inner, failures, retry_after_s
        self.catalog = inner.catalog
        self.refused = 0

    def ingest_arrow(self, *args, **kwargs):
        if self.refused < self.failures:
            self.refused += 1
            raise BackpressureError("staging buffer full; retry later",
                                    retry_after_s=self.retry_after_s)
        return self.inner.ingest_arrow(*args, **kwargs)


def test_backpressure_maps_to_retryable_responses(otlp_server, monkeypatch):
    sink = otlp_server.app.state.otlp_sink
    monkeypatch.setattr(sink, "write_path", FlakyWritePath(sink.write_path, failures=2))
    req = traces(span(0)).SerializeToString()
    with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
        r = http.post("/v1/traces", content=req, headers=PB)
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert status_of(r).code == 8
    with pytest.raises(grpc.RpcError) as err:
        grpc_export(otlp_server, req)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = dict(err.value.trailing_metadata())["google.rpc.retryinfo-bin"]
    delay = error_details_pb2.RetryInfo.FromString(info).retry_delay
    assert delay.seconds * 1e9 + delay.nanos == pytest.approx(0.2e9)
    assert not otlp_server.exists("otel_spans")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sdk_exporters_retry_backpressure(otlp_server, monkeypatch, transport):
    sink = otlp_server.app.state.otlp_sink
    flaky = FlakyWritePath(sink.write_path, failures=1)
    monkeypatch.setattr(sink, "write_path", flaky)
    exporter = span_exporter(otlp_server, transport)
    provider = TracerProvider(resource=resource("retry"))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    results = []
    original = exporter.export
    monkeypatch.setattr(exporter, "export", lambda spans: results.append(
        original(spans)) or results[-1])
    provider.get_tracer("t").start_span("once").end()
    provider.shutdown()
    assert flaky.refused == 1 and results == [SpanExportResult.SUCCESS]
    assert otlp_server.rows("otel_spans").column("name").to_pylist() == ["once"]


def test_unavailable_while_not_accepting(otlp_server):
    state = otlp_server.app.state.shoal
    state.accepting = False
    try:
        with httpx.Client(base_url=otlp_server.url, timeout=10) as http:
            r = http.post("/v1/logs", content=logs_svc.ExportLogsServiceRequest()
                          .SerializeToString(), headers=PB)
        assert r.status_code == 503 and "retry-after" in r.headers
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(otlp_server, traces(span(0)).SerializeToString())
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        state.accepting = True
