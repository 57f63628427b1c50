"""A real `shoal serve` under load and losing its Spark: 50 concurrent heavy queries against two
query slots get correct answers or 429s (never a 5xx, never a dead engine); a result beyond
the driver's bound is a 400; SIGKILL of the server's Spark JVM fails the query in flight
with 503, turns `/readyz` 503, and the server restarts Spark by itself: ready again, and the
next query answers. A JVM that stops answering (SIGSTOP) is found by the supervisor's probe
(default timeout: 20 s) and restarted the same way."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.waiting import eventually
from tests.support.server import ServerHandle, start_server

NUMS = 3000
BLOB_LEN = 200_000
pytestmark = pytest.mark.slow

CAP_BYTES = 1 << 20                 # the server's byte cap; Spark collects at most twice that


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerHandle]:
    # Every query on Spark (the embedded engine would answer these small tables itself).
    env = {"SHOAL_SPARK_MASTER": "local[2]", "SHOAL_QUERY_CONCURRENCY": "2",
           "SHOAL_QUERY_ENGINE": "spark",
           "SHOAL_QUERY_MAX_ROWS": "1000", "SHOAL_QUERY_MAX_BYTES": str(CAP_BYTES)}
    with start_server(tmp_path_factory.mktemp("restart"), env=env) as srv:
        with httpx.Client(base_url=srv.url, timeout=120) as http:
            for ddl in ("CREATE TABLE nums (n long)", "CREATE TABLE blobs (n long, s string)"):
                assert http.post("/v1/query", json={"sql": ddl}).status_code == 200
            body = "\n".join(json.dumps({"n": i}) for i in range(NUMS))
            assert http.post("/v1/ingest/nums", content=body).status_code == 200
            body = "\n".join(json.dumps({"n": i, "s": "x" * BLOB_LEN}) for i in range(20))
            assert http.post("/v1/ingest/blobs", content=body).status_code == 200
            # Spark warms up in the background; the first query waits for it.
            r = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM nums"})
            assert r.status_code == 200 and r.json()["rows"] == [[NUMS]], r.text
        yield srv


def java_children(pid: int) -> list[int]:
    """Pids of the `java` processes whose parent is `pid` (Spark's JVM), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid and comm == "java":
            found.append(int(entry.name))
    return found


def status(url: str, path: str) -> int:
    try:
        return httpx.get(url + path, timeout=10).status_code
    except httpx.HTTPError:
        return -1


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


SUM_SQL = "SELECT count(*) AS c, sum(a.n * b.n) AS s FROM nums a CROSS JOIN nums b"
PAIRS_SQL = "SELECT a.n AS x, b.n AS y FROM nums a CROSS JOIN nums b ORDER BY x, y"


def test_fifty_concurrent_heavy_queries_get_answers_or_429(server):
    total = NUMS * (NUMS - 1) // 2
    barrier = threading.Barrier(50)
    answers: list[tuple[str, httpx.Response | BaseException]] = []

    def one(i: int) -> None:
        sql = SUM_SQL if i % 2 else PAIRS_SQL
        with httpx.Client(base_url=server.url, timeout=300) as http:
            barrier.wait()
            try:
                answers.append((sql, http.post("/v1/query", json={"sql": sql})))
            except httpx.HTTPError as e:
                answers.append((sql, e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert len(answers) == 50
    codes = []
    for sql, r in answers:
        assert isinstance(r, httpx.Response), f"{sql}: {r!r}"
        codes.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["code"] == "too_many_queries"
            continue
        assert r.status_code == 200, r.text
        doc = r.json()
        if sql == SUM_SQL:
            assert doc["rows"] == [[NUMS * NUMS, total * total]]
            assert doc["stats"]["truncated"] is False
        else:   # the first 1,000 of 9 M ordered pairs: the row cap cut it
            assert doc["rows"] == [[0, y] for y in range(1000)]
            assert doc["stats"]["truncated"] is True
    assert 200 in codes and 429 in codes, codes
    with httpx.Client(base_url=server.url, timeout=120) as http:
        assert http.get("/readyz").status_code == 200
        r = http.post("/v1/query", json={"sql": "SELECT max(n) AS m FROM nums"})
        assert r.status_code == 200 and r.json()["rows"] == [[NUMS - 1]]


def test_result_beyond_the_driver_bound_is_400_and_smaller_ones_are_cut(server):
    with httpx.Client(base_url=server.url, timeout=120) as http:
        r = http.post("/v1/query", json={"sql": "SELECT n, s FROM blobs"})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == "result_too_large"
        assert "maxResultSize" in error["message"]
        # 8 rows of 200 kB fit what Spark may collect; the answer keeps what fits 1 MiB.
        r = http.post("/v1/query", json={"sql": "SELECT n, s FROM blobs WHERE n < 8 "
                                                "ORDER BY n"})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert [row[0] for row in doc["rows"]] == list(range(CAP_BYTES // BLOB_LEN))
        assert doc["stats"]["truncated_by"] == "query_max_bytes"
        assert http.get("/readyz").status_code == 200


def test_sigkill_of_the_spark_jvm_is_survived(server):
    [jvm] = java_children(server.proc.pid)
    in_flight: dict[str, httpx.Response] = {}

    def endless() -> None:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            in_flight["r"] = http.post("/v1/query", json={
                "sql": "SELECT count(*) AS c FROM nums a, nums b, nums c, nums d"})

    worker = threading.Thread(target=endless)
    worker.start()
    eventually(lambda: metric(server.url, "shoal_queries_running"), "the query to start",
               until=lambda n: n == 1)
    os.kill(jvm, signal.SIGKILL)

    worker.join(300)
    r = in_flight["r"]
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "engine_unavailable"
    assert int(r.headers["retry-after"]) >= 1

    eventually(lambda: status(server.url, "/readyz"), "/readyz to say not ready",
               until=lambda code: code == 503)
    eventually(lambda: status(server.url, "/readyz"), "/readyz to be ready again",
               until=lambda code: code == 200, timeout_s=300)
    [again] = java_children(server.proc.pid)
    assert again != jvm
    assert metric(server.url, "shoal_spark_restarts") == 1
    with httpx.Client(base_url=server.url, timeout=120) as http:
        r = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM nums WHERE n < 10"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [[10]]
        assert int_from_bytes_works(http)


def int_from_bytes_works(http: httpx.Client) -> bool:
    """shoal's own functions are registered in the new session too."""
    r = http.post("/v1/query", json={"sql": "SELECT int_from_bytes(X'0000002A') AS v"})
    return r.status_code == 200 and r.json()["rows"] == [[42]]


def test_a_wedged_spark_jvm_is_restarted(server):
    [jvm] = java_children(server.proc.pid)
    restarts = metric(server.url, "shoal_spark_restarts")
    os.kill(jvm, signal.SIGSTOP)        # alive, but answers nothing
    try:
        eventually(lambda: status(server.url, "/readyz"), "/readyz to say not ready",
                   until=lambda code: code == 503, timeout_s=300)
        eventually(lambda: status(server.url, "/readyz"), "/readyz to be ready again",
                   until=lambda code: code == 200, timeout_s=300)
    finally:
        if Path(f"/proc/{jvm}").exists():
            os.kill(jvm, signal.SIGCONT)
    [again] = java_children(server.proc.pid)
    assert again != jvm
    assert metric(server.url, "shoal_spark_restarts") == restarts + 1
    with httpx.Client(base_url=server.url, timeout=120) as http:
        r = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM nums"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [[NUMS]]
