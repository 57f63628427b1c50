"""`POST /v1/ingest/{table}` over a real socket: acks, gzip, idempotency, limits, errors."""

from __future__ import annotations

import gzip
import json
import socket
import uuid
import zlib
from urllib.parse import urlsplit

from tests.server.conftest import BODY_CAP, create


def ndjson(*docs: dict) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


def row_count(http, table: str) -> int:
    return http.get(f"/v1/tables/{table}").json()["row_count"]


def test_ingest_acks_after_commit(http, table_name):
    create(http, table_name, [{"name": "service", "type": "string"},
                              {"name": "n", "type": "long"}])
    r = http.post(f"/v1/ingest/{table_name}",
                  content=ndjson({"service": "api", "n": 1}, {"service": "web", "n": 2},
                                 {"service": "db"}),
                  headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    ack = r.json()
    assert set(ack) == {"table", "snapshot_id", "rows", "replayed", "new_columns", "rejected",
                        "rejected_count", "extent_ids", "warnings"}
    assert ack["warnings"] == []
    assert ack["table"] == table_name and ack["rows"] == 3 and ack["replayed"] is False
    assert ack["new_columns"] == [] and ack["rejected"] == []
    assert isinstance(ack["snapshot_id"], int) and ack["snapshot_id"] > 1
    assert len(ack["extent_ids"]) == 1
    doc = http.get(f"/v1/tables/{table_name}").json()
    assert doc["row_count"] == 3 and doc["snapshot_id"] >= ack["snapshot_id"]


def test_gzip_body(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    body = ndjson(*({"n": i} for i in range(500)))
    r = http.post(f"/v1/ingest/{table_name}", content=gzip.compress(body),
                  headers={"content-encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == 500
    # Concatenated gzip members decode as one body.
    two = gzip.compress(ndjson({"n": 1})) + gzip.compress(ndjson({"n": 2}))
    r = http.post(f"/v1/ingest/{table_name}", content=two, headers={"content-encoding": "gzip"})
    assert r.status_code == 200 and r.json()["rows"] == 2
    assert row_count(http, table_name) == 502


def test_bad_gzip_and_unknown_encoding(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    r = http.post(f"/v1/ingest/{table_name}", content=b"not gzip at all",
                  headers={"content-encoding": "gzip"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_payload"
    truncated = gzip.compress(ndjson(*({"n": i} for i in range(100))))[:-12]
    r = http.post(f"/v1/ingest/{table_name}", content=truncated,
                  headers={"content-encoding": "gzip"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_payload"
    r = http.post(f"/v1/ingest/{table_name}", content=ndjson({"n": 1}),
                  headers={"content-encoding": "br"})
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_encoding"
    assert row_count(http, table_name) == 0


def test_idempotency_key_round_trip(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    key = {"X-Idempotency-Key": f"req-{uuid.uuid4()}"}
    body = ndjson({"n": 1}, {"n": 2})
    first = http.post(f"/v1/ingest/{table_name}", content=body, headers=key)
    assert first.status_code == 200, first.text
    assert first.json()["replayed"] is False
    second = http.post(f"/v1/ingest/{table_name}", content=body, headers=key)
    assert second.status_code == 200, second.text
    a, b = first.json(), second.json()
    assert b["replayed"] is True
    assert b["snapshot_id"] == a["snapshot_id"] and b["rows"] == a["rows"] == 2
    assert row_count(http, table_name) == 2
    r = http.post(f"/v1/ingest/{table_name}", content=body,
                  headers={"X-Idempotency-Key": "x" * 1000})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    # shoal's own pipelines' ledger keys cannot be forged (or pre-empted) by a client
    r = http.post(f"/v1/ingest/{table_name}", content=body,
                  headers={"X-Idempotency-Key": "filedrop:" + "0" * 64})
    assert r.status_code == 400 and "reserved" in r.json()["error"]["message"]
    assert row_count(http, table_name) == 2


def test_bad_lines_are_400_with_line_details_and_write_nothing(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    body = b'{"n": 1}\n{"n": "seven"}\nnot json\n{"n": 4}\n'
    r = http.post(f"/v1/ingest/{table_name}", content=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(r.json()) == {"error"} and set(err) == {"code", "message", "details"}
    assert err["code"] == "bad_payload"
    assert [(d["line"], d["field"]) for d in err["details"]] == [(2, "n"), (3, None)]
    assert all(d["message"].startswith(f"line {d['line']}: ") for d in err["details"])
    assert err["message"].startswith("line 2: ") and "(and 1 more)" in err["message"]
    assert row_count(http, table_name) == 0


def test_partial_accepts_good_lines(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    body = b'{"n": 1}\n{"n": "seven"}\n{"n": 3}\n'
    r = http.post(f"/v1/ingest/{table_name}", params={"partial": "true"}, content=body)
    assert r.status_code == 200, r.text
    ack = r.json()
    assert ack["rows"] == 2
    assert [(e["line"], e["field"]) for e in ack["rejected"]] == [(2, "n")]
    assert row_count(http, table_name) == 2


def test_modes(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    r = http.post(f"/v1/ingest/{table_name}", params={"mode": "reject"},
                  content=ndjson({"n": 1, "extra": "x"}))
    assert r.status_code == 400
    assert r.json()["error"]["details"][0]["field"] == "extra"
    r = http.post(f"/v1/ingest/{table_name}", params={"mode": "drop"},
                  content=ndjson({"n": 1, "extra": "x"}))
    assert r.status_code == 200 and r.json()["new_columns"] == []
    r = http.post(f"/v1/ingest/{table_name}", content=ndjson({"n": 2, "extra": "x"}))
    assert r.status_code == 200 and r.json()["new_columns"] == ["extra"]
    doc = http.get(f"/v1/tables/{table_name}").json()
    assert doc["columns"][-1]["name"] == "extra" and doc["schema_version"] == 2
    r = http.post(f"/v1/ingest/{table_name}", params={"mode": "sometimes"}, content=b"{}\n")
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "bad_request" and err["details"][0]["field"] == "query.mode"
    assert row_count(http, table_name) == 2


def test_unknown_table_is_404(http):
    r = http.post("/v1/ingest/no_such_table", content=ndjson({"n": 1}))
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "table_not_found",
                                  "message": 'table "no_such_table" does not exist',
                                  "details": []}}


def test_body_over_the_cap_is_413(http, table_name):
    create(http, table_name, [{"name": "s", "type": "string"}])
    big = ndjson(*({"s": "x" * 1000} for _ in range(BODY_CAP // 1000 + 10)))
    assert len(big) > BODY_CAP
    r = http.post(f"/v1/ingest/{table_name}", content=big)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"
    # Chunked (no Content-Length): counted while reading.
    r = http.post(f"/v1/ingest/{table_name}", content=iter([big[i:i + 8192]
                                                            for i in range(0, len(big), 8192)]))
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"
    assert row_count(http, table_name) == 0


def test_declared_content_length_is_refused_before_reading(open_server, http, table_name):
    """A client declaring 1 TB gets 413 at once; the server never waits for the bytes."""
    create(http, table_name, [{"name": "n", "type": "long"}])
    u = urlsplit(open_server.url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(f"POST /v1/ingest/{table_name} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Length: {1 << 40}\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413 "), reply[:200]


def test_gzip_bomb_is_413(http, table_name):
    create(http, table_name, [{"name": "s", "type": "string"}])
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    line = b'{"s": "' + b"a" * 1000 + b'"}\n'
    bomb = comp.compress(line * (64 << 10)) + comp.flush()   # ~64 MiB decoded
    assert len(bomb) < BODY_CAP
    r = http.post(f"/v1/ingest/{table_name}", content=bomb, headers={"content-encoding": "gzip"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"
    assert row_count(http, table_name) == 0
