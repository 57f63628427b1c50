"""OTLP wire encodings: request bodies in, `Export*ServiceResponse` and `Status` out.

- Protobuf (`application/x-protobuf`, and every gRPC call): the bytes must parse as the
  signal's `Export*ServiceRequest`, else `OtlpPayloadError` (400 / `INVALID_ARGUMENT`) with
  a message naming the message type.
- JSON (`application/json`), the OTLP/JSON mapping: field names in lowerCamelCase (the proto
  names are accepted too), enums as integers, 64-bit integers as strings or numbers, and
  -- unlike the generic protobuf JSON mapping -- trace and span ids as hex strings. Unknown
  fields are ignored, as OTLP requires of receivers. The hex ids are turned into the bytes
  protobuf's JSON parser expects before parsing. The body obeys shoal's JSON limits
  (`shoal.types.jsonlimits`: 64 levels, number literals of 100 characters), else 400.
- Bounds (`shoal.frontends.protobounds`), checked on the protobuf wire before it is parsed
  (an OTLP/JSON body: on the message it parsed to, before it is mapped): at most
  `MAX_REPEATED` attributes, events or links in one message and `MAX_ELEMENTS`
  sub-messages (resources, scopes, records, spans, metrics, data points, attributes, ...)
  in one request, nested at most 64 deep; else `TooManyElementsError` (413 /
  `RESOURCE_EXHAUSTED` without retry info, which exporters do not retry) naming the field,
  where it is and the bound. An OTLP/JSON body is first held to `MAX_JSON_CONTAINERS`
  `{` and `[` (counted over its bytes, strings included: an upper bound on the objects and
  arrays it holds) before it is parsed. The body cap bounds everything else.
- Responses: `ExportXServiceResponse`, with `partial_success` (rejected count + message)
  when records were refused; errors as `google.rpc.Status` (code = the gRPC code the HTTP
  status stands for), both in the request's encoding.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from shoal.errors import BadJsonError, PayloadError
from shoal.frontends.otlp.schemas import Signal
from shoal.frontends.protobounds import TooManyElementsError, check_bounds
from shoal.types.jsonlimits import loads as json_loads

WireFormat = Literal["protobuf", "json"]

PROTOBUF_TYPE = "application/x-protobuf"
JSON_TYPE = "application/json"

REQUEST_TYPES: dict[Signal, type[Message]] = {
    "logs": logs_service_pb2.ExportLogsServiceRequest,
    "traces": trace_service_pb2.ExportTraceServiceRequest,
    "metrics": metrics_service_pb2.ExportMetricsServiceRequest,
}
RESPONSE_TYPES: dict[Signal, type[Message]] = {
    "logs": logs_service_pb2.ExportLogsServiceResponse,
    "traces": trace_service_pb2.ExportTraceServiceResponse,
    "metrics": metrics_service_pb2.ExportMetricsServiceResponse,
}
# The partial-success field counting refused records, per signal.
REJECTED_FIELD: dict[Signal, str] = {"logs": "rejected_log_records",
                                     "traces": "rejected_spans",
                                     "metrics": "rejected_data_points"}

# Bounds of one request. The SDKs' own limits are 128 attributes, events and links per
# record or span; collectors batch 8,192 records or so a request, with a few attributes
# each: the bounds refuse only what no exporter sends, and keep a request's parse and
# mapping within a few hundred MB.
MAX_REPEATED = 1024
MAX_ELEMENTS = 500_000
_PER_FIELD = {"attributes": MAX_REPEATED, "events": MAX_REPEATED, "links": MAX_REPEATED}
# An element of OTLP/JSON is an object or two (a record, its attributes' pairs and values):
# four brackets an element, strings included, is far more than requests hold.
MAX_JSON_CONTAINERS = 4 * MAX_ELEMENTS
# Attribute pairs and values are counted, not entered: their insides (arrays and maps of
# values) are bounded when they are mapped (`values.MAX_VALUE_ITEMS`).
_OPAQUE = frozenset({"opentelemetry.proto.common.v1.KeyValue",
                     "opentelemetry.proto.common.v1.AnyValue"})


def check_request_bounds(signal: Signal, wire: bytes) -> None:
    """Refuse (`TooManyElementsError`) a serialized export request over the bounds."""
    check_bounds(wire, REQUEST_TYPES[signal], per_field=_PER_FIELD,
                 max_elements=MAX_ELEMENTS, opaque=_OPAQUE)


class OtlpPayloadError(PayloadError):
    """An OTLP request that cannot be read (400 / `INVALID_ARGUMENT`); nothing was written."""

    def __init__(self, message: str) -> None:
        self.errors = []
        self.total_errors = 0
        Exception.__init__(self, message)


# HTTP status -> gRPC status code (google.rpc.Code), for `Status` bodies and gRPC aborts.
GRPC_CODE_BY_STATUS = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 413: 8, 415: 3, 429: 8,
                       503: 14}
GRPC_INTERNAL = 13


def wire_format(content_type: str | None) -> WireFormat | None:
    """The encoding a `Content-Type` names, or None if it is not an OTLP one."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in (PROTOBUF_TYPE, "application/protobuf"):
        return "protobuf"
    if media == JSON_TYPE:
        return "json"
    return None


def decode_request(signal: Signal, body: bytes, fmt: WireFormat) -> Message:
    """Parse one export request; `OtlpPayloadError` with a precise message if it is malformed."""
    cls = REQUEST_TYPES[signal]
    name = cls.DESCRIPTOR.name
    msg = cls()
    if fmt == "protobuf":
        check_request_bounds(signal, body)
        try:
            msg.ParseFromString(body)
        except (DecodeError, ValueError) as e:
            raise OtlpPayloadError(f"body is not a valid OTLP {name} (protobuf, "
                                   f"{len(body)} bytes): {e}") from None
        return msg
    containers = body.count(b"{") + body.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise TooManyElementsError(
            f"{name}: more than {MAX_JSON_CONTAINERS:,} JSON objects and arrays in one "
            "request", count=containers, limit=MAX_JSON_CONTAINERS)
    try:  # under the JSON depth and number-length limits (shoal.types.jsonlimits)
        doc = json_loads(body, what="body")
    except BadJsonError as e:
        raise OtlpPayloadError(str(e)) from None
    if not isinstance(doc, dict):
        raise OtlpPayloadError(f"an OTLP/JSON {name} must be a JSON object")
    _hex_ids_to_base64(signal, doc)
    try:
        json_format.ParseDict(doc, msg, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as e:
        raise OtlpPayloadError(f"body is not a valid OTLP/JSON {name}: {e}") from None
    check_request_bounds(signal, msg.SerializeToString())
    return msg


def encode_response(signal: Signal, fmt: WireFormat, *, rejected: int = 0,
                    message: str = "") -> bytes:
    resp = RESPONSE_TYPES[signal]()
    if rejected or message:
        ps = resp.partial_success
        setattr(ps, REJECTED_FIELD[signal], rejected)
        ps.error_message = message
    if fmt == "protobuf":
        return resp.SerializeToString()
    return json_format.MessageToJson(resp, indent=None).encode()


def encode_status(http_status: int, message: str, fmt: WireFormat) -> bytes:
    st = status_pb2.Status(code=GRPC_CODE_BY_STATUS.get(http_status, GRPC_INTERNAL),
                           message=message)
    if fmt == "protobuf":
        return st.SerializeToString()
    return json_format.MessageToJson(st, indent=None).encode()


# ---- OTLP/JSON ids ---------------------------------------------------------------------------
_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _fix_ids(obj: Any) -> None:
    if not isinstance(obj, dict):
        return
    for key in _ID_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raise OtlpPayloadError(f'OTLP/JSON "{key}" must be a hex string, got '
                                       f"{value[:64]!r}") from None
            obj[key] = base64.b64encode(raw).decode("ascii")


def _items(obj: Any, *keys: str) -> list[Any]:
    """obj[k] for the first key present (camelCase or proto name), as a list."""
    if not isinstance(obj, dict):
        return []
    for k in keys:
        if k in obj:
            v = obj[k]
            return v if isinstance(v, list) else []
    return []


def _hex_ids_to_base64(signal: Signal, doc: dict[str, Any]) -> None:
    if signal == "traces":
        for rs in _items(doc, "resourceSpans", "resource_spans"):
            for ss in _items(rs, "scopeSpans", "scope_spans"):
                for sp in _items(ss, "spans"):
                    _fix_ids(sp)
                    for ln in _items(sp, "links"):
                        _fix_ids(ln)
    elif signal == "logs":
        for rl in _items(doc, "resourceLogs", "resource_logs"):
            for sl in _items(rl, "scopeLogs", "scope_logs"):
                for lr in _items(sl, "logRecords", "log_records"):
                    _fix_ids(lr)
    else:
        for rm in _items(doc, "resourceMetrics", "resource_metrics"):
            for sm in _items(rm, "scopeMetrics", "scope_metrics"):
                for m in _items(sm, "metrics"):
                    for kind in ("gauge", "sum", "histogram", "exponentialHistogram",
                                 "exponential_histogram", "summary"):
                        data = m.get(kind) if isinstance(m, dict) else None
                        for p in _items(data, "dataPoints", "data_points"):
                            for ex in _items(p, "exemplars"):
                                _fix_ids(ex)
