"""Bearer tokens with scopes over HTTP; refused requests write nothing."""

from __future__ import annotations

import json

import pytest

from shoal.errors import ConfigError
from shoal.http.auth import (check_bind, is_loopback, parse_token_file, parse_token_spec,
                               token_table)
from tests.server.conftest import ADMIN, INGEST, QUERY

BODY = b'{"n": 1}\n{"n": 2}\n'


@pytest.fixture(scope="module")
def table(auth_server) -> str:
    with auth_server.client(ADMIN) as c:
        r = c.post("/v1/tables", json={"name": "secured", "columns": [{"name": "n",
                                                                        "type": "long"}]})
        assert r.status_code == 201, r.text
    return "secured"


def rows(auth_server, table) -> int:
    with auth_server.client(ADMIN) as c:
        return c.get(f"/v1/tables/{table}").json()["row_count"]


def test_missing_token_is_401_with_challenge(auth_server, table):
    with auth_server.client() as c:
        for method, path, kw in (("POST", f"/v1/ingest/{table}", {"content": BODY}),
                                 ("GET", "/v1/tables", {}),
                                 ("GET", f"/v1/tables/{table}", {}),
                                 ("POST", "/v1/tables", {"json": {"name": "x", "columns": []}}),
                                 ("POST", f"/v1/tables/{table}/columns",
                                  {"json": {"columns": [{"name": "m", "type": "int"}]}})):
            r = c.request(method, path, **kw)
            assert r.status_code == 401, (method, path, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["code"] == "unauthorized"
    assert rows(auth_server, table) == 0


def test_wrong_token_and_wrong_scheme_are_401(auth_server, table):
    for headers in ({"Authorization": "Bearer not-a-token"},
                    {"Authorization": f"Basic {INGEST}"},
                    {"Authorization": f"Bearer {INGEST}x"},
                    {"Authorization": "Bearer"}):
        with auth_server.client(headers=headers) as c:
            r = c.post(f"/v1/ingest/{table}", content=BODY)
        assert r.status_code == 401, headers
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert INGEST not in r.text
    with auth_server.client("not-a-token") as c:
        r = c.post(f"/v1/ingest/{table}", content=BODY)
    assert 'error="invalid_token"' in r.headers["www-authenticate"]
    assert rows(auth_server, table) == 0


def test_insufficient_scope_is_403(auth_server, table):
    with auth_server.client(QUERY) as c:
        r = c.post(f"/v1/ingest/{table}", content=BODY)
        assert r.status_code == 403
        assert r.json() == {"error": {"code": "forbidden",
                                      "message": 'this token lacks the "ingest" scope',
                                      "details": []}}
        assert c.get(f"/v1/tables/{table}").status_code == 200
        assert c.post("/v1/tables", json={"name": "q_made", "columns": []}).status_code == 403
    with auth_server.client(INGEST) as c:
        assert c.get("/v1/tables").status_code == 403
        r = c.post(f"/v1/tables/{table}/columns",
                   json={"columns": [{"name": "m", "type": "int"}]})
        assert r.status_code == 403
    assert rows(auth_server, table) == 0
    with auth_server.client(ADMIN) as c:
        doc = c.get(f"/v1/tables/{table}").json()
        assert [col["name"] for col in doc["columns"]] == ["_timestamp", "props", "n"]
        assert c.get("/v1/tables/q_made").status_code == 404


def test_auth_is_checked_before_the_body(auth_server, table):
    """An unauthenticated caller gets 401, not a body error: bad JSON, huge Content-Length."""
    with auth_server.client() as c:
        r = c.post("/v1/tables", content=b"{not json",
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 401
        r = c.post(f"/v1/ingest/{table}", content=b"x" * (1 << 20))
        assert r.status_code == 401


def test_scoped_tokens_work(auth_server, table):
    with auth_server.client(INGEST) as c:
        r = c.post(f"/v1/ingest/{table}", content=BODY)
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == 2
    with auth_server.client(ADMIN) as c:     # admin implies ingest
        r = c.post(f"/v1/ingest/{table}", content=BODY)
        assert r.status_code == 200, r.text
    assert rows(auth_server, table) == 4


def test_ops_endpoints_are_open(auth_server):
    with auth_server.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").status_code == 200


def test_metrics_need_the_metrics_or_query_scope(auth_server):
    """`/metrics` names tables and their volumes: with tokens it is a read like the others."""
    with auth_server.client() as c:
        r = c.get("/metrics")
        assert r.status_code == 401 and "shoal_" not in r.text
    with auth_server.client(INGEST) as c:
        r = c.get("/metrics")
        assert r.status_code == 403 and "shoal_" not in r.text
        assert r.json()["error"]["message"] == 'this token lacks the "metrics" or "query" scope'
    for token in (QUERY, ADMIN):
        with auth_server.client(token) as c:
            r = c.get("/metrics")
            assert r.status_code == 200 and "shoal_http_requests" in r.text


# -- token parsing and the loopback rule ------------------------------------------------------

def test_token_spec_and_file(tmp_path):
    assert parse_token_spec("a=ingest,query; b=ADMIN;") == [
        ("a", frozenset({"ingest", "query"})), ("b", frozenset({"admin"}))]
    f = tmp_path / "tokens"
    f.write_text("# ops tokens\n\nt1 ingest\nt2  query,admin   # the dashboard\n")
    assert parse_token_file(f) == [("t1", frozenset({"ingest"})),
                                   ("t2", frozenset({"query", "admin"}))]
    table = token_table([("t1", frozenset({"ingest"})), ("t1", frozenset({"query"}))])
    assert table.scopes_of("t1") == {"ingest", "query"}
    assert table.scopes_of("t") is None and table.scopes_of("t11") is None
    for bad in ("a=", "=ingest", "a=ingest,root", "justatoken"):
        with pytest.raises(ConfigError) as e:
            parse_token_spec(bad)
        assert "root" in str(e.value) or "scope" in str(e.value)
        assert "justatoken" not in str(e.value)
    f.write_text("t1\n")
    with pytest.raises(ConfigError, match="line 1"):
        parse_token_file(f)
    with pytest.raises(ConfigError, match="tokens file"):
        parse_token_file(tmp_path / "missing")


def test_loopback_rule():
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.com", "192.168.1.1", ""):
        assert not is_loopback(host), host
    check_bind("127.0.0.1", token_table([]))
    check_bind("0.0.0.0", token_table([("t", frozenset({"admin"}))]))
    with pytest.raises(ConfigError, match="refusing to bind to 0.0.0.0"):
        check_bind("0.0.0.0", token_table([]))


def test_metrics_never_show_tokens(auth_server):
    with auth_server.client(QUERY) as c:
        text = c.get("/metrics").text
    assert ADMIN not in text and INGEST not in text and QUERY not in text
    json.dumps(text)
