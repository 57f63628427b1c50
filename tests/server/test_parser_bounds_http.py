"""The query front ends hold their bounds over a real server: a KQL string cannot end the SQL
literal it becomes (through `/v1/query`, Kusto's `/v2/rest/query` and Flight SQL's `kql:`),
and a query deeper or longer than the parsers' bounds (PromQL nesting and operators, KQL
`let`s and nesting) is a positioned 400 that costs the server next to no memory.

The injection runs on an in-process server over the test run's Spark session (a statement
with a backslash is Spark's to answer); the bounds on a `shoal serve` subprocess
(`--lazy-spark`, the embedded engine), whose memory is measured from /proc.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

import shoal
from shoal.frontends.kusto.kql.lexer import MAX_KQL_TOKENS
from shoal.frontends.kusto.kql.parser import MAX_KQL_LETS, MAX_KQL_NESTING
from shoal.frontends.prometheus.promql.bounds import MAX_PROMQL_DEPTH, MAX_PROMQL_OPERATORS
from shoal.server import create_app
from shoal.types import LONG, STRING, Column
from tests.server.test_flight_sql import streamed
from tests.support.fixtures import SPARK_MASTER
from tests.support.procmem import PeakMeter
from tests.support.server import free_port, serve_app, start_server

SECRET = "the-secret-row"
PAYLOAD = "))) UNION ALL SELECT NULL, NULL, secret, n FROM secrets --"
# A needle that once ended the SQL literal early, in each form KQL writes it, then a
# comparison whose string held the rest of a statement.
ATTACKS = [f't | where false and s {op} {needle} or s == "{PAYLOAD}"'
           for op, needle in [("contains", '"\\\\"'), ("startswith", '@"\\"'),
                              ("endswith", "'\\\\'"), ("has", '"\\\\"'),
                              ("hasprefix", '@"a\\"'), ("contains_cs", '"\\\\"'),
                              ("matches regex", '"\\\\\\\\"')]]
GROWTH_BOUND = 64 << 20         # what 20 refused deep queries may cost the server in all

pytestmark = pytest.mark.services   # a shoal serve process and Spark


def _fill(db) -> None:
    db.create_table("t", [Column("s", STRING), Column("n", LONG)])
    db.ingest_ndjson("t", b'{"s": "a\\\\", "n": 1}\n{"s": "plain", "n": 2}')
    db.create_table("secrets", [Column("secret", STRING), Column("n", LONG)])
    db.ingest_ndjson("secrets", json.dumps({"secret": SECRET, "n": 42}).encode())


@pytest.fixture(scope="module")
def live(tmp_path_factory, spark) -> Iterator[tuple[str, str]]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("kql-injection")),
                       spark_master=SPARK_MASTER)
    try:
        _fill(db)
        app = create_app(db, config=db.config, flight_port=free_port())
        with serve_app(app) as url:
            yield url, f"grpc://127.0.0.1:{app.state.flight.bound_port}"
    finally:
        db.close()


@pytest.mark.parametrize("kql", ATTACKS)
def test_a_kql_string_cannot_end_its_sql_literal(live, kql):
    url, flight_uri = live
    with httpx.Client(base_url=url, timeout=120) as http:
        r = http.post("/v1/query", json={"kql": kql})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [] and SECRET not in r.text
        k = http.post("/v2/rest/query", json={"db": "shoal", "csl": kql})
        assert k.status_code == 200, k.text
        assert SECRET not in k.text
    table, _stats = streamed(flight_uri, "kql: " + kql)
    assert table.num_rows == 0


def test_a_needle_with_a_backslash_finds_its_row(live):
    url, _ = live
    with httpx.Client(base_url=url, timeout=120) as http:
        for kql in ('t | where s endswith "\\\\" | project n', 't | where s == @"a\\" | project n',
                    "t | where s contains_cs '\\\\' | project n"):
            r = http.post("/v1/query", json={"kql": kql})
            assert r.status_code == 200, r.text
            assert r.json()["rows"] == [[1]], kql


# ---- bounds: a positioned 400 in bounded memory ------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("parser-bounds") / "data"
    db = shoal.connect(data_dir=str(data))
    _fill(db)
    db.close()
    with start_server(data, extra_args=["--lazy-spark"],
                      env={"SHOAL_QUERY_ENGINE": "local"}) as handle:
        yield handle


def _promql(http: httpx.Client, expr: str) -> httpx.Response:
    return http.get("/api/v1/query", params={"query": expr, "time": "1700000000"})


def _kql(http: httpx.Client, kql: str) -> httpx.Response:
    return http.post("/v1/query", json={"kql": kql})


DEEP_PROMQL = "(" * 5000 + "up" + ")" * 5000
LONG_PROMQL = "+".join(["up"] * 3000)
MANY_LETS = "\n".join(f"let a{i} = {i};" for i in range(2000)) + "\nt | take 1"
DEEP_KQL = "t | where " + "(" * 3000 + "n" + ")" * 3000 + " > 0"


def _refused_promql(r: httpx.Response, where: str, what: str) -> None:
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["status"] == "error" and doc["errorType"] == "bad_data"
    assert doc["error"].startswith(f'invalid parameter "query": {where}: parse error: ')
    assert what in doc["error"]


def _refused_kql(r: httpx.Response, line: int, column: int, what: str) -> None:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "kql_syntax" and what in err["message"]
    assert (err["details"][0]["line"], err["details"][0]["column"]) == (line, column)


def test_deep_and_long_queries_are_positioned_400s_in_bounded_memory(server):
    with httpx.Client(base_url=server.url, timeout=120) as http:
        # warm the routes up (the PromQL engine, the KQL modules) before measuring
        assert _promql(http, "vector(1)").status_code == 200
        assert _kql(http, "t | count").status_code == 200
        meter = PeakMeter(server.proc.pid).start()
        for _ in range(5):
            _refused_promql(_promql(http, DEEP_PROMQL), f"1:{MAX_PROMQL_DEPTH + 1}",
                            f"nested more than {MAX_PROMQL_DEPTH} levels")
            _refused_promql(_promql(http, LONG_PROMQL), f"1:{MAX_PROMQL_OPERATORS * 3 + 3}",
                            f"more than {MAX_PROMQL_OPERATORS} operators")
            _refused_kql(_kql(http, MANY_LETS), MAX_KQL_LETS + 1, 1,
                         f"at most {MAX_KQL_LETS} let statements")
            _refused_kql(_kql(http, DEEP_KQL), 1, 11 + MAX_KQL_NESTING,
                         f"nested at most {MAX_KQL_NESTING} deep")
        growth = meter.growth_bytes()
        assert growth < GROWTH_BOUND, f"the server grew by {growth >> 20} MiB"
        # and it still answers, also an expression at the bounds (no RecursionError there)
        ok = _promql(http, "vector(1) + 1")
        assert ok.status_code == 200 and ok.json()["data"]["result"][0]["value"][1] == "2"
        chain = "+".join(["vector(1)"] * (MAX_PROMQL_OPERATORS + 1))
        edge = _promql(http, "abs(" * (MAX_PROMQL_DEPTH - 1) + chain + ")" * (MAX_PROMQL_DEPTH - 1))
        assert edge.status_code == 200, edge.text
        assert edge.json()["data"]["result"][0]["value"][1] == str(MAX_PROMQL_OPERATORS + 1)
        assert _kql(http, "t | count").json()["rows"] == [[2]]


def test_a_kql_query_of_too_many_tokens_is_refused_in_bounded_memory(server):
    # 300,000 tokens in 600 KB (under the 1 MiB body cap): refused at the first token over,
    # after reading 100,000 of them
    kql = "t | where n in (" + ",".join(["1"] * 150_000) + ")"
    with httpx.Client(base_url=server.url, timeout=120) as http:
        assert _kql(http, "t | count").status_code == 200
        meter = PeakMeter(server.proc.pid).start()
        for _ in range(3):
            _refused_kql(_kql(http, kql), 1, MAX_KQL_TOKENS + 11,
                         f"at most {MAX_KQL_TOKENS} tokens")
        growth = meter.growth_bytes()
        assert growth < 2 * GROWTH_BOUND, f"the server grew by {growth >> 20} MiB"
        assert _kql(http, "t | count").json()["rows"] == [[2]]


def test_series_matchers_have_the_same_bounds(server):
    with httpx.Client(base_url=server.url, timeout=120) as http:
        r = http.get("/api/v1/series", params={"match[]": LONG_PROMQL})
        assert r.status_code == 400, r.text
        assert f"more than {MAX_PROMQL_OPERATORS} operators" in r.json()["error"]
