"""Group commit over HTTP: a request whose body is still on the wire holds a waiting group
open; with none on its way, a request is written at once (no debounce to wait out).

Real uvicorn on a real socket; the slow client is a raw socket that sends its headers and
half its body, then waits for the test. The staging buffer's debounce is an hour: here it is
only a hang guard, so what closes each group is the rule under test, not a timer.
"""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

import shoal
from shoal.ingest.buffer import StagingBuffer
from shoal.ingest.write_path import WritePath
from shoal.server import create_app
from tests.support.server import serve_app
from tests.support.waiting import eventually


def _lines(first: int, n: int) -> bytes:
    return b"".join(json.dumps({"n": i}).encode() + b"\n" for i in range(first, first + n))


@pytest.fixture
def hour_debounce(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path))
    db.create_table("t", [shoal.Column("n", shoal.LONG)])
    buffer = StagingBuffer(db.catalog, db.coordinator, debounce_s=3600)
    db._write_path = WritePath(db.catalog, db.coordinator, buffer=buffer)
    app = create_app(db, config=db.config, sweep_ledger=False)
    try:
        with serve_app(app) as url:
            yield db, buffer, url
    finally:
        db.close()


@pytest.mark.timeout(120)   # a hang guard: the bugs this catches wait out an hour's debounce
def test_a_body_on_the_wire_holds_the_group_open(hour_debounce):
    db, buffer, url = hour_debounce
    host, port = url.removeprefix("http://").rsplit(":", 1)
    slow_body = _lines(0, 50)
    half = len(slow_body) // 2
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/x-ndjson\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(slow_body) + slow_body[:half])
        eventually(lambda: buffer.arriving("t"), "the slow request to be announced")
        quick: list[httpx.Response] = []

        def post() -> None:
            with httpx.Client(base_url=url, timeout=120) as c:
                quick.append(c.post("/v1/ingest/t", content=_lines(100, 3)))

        t = threading.Thread(target=post)
        t.start()
        # The quick request's body is counted as arriving until it reaches the buffer: wait
        # for both halves of that hand-over, not the first.
        eventually(lambda: (bool(buffer.pending_bytes), buffer.arriving("t")),
                   "the quick request to wait in the buffer", until=lambda v: v == (True, 1))
        assert not quick                                  # held for the one on the wire
        slow.sendall(slow_body[half:])
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            part = slow.recv(65536)
            assert part, f"connection closed early: {answer!r}"
            answer += part
        t.join()
    head, _, doc = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    slow_ack, quick_ack = json.loads(doc), quick[0].json()
    assert (slow_ack["rows"], quick_ack["rows"]) == (50, 3)
    assert slow_ack["snapshot_id"] == quick_ack["snapshot_id"]          # one commit...
    assert slow_ack["extent_ids"] == quick_ack["extent_ids"]            # ...one extent
    assert len(slow_ack["extent_ids"]) == 1
    assert buffer.arriving("t") == 0
    assert db.describe("t")["row_count"] == 53


@pytest.mark.timeout(120)
def test_requests_with_nobody_coming_are_written_at_once(hour_debounce):
    """One client after another, and the ways a request can end before the buffer (413,
    404, 400): none leaves an announcement behind, so each next request goes at once."""
    db, buffer, url = hour_debounce
    with httpx.Client(base_url=url, timeout=120) as c:
        first = c.post("/v1/ingest/t", content=_lines(0, 2))
        assert c.post("/v1/ingest/nope", content=_lines(0, 1)).status_code == 404
        assert c.post("/v1/ingest/t", content=b'{"n": "x"}\n').status_code == 400
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port))) as raw:    # a body over the cap
            raw.sendall(b"POST /v1/ingest/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Length: %d\r\n\r\n{}\n" % (1 << 40))
            assert raw.recv(65536).startswith(b"HTTP/1.1 413")
        second = c.post("/v1/ingest/t", content=_lines(2, 2))
    assert first.status_code == second.status_code == 200
    assert second.json()["snapshot_id"] > first.json()["snapshot_id"]
    assert buffer.arriving("t") == 0 and buffer.arriving("nope") == 0
    assert db.describe("t")["row_count"] == 4
