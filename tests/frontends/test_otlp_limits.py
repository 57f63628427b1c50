"""OTLP over HTTP and gRPC: JSON limits on OTLP/JSON bodies, and idempotency keys bound to
the table they were first used with (409 / ABORTED naming both tables)."""

from __future__ import annotations

import grpc
import httpx
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as logs_svc

from tests.frontends.test_otlp_protocol import JS, PB, grpc_export, span, traces

LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def logs_json(body: str) -> bytes:
    return ('{"resourceLogs": [{"scopeLogs": [{"logRecords": [%s]}]}]}' % body).encode()


def test_otlp_json_over_the_limits_is_400(otlp_server):
    deep = '{"kvlistValue": {"values": [{"key": "a", "value": ' * 300 + "{}" + "}]}}" * 300
    cases = [
        (logs_json('{"body": %s}' % deep), "JSON nested deeper than 64 levels"),
        (logs_json('{"body": %s}' % ("[" * 2000 + "]" * 2000)), "nested deeper than 64"),
        (logs_json('{"timeUnixNano": %s}' % ("9" * 5000)), "number literal of 5,000 characters"),
        (b'{"resourceLogs": [], "x": "\xff"}', "not valid JSON"),
    ]
    with httpx.Client(base_url=otlp_server.url, timeout=30) as http:
        for body, message in cases:
            r = http.post("/v1/logs", content=body, headers=JS)
            assert r.status_code == 400, r.text
            assert message in r.json()["message"] and r.json()["code"] == 3
        ok = http.post("/v1/logs", content=logs_json('{"body": {"stringValue": "hi"}}'),
                       headers=JS)
        assert ok.status_code == 200, ok.text
    assert otlp_server.rows("otel_logs").num_rows == 1


def test_a_key_of_another_table_is_409_on_http_and_aborted_on_grpc(otlp_server):
    req = traces(span(0)).SerializeToString()
    log_req = logs_json('{"body": {"stringValue": "x"}}')
    with httpx.Client(base_url=otlp_server.url, timeout=30) as http:
        first = http.post("/v1/traces", content=req, headers={**PB, "X-Idempotency-Key": "k"})
        assert first.status_code == 200
        clash = http.post("/v1/logs", content=log_req, headers={**JS, "X-Idempotency-Key": "k"})
        assert clash.status_code == 409, clash.text
        message = clash.json()["message"]
        assert '"otel_spans"' in message and '"otel_logs"' in message
        # and a REST ingest of the same key into another table
        http.post("/v1/tables", json={"name": "t", "columns": [{"name": "n", "type": "long"}]})
        rest = http.post("/v1/ingest/t", content=b'{"n": 1}\n',
                         headers={"X-Idempotency-Key": "k"})
        assert rest.status_code == 409 and rest.json()["error"]["code"] == (
            "idempotency_key_conflict")
        assert rest.json()["error"]["details"][0]["field"] == "X-Idempotency-Key"
    body = logs_svc.ExportLogsServiceRequest()
    body.resource_logs.add().scope_logs.add().log_records.add().body.string_value = "x"
    with grpc.insecure_channel(otlp_server.grpc) as channel:
        call = channel.unary_unary(LOGS)
        try:
            call(body.SerializeToString(), metadata=(("x-idempotency-key", "k"),), timeout=30)
            raise AssertionError("expected ABORTED")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.ABORTED
            assert '"otel_spans"' in e.details() and '"otel_logs"' in e.details()
    # Nothing was written for the conflicting requests; the first key still replays.
    grpc_export(otlp_server, req, metadata=(("x-idempotency-key", "k"),))
    assert otlp_server.rows("otel_spans").num_rows == 1
    assert not otlp_server.exists("otel_logs") or otlp_server.rows("otel_logs").num_rows == 0
