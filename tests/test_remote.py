"""`shoal.connect(url=...)`: Python as a client of a live server (uvicorn on a real socket,
tokens on). Its answers are the embedded client's (same Arrow types, same stats); a refusal
keeps the server's status and code in an error of the matching branch."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest

import shoal
from shoal.client import Shoal
from shoal.errors import (ConflictError, NotAllowedError, NotFoundError, PayloadError,
                          QueryError, RequestError, ServerUnreachableError, UnavailableError)
from shoal.remote import RemoteShoal
from shoal.server import create_app
from tests.support.server import serve_app

ADMIN, INGEST, QUERY = "admin-tok-a", "ingest-tok-i", "query-tok-q"
EVERY = "every-tok-e"     # all three scopes, as one user's token would have
ROWS = (b'{"_timestamp": "2026-03-01T00:00:00.123456Z", "service": "api", "n": 1, '
        b'"attrs": {"k": [1, 2]}, "ok": true, "ratio": 0.5}\n'
        b'{"_timestamp": "2026-03-01T00:00:01Z", "service": "web", "n": 2, "attrs": null, '
        b'"ok": false, "ratio": 1.5}\n')


@dataclass
class Live:
    url: str
    db: Shoal


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Live]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("remote-py")),
                       tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query;"
                              f"{EVERY}=admin,ingest,query")
    db.create_table("ev", [shoal.Column("service", shoal.STRING),
                           shoal.Column("n", shoal.LONG), shoal.Column("attrs", shoal.DYNAMIC),
                           shoal.Column("ok", shoal.BOOL), shoal.Column("ratio", shoal.REAL)])
    db.ingest_ndjson("ev", ROWS)
    try:
        with serve_app(create_app(db, config=db.config)) as url:
            yield Live(url, db)
    finally:
        db.close()


@pytest.fixture
def client(live: Live) -> Iterator[RemoteShoal]:
    with shoal.connect(url=live.url, token=QUERY) as c:
        yield c


@pytest.mark.parametrize("statement", [
    "SELECT * FROM ev ORDER BY n",
    "SELECT service, count(*) AS c, sum(n) AS s, max(_timestamp) AS t FROM ev "
    "GROUP BY service ORDER BY service",
    "SELECT attrs, ok, ratio FROM ev WHERE service = 'api'",
    "DESCRIBE ev",
    "SHOW TABLES",
])
def test_sql_answers_as_the_embedded_client(live, client, statement):
    here = live.db.sql(statement)
    there = client.sql(statement)
    assert there.table.schema == here.table.schema
    assert there.table.equals(here.table)
    assert there.kind == here.kind
    # bytes_read aside: the second run of a statement finds the footers in the engine's cache
    skip = ("engine_reason", "truncated", "bytes_read")
    ours = {k: v for k, v in here.stats.to_json().items() if k not in skip}
    theirs = {k: v for k, v in there.stats.to_json().items() if k not in skip}
    for doc in (ours, theirs):
        doc["scans"] = [{k: v for k, v in s.items() if k != "bytes_read"}
                        for s in doc["scans"]]
    assert theirs == ours
    assert there.stats.to_json()["truncated"] is False
    assert client.query(statement).equals(here.table)


def test_kql_answers_with_its_sql_and_render_hint(live, client):
    q = "ev | summarize c = count() by service | order by service asc | render columnchart"
    here, there = live.db.kql(q), client.kql(q)
    assert there.table.equals(here.table)
    assert there.translated_sql == here.translated_sql and there.translated_sql
    assert there.render == here.render == {"visualization": "columnchart"}


def test_tables_describe_and_promql_as_embedded(live, client):
    assert client.describe("ev") == live.db.describe("ev")
    assert client.tables() == live.db.tables()
    at = 1_700_000_000
    assert client.promql("vector(3) * 2", time=at).data() == \
        live.db.promql("vector(3) * 2", time=at).data()
    ranged = dict(start=at, end=at + 60, step=30)
    assert client.promql("vector(1)", **ranged).data() == \
        live.db.promql("vector(1)", **ranged).data()


def test_ingest_and_create_with_their_tokens(live):
    with shoal.connect(url=live.url, token=ADMIN) as admin:
        doc = admin.create_table("pt", [shoal.Column("a", shoal.INT),
                                        {"name": "b", "type": "string"}], retention="7d")
        assert doc["name"] == "pt" and doc["retention"] == "7d"
        with pytest.raises(ConflictError) as exists:
            admin.create_table("pt", [shoal.Column("a", shoal.INT)])
        assert exists.value.status == 409 and exists.value.code == "table_exists"
    with shoal.connect(url=live.url, token=INGEST) as writer:
        ack = writer.ingest_ndjson("pt", b'{"a": 1, "b": "x"}\n{"a": 2}\n',
                                   idempotency_key="pt-1")
        assert (ack.table, ack.rows, ack.replayed) == ("pt", 2, False)
        again = writer.ingest_ndjson("pt", b'{"a": 1, "b": "x"}\n{"a": 2}\n',
                                     idempotency_key="pt-1")
        assert again.replayed and again.snapshot_id == ack.snapshot_id
        assert ack.warnings == []
        # epoch seconds in `_timestamp` are read as nanoseconds: the ack says so
        early = writer.ingest_ndjson("pt", b'{"_timestamp": 1795929000, "a": 5}\n')
        [warning] = early.warnings
        assert warning.column == "_timestamp" and "timestamp_unit='s'" in warning.message
        with pytest.raises(PayloadError) as bad:
            writer.ingest_ndjson("pt", b'{"a": 3}\n{"a": "three"}\n')
        assert bad.value.status == 400 and bad.value.code == "bad_payload"
        assert [(e.line, e.field) for e in bad.value.errors] == [(2, "a")]
        assert str(bad.value).startswith('line 2: field "a"')
    assert live.db.query("SELECT count(*) AS c FROM pt").column("c").to_pylist() == [3]


@pytest.mark.parametrize(("token", "call", "scope"), [
    (QUERY, lambda c: c.sql("CREATE TABLE nope (a int)"), "admin"),
    (QUERY, lambda c: c.create_table("nope", [shoal.Column("a", shoal.INT)]), "admin"),
    (QUERY, lambda c: c.ingest_ndjson("ev", b'{"n": 1}\n'), "ingest"),
    (INGEST, lambda c: c.sql("SELECT 1 AS one"), "query"),
    (INGEST, lambda c: c.tables(), "query"),
])
def test_a_scope_refusal_is_a_403_not_allowed_error(live, token, call, scope):
    with shoal.connect(url=live.url, token=token) as c, pytest.raises(NotAllowedError) as e:
        call(c)
    assert (e.value.status, e.value.code) == (403, "forbidden")
    assert str(e.value) == f'this token lacks the "{scope}" scope'
    assert "nope" not in {t["name"] for t in live.db.tables()}


def test_errors_keep_status_code_and_branch(live, client):
    with pytest.raises(NotFoundError) as gone:
        client.sql("SELECT * FROM missing")
    assert (gone.value.status, gone.value.code) == (404, "table_not_found")
    assert str(gone.value) == 'table "missing" does not exist'
    with pytest.raises(NotFoundError):
        client.describe("missing")
    with pytest.raises(RequestError) as syntax:
        client.sql("SELEC 1")
    assert syntax.value.status == 400 and not isinstance(syntax.value, QueryError)
    assert syntax.value.code == "sql_syntax"
    assert syntax.value.details[0]["field"] == "sql"
    with pytest.raises(RequestError) as prom:
        client.promql("up{")
    assert prom.value.status == 400 and "parse error" in str(prom.value)
    with shoal.connect(url=live.url) as anonymous, pytest.raises(RequestError) as auth:
        anonymous.tables()
    assert (auth.value.status, auth.value.code) == (401, "unauthorized")


def test_a_server_that_does_not_answer(tmp_path):
    with socket.socket() as s:      # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with shoal.connect(url=f"http://127.0.0.1:{port}") as c, \
            pytest.raises(ServerUnreachableError) as e:
        c.sql("SELECT 1")
    assert isinstance(e.value, UnavailableError)
    assert str(e.value) == (f"cannot reach the shoal server at http://127.0.0.1:{port}: "
                            "Connection refused")


def test_the_token_comes_from_the_configuration(live, monkeypatch):
    monkeypatch.setenv("SHOAL_TOKEN", QUERY)
    with shoal.connect(url=live.url) as c:
        assert c.query("SELECT count(*) AS c FROM ev").to_pylist() == [{"c": 2}]
    with pytest.raises(ValueError, match="url"):
        shoal.connect(url="ftp://x")


def test_one_client_serves_threads(live, client):
    """Requests from several threads at once each get a connection of their own."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:     # within one client's share of query slots
        tables = list(pool.map(lambda i: client.query(f"SELECT {i} AS i, n FROM ev"),
                               range(12)))
    assert [t.column("i")[0].as_py() for t in tables] == list(range(12))
    assert all(isinstance(t, pa.Table) and t.num_rows == 2 for t in tables)


def test_the_readme_python_quick_start_through_a_server(live, tmp_path):
    """The README's Python lines, once on a data directory and once with `url=`."""
    answers = []
    for db in (shoal.connect(data_dir=str(tmp_path / "d")),
               shoal.connect(url=live.url, token=EVERY)):
        try:
            db.sql("CREATE TABLE qs (service string, status int)")
            db.ingest_ndjson("qs", b'{"service": "api", "status": 200}\n',
                             idempotency_key="k1")
            result = db.sql("SELECT service, count(*) AS n FROM qs GROUP BY service")
            answers.append((result.table, result.stats.to_json()))
        finally:
            db.close()
    (here, here_stats), (there, there_stats) = answers
    assert there.equals(here) and there.to_pylist() == [{"service": "api", "n": 1}]
    assert there_stats["extents_read"] == here_stats["extents_read"] == 1
