"""`POST /v1/ingest/{table}` with NDJSON coerced in worker processes (`shoal.ingest.pool`),
over a real socket: the same answers and rows as coercion in the server process, evolve
through the pool, few extents from many concurrent 1 MB bodies, a worker killed mid-request
(503, replaced, nothing written), and `shoal serve --coerce-workers` leaving no process
behind when it stops."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.ingest.pool import CoercionPool
from tests.server.conftest import Live, _live, create
from tests.support.server import start_server
from tests.support.waiting import eventually

CAP = 4 << 20
COLUMNS = [{"name": "service", "type": "string"}, {"name": "status", "type": "int"},
           {"name": "duration", "type": "long"}, {"name": "at", "type": "timestamp"},
           {"name": "attrs", "type": "dynamic"}, {"name": "emb", "type": "vector(2)"},
           {"name": "level", "type": "string", "nullable": False, "default": "info"}]


def _serve(tmp_path_factory, name: str, pool: CoercionPool | None) -> Iterator[Live]:
    return _live(tmp_path_factory, name, max_body_bytes=CAP, coercion_pool=pool)


@pytest.fixture(scope="module")
def pool() -> Iterator[CoercionPool]:
    with CoercionPool(2).start() as p:
        yield p


@pytest.fixture(scope="module")
def pooled(tmp_path_factory, pool: CoercionPool) -> Iterator[Live]:
    yield from _serve(tmp_path_factory, "pooled", pool)


@pytest.fixture(scope="module")
def inproc(tmp_path_factory) -> Iterator[Live]:
    yield from _serve(tmp_path_factory, "inproc", None)


def lines(*docs: Any) -> bytes:
    return b"".join((d if isinstance(d, str) else json.dumps(d)).encode() + b"\n"
                    for d in docs)


def rows(live: Live, table: str) -> list[dict[str, Any]]:
    t, _ = live.db.read(table)
    t = t.drop_columns(["_timestamp"]).sort_by([("duration", "ascending")])
    return t.to_pylist()


def comparable(r: httpx.Response) -> tuple[int, Any]:
    doc = r.json()
    if r.status_code == 200:
        doc = {k: v for k, v in doc.items() if k not in ("snapshot_id", "extent_ids")}
    return r.status_code, doc


MIXED = lines({"service": "api", "status": 200, "duration": 1, "attrs": {"a": [1, 2]}},
              {"service": "web", "status": "oops", "duration": 2},
              "", "not json", "[1, 2]",
              {"service": "db", "duration": 3, "emb": [1, 2, 3]},
              {"service": "q", "duration": 4, "at": "2024-01-01T00:00:00Z", "level": None},
              {"service": "r", "duration": 5, "extra": {"k": 1}, "props": {"own": 1}},
              {"duration": 6, "status": 3_000_000_000},
              {"duration": 7, "emb": [0.5, 2]})


@pytest.mark.parametrize("params", [{"partial": "true"}, {}, {"mode": "drop", "partial": "true"},
                                    {"mode": "reject", "partial": "true"}, {"mode": "reject"}],
                         ids=["partial", "atomic", "drop", "reject-partial", "reject-atomic"])
def test_same_answers_and_rows_as_in_process(pooled: Live, inproc: Live, params, table_name):
    got: list[tuple[int, Any]] = []
    for live in (pooled, inproc):
        with live.client() as http:
            create(http, table_name, COLUMNS)
            r = http.post(f"/v1/ingest/{table_name}", params=params, content=MIXED)
            got.append(comparable(r))
    assert got[0] == got[1]
    status, doc = got[0]
    if status == 400:     # atomic: line and field of each problem, nothing written
        assert doc["error"]["code"] == "bad_payload"
        assert [d["line"] for d in doc["error"]["details"]][:3] == [2, 4, 5]
        assert doc["error"]["details"][0]["field"] == "status"
    else:
        assert doc["rejected_count"] >= 4
    assert rows(pooled, table_name) == rows(inproc, table_name)


def test_evolve_adds_columns_through_the_pool(pooled: Live, inproc: Live, table_name):
    body = lines(*({"service": "s", "duration": i, "region": f"eu-{i % 3}", "shard": i % 4}
                   for i in range(300)))
    acks = []
    for live in (pooled, inproc):
        with live.client() as http:
            create(http, table_name, COLUMNS)
            r = http.post(f"/v1/ingest/{table_name}", content=body)
            assert r.status_code == 200, r.text
            acks.append(r.json())
            doc = http.get(f"/v1/tables/{table_name}").json()
            assert [c["name"] for c in doc["columns"]][-2:] == ["region", "shard"]
    assert acks[0]["new_columns"] == acks[1]["new_columns"] == ["region", "shard"]
    assert acks[0]["rows"] == 300
    assert rows(pooled, table_name) == rows(inproc, table_name)
    assert rows(pooled, table_name)[5]["region"] == "eu-2"


@pytest.mark.parametrize("properties", ["", " WITH (timestamp_unit = 's', props = 'off')"])
def test_table_conventions_and_warnings_through_the_pool(pooled: Live, inproc: Live,
                                                         properties, table_name):
    """The table's timestamp_unit and props reach the workers; their warnings come back."""
    body = lines({"duration": 1, "at": 1795929000, "_timestamp": "2026-11-29 05:10:00"},
                 {"duration": 2, "at": 1795929000.5, "Bad-Key": 1})
    got = []
    for live in (pooled, inproc):
        with live.client() as http:
            r = http.post("/v1/query", json={"sql": f"CREATE TABLE {table_name} (duration "
                                                    f"long, at timestamp){properties}"})
            assert r.status_code == 200, r.text
            r = http.post(f"/v1/ingest/{table_name}?partial=true", content=body)
            got.append(comparable(r))
    assert got[0] == got[1]
    status, doc = got[0]
    assert status == 200
    if properties:
        assert doc["warnings"] == [] and doc["rejected_count"] == 1
        assert "keeps no props" in doc["rejected"][0]["message"]
    else:   # ns: the first line's number warns; the second, a fraction, is refused
        assert [w["column"] for w in doc["warnings"]] == ["at"]
        assert doc["rejected_count"] == 1
    assert rows(pooled, table_name) == rows(inproc, table_name)


def test_idempotency_key_through_the_pool(pooled: Live, table_name):
    with pooled.client() as http:
        create(http, table_name, COLUMNS)
        key = {"X-Idempotency-Key": f"pool-{table_name}"}
        first = http.post(f"/v1/ingest/{table_name}", content=lines({"duration": 1}),
                          headers=key)
        again = http.post(f"/v1/ingest/{table_name}", content=lines({"duration": 1}),
                          headers=key)
        assert first.status_code == again.status_code == 200
        assert again.json()["replayed"] is True
        assert again.json()["snapshot_id"] == first.json()["snapshot_id"]
        assert http.get(f"/v1/tables/{table_name}").json()["row_count"] == 1


@pytest.mark.slow
def test_many_1mb_bodies_make_few_extents(pooled: Live, table_name):
    line = ('{"service":"svc-%d","status":200,"duration":%d,"at":"2024-05-01T10:00:00Z",'
            '"attrs":{"http":{"route":"/api/v1/x"}},"level":"info","pad":"%s"}')
    bodies, n = [], 0
    for _ in range(24):
        out = []
        while sum(map(len, out)) < 1 << 20:
            out.append((line % (n % 40, n, "x" * 120)).encode() + b"\n")
            n += 1
        bodies.append(b"".join(out))
    acks: list[dict[str, Any]] = []
    errors: list[str] = []
    todo = list(range(len(bodies)))
    lock = threading.Lock()
    with pooled.client() as http:
        create(http, table_name, COLUMNS)

    def client() -> None:
        with pooled.client(timeout=120) as http:
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                r = http.post(f"/v1/ingest/{table_name}", content=bodies[i],
                              params={"mode": "drop"})
                with lock:
                    (acks.append(r.json()) if r.status_code == 200 else errors.append(r.text))

    # Groups close on size or a debounce after their oldest request: a debounce long enough
    # for the 8 concurrent bodies to be coerced makes the grouping independent of the
    # machine's load (with the default 20 ms it follows the client count: see BENCHMARKS).
    buffer = pooled.db.write_path.buffer
    debounce, buffer.debounce_s = buffer.debounce_s, 0.5
    try:
        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        buffer.debounce_s = debounce
    assert errors == []
    assert sum(a["rows"] for a in acks) == n          # exact: every line, once
    extents = {e for a in acks for e in a["extent_ids"]}
    assert len(extents) <= len(bodies) // 2, extents  # grouped, not one extent per body
    with pooled.client() as http:
        doc = http.get(f"/v1/tables/{table_name}").json()
    assert doc["row_count"] == n                      # every ack was committed
    assert all(a["snapshot_id"] <= doc["snapshot_id"] for a in acks)


@pytest.fixture
def one_worker(tmp_path_factory) -> Iterator[tuple[Live, CoercionPool]]:
    with CoercionPool(1).start() as p:
        for live in _serve(tmp_path_factory, "one-worker", p):
            yield live, p


def test_worker_killed_mid_request_is_503_and_replaced(one_worker, table_name):
    live, pool = one_worker
    (pid,) = pool.pids
    with live.client() as http:
        create(http, table_name, COLUMNS)
    answers: dict[str, httpx.Response] = {}

    def post(name: str, duration: int) -> None:
        with live.client() as http:
            answers[name] = http.post(f"/v1/ingest/{table_name}",
                                      content=lines({"service": name, "duration": duration}))

    os.kill(pid, signal.SIGSTOP)      # the request reaches the worker and stays there
    doomed = threading.Thread(target=post, args=("doomed", 1))
    doomed.start()
    eventually(lambda: pool.busy, "the request to reach the stopped worker")
    queued = threading.Thread(target=post, args=("queued", 2))
    queued.start()
    eventually(lambda: pool.waiting, "a second request waiting for a worker")
    os.kill(pid, signal.SIGKILL)
    doomed.join()
    queued.join()
    r = answers["doomed"]
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "coercion_worker_lost"
    assert "Retry-After" in r.headers and str(pid) in r.json()["error"]["message"]
    assert answers["queued"].status_code == 200, answers["queued"].text
    assert pool.stats.restarts == 1 and pool.pids != [pid]
    with live.client() as http:
        r = http.post(f"/v1/ingest/{table_name}", content=lines({"service": "after",
                                                                  "duration": 3}))
        assert r.status_code == 200, r.text
        metrics = http.get("/metrics").text
    assert "shoal_coerce_worker_restarts 1.0" in metrics
    assert [r["service"] for r in rows(live, table_name)] == ["queued", "after"]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(x) for x in (task / "children").read_text().split()]
    return out


@pytest.mark.services
def test_serve_with_workers_stops_them_all(tmp_path):
    srv = start_server(tmp_path / "data", extra_args=["--lazy-spark", "--coerce-workers", "2"])
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            create(http, "t", COLUMNS)
            r = http.post("/v1/ingest/t", content=lines({"service": "a", "duration": 1}))
            assert r.status_code == 200, r.text
            assert "shoal_coerce_workers 2.0" in http.get("/metrics").text
        workers = _children(srv.proc.pid)
        assert len(workers) == 2, workers
    finally:
        status = srv.stop()
    assert status in (0, -signal.SIGTERM), srv.log()
    assert [p for p in workers if os.path.exists(f"/proc/{p}")] == []


@pytest.mark.services
def test_negative_worker_count_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="--coerce-workers must be 0 or more"):
        start_server(tmp_path / "data", extra_args=["--lazy-spark", "--coerce-workers", "-1"],
                     startup_timeout_s=60)
