"""The HTTP edge holds its bounds against hostile bodies and connections, over real servers.

- gzip bodies decode in time linear in the body, with at most a few members plus one per
  KiB: a body of 120,000 empty members is a 400 naming the bound on REST ingest and
  OTLP/HTTP, while `cat a.gz b.gz` and bgzip-style bodies are ingested;
- SIGTERM stops a real `shoal serve` whatever its requests are doing (a body trickling in,
  a hostile gzip body);
- a connection that does not finish its request headers within `header_timeout_s` is
  closed (408 when part of a request came), while keep-alive clients and slow bodies after
  complete headers are untouched;
- `/metrics` needs the `metrics` or `query` scope when tokens are configured;
- the Kusto routes take JSON only (a form or `text/plain` body needs no preflight);
- `/docs` is the vendored Swagger UI under the console's CSP; nothing loads from a CDN;
- protobuf bodies (OTLP/HTTP, OTLP/gRPC, remote write) holding millions of attributes,
  records, labels or series are refused (413, naming the field and the bound) while the
  server's memory stays within a stated bound.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import select
import signal
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.rpc import status_pb2

import shoal
from shoal.server import create_app
from shoal.server.webconsole import CONSOLE_DIR, CSP
from tests.server.conftest import Live
from tests.support.procmem import PeakMeter
from tests.support.promdata import snappy
from tests.support.server import free_port, serve_app, start_server
from tests.support.waiting import HANG_GUARD_S
from tests.support.wire import length_delimited

EMPTY_MEMBER = gzip.compress(b"", mtime=0)      # 20 bytes
COLUMNS = [{"name": "n", "type": "long"}, {"name": "msg", "type": "string"}]
HEADER_TIMEOUT_S = 0.3


def _live(tmp_path_factory, name: str, **serve: Any) -> Iterator[Live]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp(name)))
    app = create_app(db, config=db.config, max_body_bytes=64 << 20)
    try:
        with serve_app(app, **serve) as url:
            live = Live(url, db)
            with live.client() as c:
                assert c.post("/v1/tables", json={"name": "t", "columns": COLUMNS}
                              ).status_code == 201
            yield live
    finally:
        db.close()


@pytest.fixture(scope="module")
def edge(tmp_path_factory) -> Iterator[Live]:
    """A loopback server (no tokens), 64 MiB bodies."""
    yield from _live(tmp_path_factory, "edges")


@pytest.fixture(scope="module")
def tight(tmp_path_factory) -> Iterator[Live]:
    """The same with a header timeout of HEADER_TIMEOUT_S, for the tests of that timeout."""
    yield from _live(tmp_path_factory, "edges_tight", header_timeout_s=HEADER_TIMEOUT_S)


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def _connect(url: str) -> socket.socket:
    s = socket.create_connection(_address(url), timeout=HANG_GUARD_S)
    return s


def _read_until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (hang guard only)."""
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _count(live: Live, table: str) -> int:
    with live.client() as c:
        r = c.post("/v1/query", json={"sql": f"SELECT count(*) AS n FROM {table}"})
        assert r.status_code == 200, r.text
        return int(r.json()["rows"][0][0])


# --- gzip ----------------------------------------------------------------------------


def _ndjson(n: int, start: int = 0) -> bytes:
    return b"".join(b'{"n": %d, "msg": "line %d"}\n' % (i, i) for i in range(start, start + n))


def test_gzip_of_120k_empty_members_is_refused_naming_the_bound(edge: Live) -> None:
    body = EMPTY_MEMBER * 120_000
    with edge.client(timeout=HANG_GUARD_S) as c:
        r = c.post("/v1/ingest/t", content=body, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "bad_payload"
    assert "members" in err["message"] and "per 1024 bytes" in err["message"]


def test_otlp_http_gzip_of_many_empty_members_is_refused(edge: Live) -> None:
    body = EMPTY_MEMBER * 120_000
    with edge.client(timeout=HANG_GUARD_S) as c:
        r = c.post("/v1/logs", content=body, headers={"Content-Encoding": "gzip",
                                                      "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert "members" in r.json()["message"]


def test_concatenated_and_bgzip_style_bodies_are_ingested(edge: Live) -> None:
    with edge.client() as c:
        assert c.post("/v1/tables", json={"name": "gz", "columns": COLUMNS}).status_code == 201
        two = gzip.compress(_ndjson(100)) + gzip.compress(_ndjson(100, 100))
        r = c.post("/v1/ingest/gz", content=two, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == 200
        # bgzip: independent members of at most 64 KiB of input each
        raw = _ndjson(40_000, 200)
        blocks = b"".join(gzip.compress(raw[i:i + 65280]) for i in range(0, len(raw), 65280))
        r = c.post("/v1/ingest/gz", content=blocks, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == 40_000
    assert _count(edge, "gz") == 40_200


# --- SIGTERM -------------------------------------------------------------------------


@pytest.mark.services
def test_sigterm_stops_serve_with_hostile_bodies_in_flight(tmp_path) -> None:
    """A body trickling in (the body deadline an hour away) and a 40 MB body of empty gzip
    members (hours of work for a decoder quadratic in members) do not keep `shoal serve`
    from stopping on SIGTERM."""
    server = start_server(tmp_path / "data", extra_args=["--lazy-spark"],
                          env={"SHOAL_BODY_TIMEOUT_S": "3600",
                               "SHOAL_SHUTDOWN_TIMEOUT_S": "1"})
    try:
        with httpx.Client(base_url=server.url, timeout=HANG_GUARD_S) as c:
            assert c.post("/v1/tables", json={"name": "t", "columns": COLUMNS}
                          ).status_code == 201
        hostile = _connect(server.url)
        body = EMPTY_MEMBER * 2_000_000
        hostile.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body))
        hostile.sendall(body)
        answer = hostile.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        # A body that trickles: the app has started reading it once it answers 100 Continue.
        trickle = _connect(server.url)
        trickle.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Expect: 100-continue\r\nContent-Length: 1000000\r\n\r\n")
        assert trickle.recv(4096).startswith(b"HTTP/1.1 100")
        trickle.sendall(b'{"n": 1, "msg": "a"}\n')
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=HANG_GUARD_S)   # a hang guard, not a speed budget
        except subprocess.TimeoutExpired:
            pytest.fail(f"shoal serve did not stop on SIGTERM; log:\n{server.log()}")
        assert server.proc.returncode in (0, -signal.SIGTERM), server.log()
        hostile.close()
        trickle.close()
    finally:
        server.stop()


# --- header timeout ------------------------------------------------------------------


def test_half_a_request_line_is_closed_with_408(tight: Live) -> None:
    with _connect(tight.url) as s:
        s.sendall(b"GET /heal")
        answer = _read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    doc = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert doc["error"]["code"] == "request_timeout"


def test_headers_trickled_byte_by_byte_are_cut_off(tight: Live) -> None:
    """A client that keeps sending header bytes one at a time but never ends its headers
    is closed while it still sends."""
    with _connect(tight.url) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
        sent = 0
        answer = None
        while answer is None and sent < 50_000_000:    # a hang guard
            try:
                s.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                answer = b""
                break
            sent += 1
            if select.select([s], [], [], 0)[0]:
                answer = _read_until_closed(s)
    assert answer is not None, "the server kept reading headers"
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_a_request_line_of_megabytes_is_cut_off_with_431(tight: Live) -> None:
    """The parser would keep a URL of any length: past 64 KiB of head the answer is 431."""
    with _connect(tight.url) as s:
        s.sendall(b"GET /" + b"a" * 100_000)
        answer = _read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "headers_too_large"
    with tight.client() as c:         # a long but ordinary URL still works
        assert c.get("/healthz", params={"q": "x" * 30_000}).status_code == 200


def test_a_silent_connection_is_closed(tight: Live) -> None:
    with _connect(tight.url) as s:
        assert _read_until_closed(s) == b""


def test_keep_alive_and_slow_bodies_after_the_headers_are_untouched(tight: Live) -> None:
    """The deadline is for headers only: a keep-alive client making requests for longer
    than it, and a body finished after it, are answered."""
    with _connect(tight.url) as slow_body:
        slow_body.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Length: 42\r\n\r\n" + b'{"n": 7, "msg": "s"}\n')
        # A connection opened after it and stalled in its request line: once the server
        # has closed it, the slow body's header deadline (armed earlier) has passed too.
        with _connect(tight.url) as marker:
            marker.sendall(b"GE")
            assert _read_until_closed(marker).startswith(b"HTTP/1.1 408")
        slow_body.sendall(b'{"n": 8, "msg": "t"}\n')
        answer = slow_body.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer
    # A keep-alive client asks on until a connection opened after it, stalled in its request
    # line, has been closed for its header deadline (so the client's own has passed too).
    with _connect(tight.url) as s, _connect(tight.url) as marker:
        marker.sendall(b"GE")
        answered = 0
        while answered < 3 or not select.select([marker], [], [], 0)[0]:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert _read_response(s).startswith(b"HTTP/1.1 200")
            answered += 1
        assert _read_until_closed(marker).startswith(b"HTTP/1.1 408")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _read_response(s).startswith(b"HTTP/1.1 200")


def test_pipelined_requests_with_big_bodies_are_not_taken_for_long_headers(
        tight: Live) -> None:
    """One write holding a 200 KB ingest request and a GET after it: both answered."""
    body = _ndjson(8_000)
    assert len(body) > 3 * (64 << 10)
    with _connect(tight.url) as s:
        s.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        stream = s.makefile("rb")
        first, second = _read_response(stream), _read_response(stream)
    assert first.startswith(b"HTTP/1.1 200"), first[:300]
    assert second.startswith(b"HTTP/1.1 200"), second[:300]


def _read_response(s: socket.socket | Any) -> bytes:
    """One response with a Content-Length body; `s` a socket (one request in flight) or a
    file from `socket.makefile("rb")` (several)."""
    stream = s.makefile("rb") if isinstance(s, socket.socket) else s
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline()
        assert line, f"connection closed after {head!r}"
        head += line
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    body = stream.read(length)
    assert len(body) == length, "connection closed mid-body"
    return head + body


# --- /metrics ------------------------------------------------------------------------

METRICS_TOKEN, INGEST_TOKEN = "metrics-secret-5", "ingest-secret-6"


@pytest.fixture(scope="module")
def with_tokens(tmp_path_factory) -> Iterator[Live]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("edges_auth")),
                       tokens=f"{METRICS_TOKEN}=metrics;{INGEST_TOKEN}=ingest")
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            yield Live(url, db)
    finally:
        db.close()


def test_metrics_scope_reads_metrics_and_nothing_else(with_tokens: Live) -> None:
    with with_tokens.client() as c:
        assert c.get("/metrics").status_code == 401
    with with_tokens.client(INGEST_TOKEN) as c:
        assert c.get("/metrics").status_code == 403
    with with_tokens.client(METRICS_TOKEN) as c:
        r = c.get("/metrics")
        assert r.status_code == 200 and "shoal_http_requests" in r.text
        assert c.get("/v1/tables").status_code == 403
        assert c.post("/v1/query", json={"sql": "SELECT 1"}).status_code == 403
        assert c.post("/v1/ingest/t", content=b'{"n": 1}\n').status_code == 403


def test_metrics_stay_open_without_tokens(edge: Live) -> None:
    with edge.client() as c:
        r = c.get("/metrics")
    assert r.status_code == 200 and "shoal_http_requests" in r.text


# --- Kusto routes take JSON only -------------------------------------------------------


@pytest.mark.parametrize("path", ["/v2/rest/query", "/v1/rest/mgmt"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_kusto_routes_refuse_bodies_a_form_can_send(edge: Live, path: str,
                                                    content_type: str | None) -> None:
    """A page elsewhere can send these without a preflight: they are never run."""
    body = json.dumps({"db": "shoal", "csl": ".show tables" if "mgmt" in path else "t"})
    with _connect(edge.url) as s:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        s.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode())
        answer = _read_until_closed(s)
    status, doc = answer.split(b"\r\n", 1)[0], json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert status.startswith(b"HTTP/1.1 415"), answer
    assert doc["error"]["code"] == "unsupported_media_type"
    assert "application/json" in doc["error"]["@message"]     # Kusto's error shape


def test_kusto_mgmt_takes_json_as_kusto_clients_send_it(edge: Live) -> None:
    with edge.client() as c:
        r = c.post("/v1/rest/mgmt", content=json.dumps({"db": "shoal", "csl": ".show tables"}),
                   headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200, r.text
    assert ["t", "shoal", "", ""] in r.json()["Tables"][0]["Rows"]


# --- the API reference at /docs ----------------------------------------------------------


def _same_origin_refs(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_docs_page_is_vendored_and_under_the_console_csp(edge: Live) -> None:
    with edge.client() as c:
        page = c.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == CSP
        assert page.headers["x-content-type-options"] == "nosniff"
        refs = _same_origin_refs(page.text)
        assert refs and all(r.startswith("/") and not r.startswith("//") for r in refs), refs
        assert "<script>" not in page.text                      # no inline script
        for ref in refs:
            r = c.get(ref)
            assert r.status_code == 200, ref
            assert r.headers["content-security-policy"] == CSP, ref
        starter = c.get("/console/docs.js").text
        assert "/openapi.json" in starter and "validatorUrl: null" in starter
        assert not re.search(r"https?://", starter + page.text)
        assert c.get("/redoc").status_code == 404                # loaded its script from a CDN


@pytest.mark.slow          # a browser
def test_docs_page_renders_every_operation_with_nothing_refused(edge: Live) -> None:
    """In a real browser: Swagger UI runs under the CSP (no refused script, style or
    connection), lists the operations of /openapi.json, and asks only this origin."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from tests.support.browser import launch_chromium

    with edge.client() as c:
        operations = sum(len(ops) for ops in c.get("/openapi.json").json()["paths"].values())
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            messages: list[str] = []
            origins: set[str] = set()
            page.on("console", lambda m: messages.append(m.text))
            page.on("request", lambda r: origins.add(r.url.split("/", 3)[2]))
            page.goto(edge.url + "/docs")
            page.wait_for_selector(".opblock", timeout=HANG_GUARD_S * 1000)
            assert page.locator(".opblock").count() == operations
        finally:
            browser.close()
    assert origins == {edge.url.split("/", 3)[2]}, origins
    assert not [m for m in messages if "Content Security Policy" in m or "Refused" in m]


def test_vendored_swagger_ui_is_the_pinned_release() -> None:
    folder = CONSOLE_DIR / "vendor" / "swagger-ui"
    recorded = dict(re.findall(r"\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|",
                               (folder / "SOURCE.md").read_text()))
    assert set(recorded) == {p.name for p in folder.iterdir()} - {"SOURCE.md"}
    for name, digest in recorded.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


# --- protobuf bodies -------------------------------------------------------------------
# Each attack is a body far under the byte cap that parses into millions of objects. The
# server is a real `shoal serve`; its memory is its process tree's peak growth while it
# answers (`PeakMeter`). Bounds: the body itself (read and joined: twice its size) plus
# 100 MB for everything else (measured: 8-30 MB). Before the bounds, the 3M-attribute
# record grew the server by 2.1 GB and the 4M empty records by 1.8 GB, and both were taken.

PEAK_EXTRA = 100 << 20
_ld = length_delimited


def _one_record_logs(record: bytes) -> bytes:
    """ExportLogsServiceRequest{resource_logs{scope_logs{log_records: [record]}}}."""
    return _ld(1, _ld(2, _ld(2, record)))


ATTRIBUTE = _ld(6, _ld(1, b"a"))                 # LogRecord.attributes: {key: "a"}


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> Iterator[Any]:
    grpc_port = free_port()
    server = start_server(tmp_path_factory.mktemp("edges_pb") / "data",
                          extra_args=["--lazy-spark"],
                          env={"SHOAL_OTLP_GRPC_PORT": str(grpc_port)})
    server.grpc = f"127.0.0.1:{grpc_port}"          # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def _post_measured(server: Any, path: str, body: bytes,
                   headers: dict[str, str]) -> tuple[httpx.Response, int]:
    meter = PeakMeter(server.proc.pid).start()
    with httpx.Client(base_url=server.url, timeout=HANG_GUARD_S) as c:
        r = c.post(path, content=body, headers=headers)
    return r, meter.growth_bytes()


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_record_with_3m_attributes_is_refused_in_bounded_memory(serve: Any) -> None:
    body = _one_record_logs(ATTRIBUTE * 3_000_000)          # 15 MB
    r, growth = _post_measured(serve, "/v1/logs", body,
                               {"Content-Type": "application/x-protobuf"})
    assert r.status_code == 413, r.text
    status = status_pb2.Status.FromString(r.content)
    assert status.code == 8                                   # RESOURCE_EXHAUSTED
    assert "more than 1,024 attributes in one message" in status.message
    assert "log_records[0].attributes" in status.message
    assert growth < 2 * len(body) + PEAK_EXTRA, f"server grew {growth / 1e6:.0f} MB"


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_flood_of_empty_records_is_refused_in_bounded_memory(serve: Any) -> None:
    body = _ld(1, _ld(2, _ld(2, b"") * 4_000_000))        # 4M empty log records, 8 MB
    r, growth = _post_measured(serve, "/v1/logs", body,
                               {"Content-Type": "application/x-protobuf"})
    assert r.status_code == 413, r.text
    assert "more than 500,000 elements in one request" in status_pb2.Status.FromString(
        r.content).message
    assert growth < 2 * len(body) + PEAK_EXTRA, f"server grew {growth / 1e6:.0f} MB"


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_grpc_refuses_the_same_with_resource_exhausted(serve: Any) -> None:
    import grpc

    body = _one_record_logs(ATTRIBUTE * 200_000)
    with grpc.insecure_channel(serve.grpc, options=[
            ("grpc.max_send_message_length", 64 << 20)]) as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export")
        with pytest.raises(grpc.RpcError) as e:
            call(body, timeout=HANG_GUARD_S)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than 1,024 attributes" in e.value.details()
    # no RetryInfo: exporters must not send it again
    assert not [k for k, _ in (e.value.trailing_metadata() or ()) if "retryinfo" in k]


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_array_value_over_the_bound_is_refused(serve: Any) -> None:
    """An attribute pair is not entered on the wire; its array is bounded when mapped."""
    value = _ld(5, b"".join(_ld(1, b"") for _ in range(50_000)))   # array of 50k values
    body = _one_record_logs(_ld(6, _ld(1, b"a") + _ld(2, value)))
    with httpx.Client(base_url=serve.url, timeout=HANG_GUARD_S) as c:
        r = c.post("/v1/logs", content=body, headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 413, r.text
    assert "more than 10,000 items in one array_value.values" in status_pb2.Status.FromString(
        r.content).message


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_json_is_held_to_the_same_bounds(serve: Any) -> None:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"attributes": [{"key": f"k{i}", "value": {"intValue": i}} for i in range(2000)]}]}]}]}
    with httpx.Client(base_url=serve.url, timeout=HANG_GUARD_S) as c:
        r = c.post("/v1/logs", json=doc)
    assert r.status_code == 413, r.text
    assert "more than 1,024 attributes" in r.json()["message"]


@pytest.mark.services     # a `shoal serve` subprocess
def test_otlp_json_of_millions_of_empty_objects_is_refused_before_parsing(serve: Any) -> None:
    records = b",".join([b"{}"] * 2_500_000)                     # 7.5 MB
    body = b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[' + records + b"]}]}]}"
    r, growth = _post_measured(serve, "/v1/logs", body, {"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert "more than 2,000,000 JSON objects and arrays" in r.json()["message"]
    assert growth < 2 * len(body) + PEAK_EXTRA, f"server grew {growth / 1e6:.0f} MB"


@pytest.mark.services     # a `shoal serve` subprocess
def test_remote_write_series_with_too_many_labels_is_refused(serve: Any) -> None:
    labels = b"".join(_ld(1, _ld(1, b"l%d" % i) + _ld(2, b"v")) for i in range(300_000))
    body = snappy(_ld(1, labels))                      # one TimeSeries, 300k labels
    r, growth = _post_measured(serve, "/api/v1/write", body,
                               {"Content-Type": "application/x-protobuf",
                                "Content-Encoding": "snappy"})
    assert r.status_code == 413, r.text
    assert "more than 1,024 labels in one message" in r.text
    assert growth < 2 * len(body) + PEAK_EXTRA, f"server grew {growth / 1e6:.0f} MB"


@pytest.mark.services     # a `shoal serve` subprocess
def test_remote_write_flood_of_empty_series_is_refused(serve: Any) -> None:
    body = snappy(_ld(1, b"") * 3_000_000)             # 3M empty series, 6 MB decoded
    r, growth = _post_measured(serve, "/api/v1/write", body,
                               {"Content-Type": "application/x-protobuf",
                                "Content-Encoding": "snappy"})
    assert r.status_code == 413, r.text
    assert "more than 2,000,000 elements in one request" in r.text
    assert growth < 2 * 6_000_000 + PEAK_EXTRA, f"server grew {growth / 1e6:.0f} MB"
