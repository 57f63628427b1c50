"""The query lane's bounds over a real socket, on in-process apps (so the test sees the Spark
engine): the row and byte caps cut answers to a prefix and say so (`truncated`), in JSON
and in Arrow; the timeout cancels the statement's Spark jobs (no task keeps running) and
answers 400 `query_timeout`; a task that ignores the cancellation (Java's regex matching)
keeps its statement's slot until Spark shows it ended; a busy slot gives 429 + Retry-After
while DDL still answers; the engine keeps answering afterwards. The embedded engine's
memory limit hands a statement over it to Spark in `auto`."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import httpx
import pyarrow as pa
import pytest

import shoal
from shoal.client import Shoal
from shoal.server import create_app
from tests.support.fixtures import SPARK_MASTER
from tests.support.waiting import eventually
from tests.support.server import serve_app

ARROW = "application/vnd.apache.arrow.stream"
NUMS = 200_000          # a cross join of nums with itself is 4e10 rows: it never ends here
TEXTS, TEXT_LEN = 400, 1000
# One text on which `^.*a.*ac` fails in ~n^2 steps: 20-30 s of one core in Java's regex, a
# loop that never checks for interruption.
LONG_TEXT = 60_000


@pytest.fixture(scope="module")
def db(tmp_path_factory, spark) -> Iterator[Shoal]:
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("limits")),
                           spark_master=SPARK_MASTER)
    client.sql("CREATE TABLE nums (n long)")
    client.ingest_arrow("nums", pa.table({"n": pa.array(range(NUMS), pa.int64())}))
    client.sql("CREATE TABLE texts (n long, s string)")
    client.ingest_arrow("texts", pa.table({
        "n": pa.array(range(TEXTS), pa.int64()),
        "s": [chr(ord("a") + i % 26) * TEXT_LEN for i in range(TEXTS)]}))
    client.sql("CREATE TABLE long_texts (s string)")
    client.ingest_arrow("long_texts", pa.table({"s": ["a" * LONG_TEXT + "b"]}))
    client.query_engine.warm_up()
    yield client
    client.close()


@contextmanager
def live(db: Shoal, **settings: Any) -> Iterator[httpx.Client]:
    app = create_app(db, config=replace(db.config, **settings))
    with serve_app(app) as url, httpx.Client(base_url=url, timeout=120) as client:
        yield client


def running_tasks(db: Shoal) -> int:
    """Tasks running on Spark's executors now (a cancelled job's tasks included)."""
    infos = db.query_engine.spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return sum(info.numRunningTasks() for info in infos)


def queries_running(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("shoal_queries_running "):
            return float(line.split()[1])
    raise AssertionError("no shoal_queries_running in /metrics")


def test_row_cap_cuts_json_and_arrow_answers_to_a_prefix(db):
    with live(db, query_max_rows=100) as http:
        r = http.post("/v1/query", json={"sql": "SELECT n FROM nums ORDER BY n DESC"})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["rows"] == [[NUMS - 1 - i] for i in range(100)]
        assert doc["stats"]["truncated"] is True
        assert doc["stats"]["truncated_by"] == "query_max_rows"

        r = http.post("/v1/query", json={"sql": "SELECT n FROM nums ORDER BY n"},
                      headers={"Accept": ARROW})
        assert r.status_code == 200 and r.headers["content-type"] == ARROW
        assert pa.ipc.open_stream(r.content).read_all().column("n").to_pylist() == list(
            range(100))
        stats = json.loads(r.headers["x-shoal-stats"])
        assert stats["truncated"] is True and stats["truncated_by"] == "query_max_rows"

        # Exactly the cap is a whole answer, not a truncated one.
        whole = http.post("/v1/query", json={"sql": "SELECT n FROM nums WHERE n < 100"}).json()
        assert len(whole["rows"]) == 100 and whole["stats"]["truncated"] is False
        assert "truncated_by" not in whole["stats"]


def test_byte_cap_cuts_answers_to_the_longest_prefix_that_fits(db):
    cap = 64 << 10
    with live(db, query_max_bytes=cap) as http:
        r = http.post("/v1/query", json={"sql": "SELECT n, s FROM texts ORDER BY n"},
                      headers={"Accept": ARROW})
        assert r.status_code == 200, r.text
        table = pa.ipc.open_stream(r.content).read_all()
        stats = json.loads(r.headers["x-shoal-stats"])
        assert stats["truncated"] is True and stats["truncated_by"] == "query_max_bytes"
        kept = table.num_rows
        assert 0 < kept < TEXTS
        assert table.column("n").to_pylist() == list(range(kept))
        assert table.nbytes <= cap
        assert table.nbytes + TEXT_LEN > cap          # one more row would not have fitted

        doc = http.post("/v1/query", json={"sql": "SELECT n, s FROM texts ORDER BY n"}).json()
        assert [row[0] for row in doc["rows"]] == list(range(kept))
        assert doc["stats"]["truncated"] is True
        assert doc["stats"]["truncated_by"] == "query_max_bytes"

        small = http.post("/v1/query", json={"sql": "SELECT n, s FROM texts WHERE n < 3"})
        assert len(small.json()["rows"]) == 3 and small.json()["stats"]["truncated"] is False


@pytest.mark.slow
def test_timeout_cancels_the_spark_job_and_frees_the_slot(db):
    heavy = "SELECT sum(a.n * b.n) AS s FROM nums a CROSS JOIN nums b"
    with live(db, query_timeout_s=8.0, query_concurrency=1) as http:
        answer: dict[str, httpx.Response] = {}
        worker = threading.Thread(target=lambda: answer.update(
            r=http.post("/v1/query", params={"engine": "spark"}, json={"sql": heavy})))
        worker.start()
        eventually(lambda: (running_tasks(db), worker.is_alive()),
                   "the heavy query's tasks to run (running tasks, query in flight)",
                   until=lambda seen: seen[0] > 0 or not seen[1])
        assert worker.is_alive(), f"answered before its Spark tasks ran: {answer['r'].text}"

        # Its slot is the only one: another SELECT is refused at once, DDL still answers.
        busy = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM nums"})
        assert busy.status_code == 429, busy.text
        assert int(busy.headers["retry-after"]) >= 1
        assert busy.json()["error"]["code"] == "too_many_queries"
        shown = http.post("/v1/query", json={"sql": "SHOW TABLES"})
        assert shown.status_code == 200, shown.text

        worker.join(120)
        assert not worker.is_alive(), "the query ran on past its deadline"
        r = answer["r"]
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == "query_timeout"
        assert "8 s" in error["message"] and "query_timeout_s" in error["message"]

        # Cancelled in Spark: no task of it keeps running, and the slot is free again.
        eventually(lambda: running_tasks(db), "the cancelled tasks to stop",
                   until=lambda n: n == 0)
        eventually(lambda: queries_running(http), "the slot to be freed",
                   until=lambda n: n == 0)
    # The engine keeps answering (through an app whose limit does not race a busy machine).
    with live(db) as http:
        after = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM nums"})
        assert after.status_code == 200, after.text
        assert after.json()["rows"] == [[NUMS]]


@pytest.mark.slow
def test_timeout_interrupts_the_embedded_engine_too(db):
    heavy = "SELECT sum(a.n * b.n) AS s FROM nums a CROSS JOIN nums b"
    with live(db, query_timeout_s=3.0, query_concurrency=1) as http:
        r = http.post("/v1/query", params={"engine": "local"}, json={"sql": heavy})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == "query_timeout" and "3 s" in error["message"]
        assert queries_running(http) == 0       # the slot is free again
        # interrupted, not left running: the embedded engine answers the next query
        after = http.post("/v1/query", params={"engine": "local"},
                          json={"sql": "SELECT count(*) AS c FROM nums"})
        assert after.status_code == 200, after.text
        assert after.json()["rows"] == [[NUMS]]
        assert after.json()["stats"]["engine"] == "local"
    # In `auto` a timed-out statement is not handed to Spark (it would time out again).
    with live(db, query_timeout_s=3.0) as http:
        r = http.post("/v1/query", json={"sql": heavy})
        assert r.status_code == 400 and r.json()["error"]["code"] == "query_timeout"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_client_that_goes_away_cancels_its_query(db, engine):
    """The console's Cancel, a closed curl, a client's own timeout: the connection closes and
    the statement stops (no deadline here: without the cancel it would run for hours)."""
    heavy = "SELECT sum(a.n * b.n) AS s FROM nums a CROSS JOIN nums b"
    with live(db, query_concurrency=1) as http:
        body = json.dumps({"sql": heavy}).encode()
        sock = socket.create_connection((http.base_url.host, http.base_url.port))
        sock.sendall(f"POST /v1/query?engine={engine} HTTP/1.1\r\n"
                     f"Host: 127.0.0.1:{http.base_url.port}\r\n"
                     "Content-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        eventually(lambda: queries_running(http), "the query to run", until=lambda n: n == 1)
        if engine == "spark":
            eventually(lambda: running_tasks(db), "its Spark tasks to run", until=lambda n: n > 0)
        sock.close()
        eventually(lambda: queries_running(http), "the slot of the abandoned query to be freed",
                   until=lambda n: n == 0)
        if engine == "spark":
            eventually(lambda: running_tasks(db), "the cancelled tasks to stop",
                       until=lambda n: n == 0)
        after = http.post("/v1/query", params={"engine": engine},
                          json={"sql": "SELECT count(*) AS c FROM nums"})
        assert after.status_code == 200 and after.json()["rows"] == [[NUMS]], after.text


@pytest.mark.slow
def test_a_timed_out_regex_holds_its_slot_until_its_spark_task_has_ended(db):
    """Java's regex matching ignores the interrupt of a cancelled task: the job fails at the
    deadline but its task runs on. The statement's slot stays taken until Spark's status
    tracker shows no task of it running, so such statements cannot pile up."""
    slow = "SELECT count(*) AS c FROM long_texts WHERE s RLIKE '^.*a.*ac'"   # allowed: quadratic
    # Warm, without a deadline: reading the text is quick then, so the deadline lands inside
    # the regex (a task cancelled while it still reads does stop).
    warm = db.sql("SELECT length(s) AS n FROM long_texts", engine="spark")
    assert warm.table.column("n").to_pylist() == [LONG_TEXT + 1]
    with live(db, query_timeout_s=4.0, query_concurrency=1) as http:
        r = http.post("/v1/query", params={"engine": "spark"}, json={"sql": slow})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "query_timeout"
        tracker = db.query_engine.spark.sparkContext.statusTracker()
        # The job itself failed at the deadline (its end reaches the tracker through
        # Spark's listener bus, so it is awaited):
        eventually(lambda: tracker.getActiveJobsIds(), "the cancelled job to be inactive",
                   until=lambda ids: ids == [])
        held_while_running = []

        def slot_then_tasks() -> tuple[float, int]:
            slots = queries_running(http)                # read first: a slot freed now...
            tasks = running_tasks(db)
            assert slots == 1 or tasks == 0, "the slot was freed while a task still ran"
            if slots == 1 and tasks > 0:                 # ...means no task was left then
                held_while_running.append(tasks)
            return slots, tasks

        eventually(slot_then_tasks, "the regex task to end and its slot to be freed",
                   until=lambda seen: seen == (0, 0), timeout_s=600)
        assert held_while_running, "the regex task had ended before the answer"
        busy_free = http.post("/v1/query", params={"engine": "spark"},
                              json={"sql": "SELECT count(*) AS c FROM nums"})
        assert busy_free.status_code == 200 and busy_free.json()["rows"] == [[NUMS]]
        assert tracker.getActiveJobsIds() == [] and running_tasks(db) == 0


def test_auto_hands_a_statement_over_the_memory_limit_to_spark(db, tmp_path):
    """With a tiny per-query memory (and nothing it may spill), the embedded engine cannot
    take the statement: in `auto` Spark answers it (and says why); with `local` it is
    refused with the settings' names."""
    from shoal.query.embedded.local_engine import LocalMemoryError

    small = shoal.connect(data_dir=db.config.data_dir, spark_master=SPARK_MASTER,
                          local_query_memory=64 << 10, local_query_spill_bytes=0)
    try:
        sql = "SELECT n, s FROM texts ORDER BY n"
        result = small.sql(sql)
        assert result.stats.engine == "spark", result.stats.engine_reason
        assert "SHOAL_LOCAL_QUERY_MEMORY" in result.stats.engine_reason
        assert result.table.column("n").to_pylist() == list(range(TEXTS))
        with pytest.raises(LocalMemoryError, match="SHOAL_LOCAL_QUERY_MEMORY"):
            small.sql(sql, engine="local")
        # The same statement within the default limit: answered in process, same answer.
        whole = db.sql(sql)
        assert whole.stats.engine == "local"
        assert whole.table.to_pylist() == result.table.to_pylist()
    finally:
        small.close()


def test_python_api_keeps_whole_answers(db):
    # The caps are the server's: without limits the engine answers in full.
    assert db.sql("SELECT n FROM nums").table.num_rows == NUMS
