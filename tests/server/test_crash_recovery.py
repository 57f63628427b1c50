"""SIGKILL the server while clients stream; after restart nothing acked is lost or doubled.

A real `shoal serve` process (tests/support/server.py), real HTTP clients over sockets, a
SQLite catalog and a local store in one data directory, as in the embedded default.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import httpx
import pytest

import shoal
from tests.support.server import start_server
from tests.support.waiting import eventually

CLIENTS, ROWS_PER_REQUEST = 8, 5


def request_body(client: int, seq: int) -> bytes:
    return b"".join(json.dumps({"client": client, "seq": seq, "row": r}).encode() + b"\n"
                    for r in range(ROWS_PER_REQUEST))


@pytest.mark.slow
def test_sigkill_mid_stream_loses_no_ack_and_duplicates_nothing(tmp_path):
    data_dir = tmp_path / "data"
    server = start_server(data_dir)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post("/v1/tables", json={"name": "events", "columns": [
            {"name": "client", "type": "int"}, {"name": "seq", "type": "int"},
            {"name": "row", "type": "int"}]})
        assert r.status_code == 201, r.text
    acked: dict[tuple[int, int], int] = {}
    attempted: set[tuple[int, int]] = set()
    stop = threading.Event()
    lock = threading.Lock()

    def client(c: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            seq = 0
            while not stop.is_set():
                with lock:
                    attempted.add((c, seq))
                try:
                    r = http.post("/v1/ingest/events", content=request_body(c, seq),
                                  headers={"X-Idempotency-Key": f"c{c}-s{seq}"})
                except httpx.HTTPError:
                    return  # the server died under this request: not acknowledged
                if r.status_code == 200:
                    with lock:
                        acked[(c, seq)] = r.json()["snapshot_id"]
                seq += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    # Kill mid-stream: once the clients have 20 acknowledgements, with requests in flight.
    eventually(lambda: len(acked), "20 acknowledged requests", until=lambda n: n >= 20)
    assert server.kill() == -9
    stop.set()
    for t in threads:
        t.join(timeout=60)

    def landed() -> Counter:
        db = shoal.connect(data_dir=str(data_dir))
        try:
            data, _ = db.read("events", columns=["client", "seq", "row"])
        finally:
            db.close()
        return Counter(zip(data.column("client").to_pylist(), data.column("seq").to_pylist(),
                           data.column("row").to_pylist()))

    rows = landed()
    assert all(n == 1 for n in rows.values()), "no row may be visible twice"
    requests = Counter((c, s) for c, s, _ in rows)
    for key in acked:
        assert requests[key] == ROWS_PER_REQUEST, f"acknowledged request {key} lost"
    for key, n in requests.items():
        assert n == ROWS_PER_REQUEST, f"request {key} is partially visible ({n} rows)"
    assert set(requests) <= attempted

    # After a restart, clients retry what was never acknowledged, with the same keys:
    # what had landed is replayed, the rest applies; every request ends up exactly once.
    with start_server(data_dir) as again, httpx.Client(base_url=again.url, timeout=30) as http:
        for c, s in sorted(attempted - set(acked)):
            r = http.post("/v1/ingest/events", content=request_body(c, s),
                          headers={"X-Idempotency-Key": f"c{c}-s{s}"})
            assert r.status_code == 200, r.text
            assert r.json()["replayed"] == ((c, s) in requests)
        for (c, s), snap in list(acked.items())[:10]:
            r = http.post("/v1/ingest/events", content=request_body(c, s),
                          headers={"X-Idempotency-Key": f"c{c}-s{s}"})
            assert r.json()["replayed"] is True and r.json()["snapshot_id"] == snap
    final = landed()
    assert all(n == 1 for n in final.values())
    assert {(c, s) for c, s, _ in final} == attempted
