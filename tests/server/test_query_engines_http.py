"""Both engines over a real socket: `?engine=` forces each,
the answer's stats name it and why, a bad name or a refused statement is a 400; eight
queries at once beside a stream of REST ingests all answer correctly while every ingest is
acknowledged."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.server.conftest import _live

pytestmark = pytest.mark.services

ARROW = "application/vnd.apache.arrow.stream"
BASE_ROWS = 400


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from _live(tmp_path_factory, "engines", query_concurrency=16)


@pytest.fixture(scope="module")
def base(server):
    """`base`: 4 batches of 100 rows with known ids, never touched by the ingest below."""
    with server.client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "CREATE TABLE ev (kind string, rid string, "
                                              "v long)"})
        assert r.status_code == 200, r.text
        for b in range(4):
            body = "\n".join(json.dumps({"_timestamp": f"2026-03-01T0{b}:00:{i % 60:02d}Z",
                                         "kind": "base", "rid": f"r-{b}-{i}", "v": i})
                             for i in range(100)).encode()
            r = c.post("/v1/ingest/ev", content=body)
            assert r.status_code == 200, r.text
    server.db.query_engine.warm_up()
    return "ev"


def _query(c, sql: str, engine: str | None = None):
    params = {"engine": engine} if engine else {}
    return c.post("/v1/query", json={"sql": sql}, params=params)


def test_engine_parameter_forces_each_engine_and_stats_say_why(server, base):
    sql = "SELECT rid, v FROM ev WHERE rid = 'r-2-17'"
    with server.client(timeout=120) as c:
        answers = {}
        for engine in ("local", "spark", None):
            r = _query(c, sql, engine)
            assert r.status_code == 200, r.text
            answers[engine] = r.json()
        assert answers["local"]["stats"]["engine"] == "local"
        assert answers["spark"]["stats"]["engine"] == "spark"
        assert answers["spark"]["stats"]["engine_reason"] == "engine=spark requested"
        assert answers[None]["stats"]["engine"] == "local"          # auto: a small needle
        for doc in answers.values():
            assert doc["rows"] == [["r-2-17", 17]]
            assert doc["columns"] == [{"name": "rid", "type": "string"},
                                      {"name": "v", "type": "bigint"}]
        # the Arrow answer carries the engine in its stats header
        r = c.post("/v1/query", json={"sql": sql}, params={"engine": "local"},
                   headers={"Accept": ARROW})
        assert r.status_code == 200 and json.loads(r.headers["X-Shoal-Stats"])["engine"] == \
            "local"
        # EXPLAIN names the engine auto would pick
        r = _query(c, "EXPLAIN " + sql)
        assert r.status_code == 200 and r.json()["stats"]["engine"] == "local"
        # a bad name and a statement the local engine must not run: clear 400s
        r = _query(c, sql, "duck")
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_engine"
        r = _query(c, "SELECT initcap(kind) AS k FROM ev", "local")
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "local_engine_refused" and "initcap()" in err["message"]
        r = _query(c, "SELECT initcap(kind) AS k FROM ev LIMIT 1")
        assert r.status_code == 200 and r.json()["stats"]["engine"] == "spark"



def test_collected_arrays_render_alike_from_both_engines(server, base):
    """A sorted collect comes back in the JSON answer as the same nested list with the same
    column type from either engine, beside size(), array_join(), max_by() and first()."""
    sql = ("SELECT kind, sort_array(collect_set(v), false) AS vs, size(collect_list(rid)) AS n, "
           "array_join(sort_array(collect_list(rid)), ',') AS rids, max_by(v, rid) AS top, "
           "first(kind) AS k FROM ev WHERE kind = 'base' AND v < 2 GROUP BY kind")
    with server.client(timeout=120) as c:
        docs = {}
        for engine in ("local", "spark"):
            r = _query(c, sql, engine)
            assert r.status_code == 200, r.text
            docs[engine] = r.json()
    assert docs["local"]["stats"]["engine"] == "local"
    assert docs["local"]["columns"] == docs["spark"]["columns"]
    assert {"name": "vs", "type": "array<bigint>"} in docs["local"]["columns"]
    assert docs["local"]["rows"] == docs["spark"]["rows"] == [
        ["base", [1, 0], 8, "r-0-0,r-0-1,r-1-0,r-1-1,r-2-0,r-2-1,r-3-0,r-3-1", 1, "base"]]


def test_eight_concurrent_queries_and_rest_ingest(server, base):
    """8 clients query (needles and aggregates over the untouched `base` rows, half of them
    forced onto each engine now and then) while one client ingests 30 batches: every
    ingest is acknowledged once, every answer is right."""
    ingests = 30
    acks: list[dict] = []
    errors: list[str] = []
    done = threading.Event()

    def ingest() -> None:
        with server.client(timeout=120) as c:
            for k in range(ingests):
                body = "\n".join(json.dumps({"_timestamp": f"2026-03-02T00:{k:02d}:{i:02d}Z",
                                             "kind": "new", "rid": f"n-{k}-{i}", "v": 1})
                                 for i in range(50)).encode()
                r = c.post("/v1/ingest/ev", content=body,
                           headers={"X-Idempotency-Key": f"batch-{k}"})
                if r.status_code != 200:
                    errors.append(f"ingest {k}: {r.status_code} {r.text}")
                else:
                    acks.append(r.json())
        done.set()

    def queries(worker: int) -> int:
        answered = 0
        with server.client(timeout=300) as c:
            i = 0
            while not done.is_set() or i < 6:
                b, n = (worker + i) % 4, (worker * 7 + i) % 100
                engine = "spark" if i % 5 == 4 else None
                r = _query(c, f"SELECT rid, v FROM ev WHERE rid = 'r-{b}-{n}'", engine)
                assert r.status_code == 200, r.text
                assert r.json()["rows"] == [[f"r-{b}-{n}", n]], r.text
                r = _query(c, "SELECT count(*) AS c, sum(v) AS s FROM ev WHERE kind = 'base'")
                assert r.status_code == 200, r.text
                assert r.json()["rows"] == [[BASE_ROWS, 4 * sum(range(100))]], r.text
                answered += 2
                i += 1
        return answered

    writer = threading.Thread(target=ingest)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(queries, w) for w in range(8)]
        writer.start()
        writer.join(timeout=600)
        answered = sum(f.result(timeout=600) for f in futures)
    assert not errors, errors
    assert len(acks) == ingests and all(a["rows"] == 50 and not a["replayed"] for a in acks)
    assert answered >= 8 * 12
    with server.client(timeout=120) as c:
        r = _query(c, "SELECT count(*) AS c FROM ev WHERE kind = 'new'")
        assert r.json()["rows"] == [[ingests * 50]]
