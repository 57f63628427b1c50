"""The embedded engine's bounds over a real `shoal serve` (a subprocess, `--lazy-spark`:
nothing here starts Spark, so the server's memory is its own process's):

- a self-join whose answer is 16M rows, asked with small caps, stops the engine at the cap:
  the answer is the capped prefix (`truncated`) and the server's peak memory grows by less
  than `PEAK_BOUND_BYTES` (before, the whole answer was built first: +6 GB);
- a statement whose working memory exceeds the per-query limit (`SHOAL_LOCAL_QUERY_MEMORY`,
  64 MiB here, with spilling off: `SHOAL_LOCAL_QUERY_SPILL_BYTES=0`) is a 400
  `query_memory_exceeded` naming the setting, in bounded memory;
- a statement past the timeout is interrupted in DuckDB and its slot is freed;
- regular expressions that backtrack are refused before any engine runs (400
  `regex_too_complex`, positioned);
- afterwards the server answers an ordinary query as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.support.procmem import PeakMeter
from tests.support.server import ServerHandle, start_server
from tests.support.waiting import eventually

pytestmark = pytest.mark.services   # a shoal serve process

ROWS = 4000
TEXT = "x" * 50
MAX_ROWS = 10_000
QUERY_MEMORY = 64 << 20
SPILL_BYTES = 0
# The capped self-join and the refused one: what one query may add to the server's peak.
PEAK_BOUND_BYTES = 300 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path_factory.mktemp("engine-bounds"), extra_args=["--lazy-spark"],
                          env={"SHOAL_QUERY_MAX_ROWS": str(MAX_ROWS),
                               "SHOAL_LOCAL_QUERY_MEMORY": str(QUERY_MEMORY),
                               "SHOAL_LOCAL_QUERY_SPILL_BYTES": str(SPILL_BYTES),
                               "SHOAL_QUERY_TIMEOUT_S": "3",
                               "SHOAL_QUERY_CONCURRENCY": "1"})
    try:
        with httpx.Client(base_url=handle.url, timeout=120) as http:
            r = http.post("/v1/tables", json={"name": "t", "columns": [
                {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]})
            assert r.status_code == 201, r.text
            body = "".join(json.dumps({"n": 0, "s": f"{TEXT}{i}"}) + "\n" for i in range(ROWS))
            r = http.post("/v1/ingest/t", content=body.encode())
            assert r.status_code == 200 and r.json()["rows"] == ROWS, r.text
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=300) as c:
        yield c


def queries_running(http: httpx.Client) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("shoal_queries_running "):
            return float(line.split()[1])
    raise AssertionError("no shoal_queries_running in /metrics")


def ordinary_answer(http: httpx.Client) -> None:
    r = http.post("/v1/query", json={"sql": "SELECT n, count(*) AS c FROM t GROUP BY n"})
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == [[0, ROWS]]
    assert r.json()["stats"]["engine"] == "local"


def test_a_capped_self_join_stops_the_engine_at_the_cap(server, http):
    ordinary_answer(http)                   # warm: the engine and its first database
    meter = PeakMeter(server.proc.pid).start()
    r = http.post("/v1/query", json={"kql": "t | join kind=inner (t) on n"})
    growth = meter.growth_bytes()
    print(f"\nself-join of {ROWS} rows (16M answer rows), capped at {MAX_ROWS}: server peak "
          f"+{growth / 1e6:.0f} MB (peak reset: {meter.reset_ok})")
    assert r.status_code == 200, r.text[:500]
    doc = r.json()
    assert len(doc["rows"]) == MAX_ROWS
    assert doc["stats"]["truncated"] is True
    assert doc["stats"]["truncated_by"] == "query_max_rows"
    assert doc["stats"]["engine"] == "local"
    assert growth < PEAK_BOUND_BYTES, f"peak grew by {growth / 1e6:.0f} MB"
    ordinary_answer(http)


def test_a_query_over_the_memory_limit_is_a_400_naming_the_setting(server, http):
    # Sorting the 16M-row join needs it all at once: far beyond 64 MiB.
    sql = ("SELECT a.s AS x, b.s AS y FROM t a JOIN t b ON a.n = b.n "
           "ORDER BY x DESC, y DESC")
    meter = PeakMeter(server.proc.pid).start()
    r = http.post("/v1/query", params={"engine": "local"}, json={"sql": sql})
    growth = meter.growth_bytes()
    print(f"\nsort of a 16M-row join under a {QUERY_MEMORY >> 20} MiB query limit: "
          f"{r.status_code}, server peak +{growth / 1e6:.0f} MB")
    assert r.status_code == 400, r.text[:500]
    error = r.json()["error"]
    assert error["code"] == "query_memory_exceeded"
    assert "SHOAL_LOCAL_QUERY_MEMORY" in error["message"] and "64.0 MiB" in error["message"]
    assert growth < PEAK_BOUND_BYTES, f"peak grew by {growth / 1e6:.0f} MB"
    eventually(lambda: queries_running(http), "the slot to be free", until=lambda n: n == 0)
    ordinary_answer(http)


def test_a_timed_out_statement_is_interrupted_and_frees_its_slot(server, http):
    # 64e9 joined rows: DuckDB would run for many minutes.
    sql = ("SELECT count(*) AS c FROM t a JOIN t b ON a.n = b.n JOIN t c ON b.n = c.n")
    r = http.post("/v1/query", params={"engine": "local"}, json={"sql": sql})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "query_timeout" and "3 s" in error["message"]
    eventually(lambda: queries_running(http), "the interrupted statement's slot to be free",
               until=lambda n: n == 0)
    ordinary_answer(http)       # one slot: taken and answered, so DuckDB is not still busy


@pytest.mark.parametrize("body, pattern", [
    ({"sql": "SELECT count(*) AS c FROM t\nWHERE s RLIKE '(.*a){7}$'"}, "(.*a){7}$"),
    ({"sql": "SELECT regexp_extract(s, '(x+)+y', 1) AS m FROM t"}, "(x+)+y"),
    ({"sql": "SELECT count(*) AS c FROM t WHERE s RLIKE '(a)\\\\1'"}, "(a)\\1"),
    ({"kql": 't | where s matches regex "(.*a){7}$" | count'}, "(.*a){7}$"),
])
def test_backtracking_regexes_are_refused_before_any_engine_runs(http, body, pattern):
    r = http.post("/v1/query", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "regex_too_complex"
    assert repr(pattern) in error["message"]
    if "sql" in body and "\n" in body["sql"]:
        assert error["details"][0]["line"] == 2
    assert queries_running(http) == 0


def test_column_patterns_are_refused(http):
    r = http.post("/v1/query", json={"sql": "SELECT count(*) AS c FROM t WHERE s RLIKE s"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "regex_too_complex"
    assert "string literal" in r.json()["error"]["message"]
