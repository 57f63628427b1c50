"""Bounded cost and clear 4xx answers on the write side, against a real `shoal serve`.

One server per module (a subprocess, `--lazy-spark`: nothing here needs Spark). The 60 MB
body of a million bad lines is refused with the exact total and the first 100 errors, and
the server's peak memory grows by less than `PEAK_BOUND_BYTES` (README, HTTP API: the same
bound). JSON over the limits, bad names, reserved names, idempotency keys of another table
and a sweep of malformed requests all answer 4xx with the error document.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.procmem import PeakMeter
from tests.support.server import ServerHandle, start_server

pytestmark = pytest.mark.services

# Measured: ~0.55 GB peak growth for this body (60 MB, 1,000,000 lines, bench_limits.py);
# the documented bound leaves room for allocator noise.
PEAK_BOUND_BYTES = 1 << 30
LINE_BYTES = 60
LINES = 1_000_000

DEEP = "[" * 1000 + "]" * 1000
BIG = "9" * 5000


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path_factory.mktemp("limits"), extra_args=["--lazy-spark"])
    try:
        with httpx.Client(base_url=handle.url, timeout=60) as http:
            r = http.post("/v1/tables", json={"name": "t", "columns": [
                {"name": "service", "type": "string"}, {"name": "status", "type": "int"},
                {"name": "seq", "type": "long"}, {"name": "d", "type": "dynamic"}]})
            assert r.status_code == 201, r.text
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=600) as c:
        yield c


def bad_line(i: int) -> bytes:
    """A line of exactly LINE_BYTES bytes whose `status` is not an int."""
    tail = b'","status":"not-a-number","seq":%d}\n' % i
    head = b'{"service":"'
    return head + b"x" * (LINE_BYTES - len(head) - len(tail)) + tail


def test_60mb_of_bad_lines_is_refused_fast_with_bounded_memory(server, http):
    body = b"".join(bad_line(i) for i in range(LINES))
    assert len(body) == LINES * LINE_BYTES
    meter = PeakMeter(server.proc.pid).start()
    t0 = time.perf_counter()
    r = http.post("/v1/ingest/t", content=body)
    wall = time.perf_counter() - t0
    growth = meter.growth_bytes()
    print(f"\n60 MB of bad lines: 400 in {wall:.2f} s, server peak +{growth / 1e6:.0f} MB "
          f"(peak reset: {meter.reset_ok})")
    assert r.status_code == 400, r.text[:500]
    err = r.json()["error"]
    assert err["code"] == "bad_payload"
    assert err["message"].endswith("(1,000,000 lines rejected; first 100 errors shown)")
    assert err["message"].startswith('line 1: field "status": int expects an integer')
    details = err["details"]
    assert len(details) == 101 and [d["line"] for d in details[:100]] == list(range(1, 101))
    assert details[-1] == {"line": None, "field": None,
                           "message": "1,000,000 lines rejected; first 100 errors shown"}
    assert growth < PEAK_BOUND_BYTES, f"peak grew by {growth / 1e6:.0f} MB"
    # Nothing was written, and the server still takes good lines.
    assert http.get("/v1/tables/t").json()["row_count"] == 0
    ok = http.post("/v1/ingest/t", content=b'{"seq": 1}\n')
    assert ok.status_code == 200 and ok.json()["rows"] == 1


def test_partial_ack_counts_every_rejected_line(http):
    body = b"".join(bad_line(i) for i in range(1500)) + b'{"seq": 7}\n'
    r = http.post("/v1/ingest/t", params={"partial": "true"}, content=body)
    assert r.status_code == 200, r.text
    ack = r.json()
    assert ack["rows"] == 1 and ack["rejected_count"] == 1500 and len(ack["rejected"]) == 100
    clean = http.post("/v1/ingest/t", params={"partial": "true"}, content=b'{"seq": 8}\n')
    assert clean.json()["rejected_count"] == 0


@pytest.mark.parametrize("line,field,message", [
    ('{"seq": 1, "d": %s}' % DEEP, "d", "JSON nested deeper than 64 levels"),
    ('{"seq": 1, "service": {"a": %s}}' % DEEP, "service", "JSON nested deeper than 64"),
    ('{"seq": %s}' % BIG, "seq", "long expects an integer in"),
    ('{"seq": 1, "d": [%s]}' % BIG, "d", "number literal of 5,000 characters"),
    ('{"seq": 1, "extra": %s}' % BIG, "extra", "number literal of 5,000 characters"),
])
def test_ndjson_over_the_json_limits_is_400_with_line_and_field(http, line, field, message):
    body = ('{"seq": 0}\n' + line + "\n").encode()
    r = http.post("/v1/ingest/t", content=body)
    assert r.status_code == 400, r.text[:300]
    detail = r.json()["error"]["details"][0]
    assert (detail["line"], detail["field"]) == (2, field)
    assert detail["message"].startswith(f'line 2: field "{field}": {message}')


@pytest.mark.parametrize("path,body,field", [
    ("/v1/query", '{"sql": %s}' % DEEP, "sql"),
    ("/v1/query", '{"sql": "SELECT 1", "n": %s}' % BIG, "n"),
    ("/v1/tables", '{"name": "x1", "columns": %s}' % DEEP, "columns"),
    ("/v1/tables", '{"name": "x2", "columns": [], "retention": %s}' % BIG, "retention"),
    ("/v1/tables/t/columns", '{"columns": [{"name": "z", "type": "long", "default": %s}]}'
     % BIG, "columns"),
    ("/v1/tables/t/columns", '{"columns": %s}' % DEEP, "columns"),
])
def test_json_bodies_over_the_limits_are_400_naming_the_field(http, path, body, field):
    r = http.post(path, content=body.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["details"][0]["field"] == field
    assert "nested deeper than 64 levels" in err["message"] or \
        "number literal of 5,000 characters" in err["message"]


def test_names_are_limited_and_query_names_reserved(http):
    long_name = "a" * 5000
    r = http.post("/v1/tables", json={"name": long_name, "columns": []})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_schema"
    assert "5,000 characters long (at most 128)" in r.json()["error"]["message"]
    assert len(r.text) < 1000  # neither the whole name nor a path is echoed
    ddl = http.post("/v1/query", json={"sql": f"CREATE TABLE {long_name} (x int)"})
    assert ddl.status_code == 400 and ddl.json()["error"]["code"] == "invalid_schema"
    for name in ("_timestamp_ns", "__shoal_scan_1"):
        r = http.post("/v1/tables", json={"name": "r1", "columns": [
            {"name": name, "type": "long"}]})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["details"][0]["field"] == name
        r = http.post("/v1/tables/t/columns", json={"columns": [{"name": name, "type": "long"}]})
        assert r.status_code == 400 and name in r.json()["error"]["message"]
        r = http.post("/v1/query", json={"sql": f"ALTER TABLE t ADD COLUMN {name} bigint"})
        assert r.status_code == 400 and name in r.json()["error"]["message"]
    # Evolution keeps such fields in props instead of making columns of them.
    http.post("/v1/tables", json={"name": "ev", "columns": []})
    r = http.post("/v1/ingest/ev", content=b'{"_timestamp_ns": 5, "__shoal_x": 1, "ok": 2}\n')
    assert r.status_code == 200 and r.json()["new_columns"] == ["ok"]
    names = [c["name"] for c in http.get("/v1/tables/ev").json()["columns"]]
    assert names == ["_timestamp", "props", "ok"]


def test_an_idempotency_key_of_another_table_is_409(http):
    http.post("/v1/tables", json={"name": "k1", "columns": [{"name": "n", "type": "long"}]})
    http.post("/v1/tables", json={"name": "k2", "columns": [{"name": "n", "type": "long"}]})
    first = http.post("/v1/ingest/k1", content=b'{"n": 1}\n', headers={"X-Idempotency-Key": "q"})
    assert first.status_code == 200
    r = http.post("/v1/ingest/k2", content=b'{"n": 2}\n', headers={"X-Idempotency-Key": "q"})
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "idempotency_key_conflict"
    assert '"k1"' in err["message"] and '"k2"' in err["message"]
    assert http.get("/v1/tables/k2").json()["row_count"] == 0
    again = http.post("/v1/ingest/k1", content=b'{"n": 1}\n', headers={"X-Idempotency-Key": "q"})
    assert again.json()["replayed"] is True


SWEEP = [
    # (method, path, body, headers, status)
    ("POST", "/v1/ingest/t", b"[1, 2]", {}, 400),                     # a JSON array
    ("POST", "/v1/ingest/t", b'{"seq": 1}\n\x00\n', {}, 400),         # NUL byte
    ("POST", "/v1/ingest/t", b'{"service": "\xff\xfe"}\n', {}, 400),  # invalid UTF-8
    ("POST", "/v1/ingest/t", b"\xef\xbb\xbf{}\n", {}, 400),           # a BOM
    ("POST", "/v1/ingest/t", b"null\n", {}, 400),
    ("POST", "/v1/ingest/t", b'{"seq": 1}', {"Content-Encoding": "gzip"}, 400),
    ("POST", "/v1/ingest/t", b'{"seq": 1}', {"Content-Encoding": "br"}, 415),
    ("POST", "/v1/ingest/t?mode=sideways", b'{"seq": 1}', {}, 400),
    ("POST", "/v1/ingest/t?partial=maybe", b'{"seq": 1}', {}, 400),
    ("POST", "/v1/ingest/t", b'{"seq": 1}', {"X-Idempotency-Key": "k" * 20_000}, 400),
    ("POST", "/v1/ingest/t", b'{"seq": 1}', {"X-Idempotency-Key": "a\tb"}, 400),
    ("POST", "/v1/ingest/" + "x" * 5000, b'{"seq": 1}', {}, 404),
    ("POST", "/v1/ingest/a%00b", b'{"seq": 1}', {}, 404),
    ("POST", "/v1/ingest/%ff", b'{"seq": 1}', {}, 404),
    ("POST", "/v1/ingest/..%2F..%2Fetc", b'{"seq": 1}', {}, 404),
    ("GET", "/v1/tables/" + "x" * 5000, None, {}, 404),
    ("POST", "/v1/tables", b"", {}, 400),
    ("POST", "/v1/tables", b"[]", {}, 400),
    ("POST", "/v1/tables", b'{"name": "\xff", "columns": []}', {}, 400),
    ("POST", "/v1/tables", b'{"name": "a\\u0000", "columns": []}', {}, 400),
    ("POST", "/v1/tables", b'{"name": 5, "columns": []}', {}, 400),
    ("POST", "/v1/tables", b'{"name": "v1", "columns": [{"name": "v", "type": '
                           b'"vector(999999999999)"}]}', {}, 400),
    ("POST", "/v1/tables", b'{"name": "m1", "columns": [], "mode": "sideways"}', {}, 400),
    ("POST", "/v1/tables/t/columns", b"", {}, 400),
    ("POST", "/v1/tables/t/columns", b'{"columns": []}', {}, 400),
    ("POST", "/v1/tables/" + "x" * 5000 + "/columns",
     b'{"columns": [{"name": "z", "type": "long"}]}', {}, 404),
    ("POST", "/v1/query", b"", {}, 400),
    ("POST", "/v1/query", b"[1]", {}, 400),
    ("POST", "/v1/query", b'{"sql": "\xff"}', {}, 400),
]


@pytest.mark.parametrize("method,path,body,headers,status", SWEEP,
                         ids=[f"{i}" for i in range(len(SWEEP))])
def test_malformed_requests_are_4xx_with_the_error_document(http, method, path, body, headers,
                                                            status):
    h = {"Content-Type": "application/json", **headers} if path.startswith(
        ("/v1/tables", "/v1/query")) else headers
    r = http.request(method, path, content=body, headers=h)
    assert r.status_code == status, r.text[:300]
    doc = r.json()
    assert set(doc) == {"error"} and {"code", "message", "details"} <= set(doc["error"])
    assert json.dumps(doc)  # well-formed
