"""`/openapi.json` lists every route of the app, and each declares the errors it can give.

The rules follow from what the route's code does: a route with a scope refuses a missing
token (401) and a token without the scope (403); every route can be refused for its Host or
Origin (403); a route of the API (`/v1/...`) declares 400; one with a body declares
408/413/415; one on `{table}` declares 404; ingest, query, OTLP and Prometheus remote write
declare 429 and 503 (backpressure, too many queries, not ready); 429 and 503 carry
`Retry-After`, 401 `WWW-Authenticate`; no route declares 500 (a bug) or FastAPI's 422 (the
server says 400).
Scopes are checked against the live server: without a token, exactly the routes the
document says need one answer 401.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

import shoal
from shoal.server import create_app
from tests.server.conftest import ADMIN, INGEST, QUERY
from tests.support.server import serve_app

METHODS = ("get", "post", "put", "patch", "delete")
Key = tuple[str, str]


@dataclass
class Served:
    app: FastAPI
    url: str
    doc: dict[str, Any]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("openapi")),
                       tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            r = httpx.get(f"{url}/openapi.json")
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            yield Served(app, url, r.json())
    finally:
        db.close()


def _operations(doc: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    return {(m.upper(), p): op for p, ops in doc["paths"].items()
            for m, op in ops.items() if m in METHODS}


def _declared(op: dict[str, Any]) -> set[int]:
    return {int(s) for s in op["responses"]}


def test_the_document_is_valid_openapi_and_lists_every_route(served):
    schemathesis.openapi.from_dict(served.doc).validate()     # OpenAPI 3.1's own schema
    routes = set(_operations(get_openapi(title="t", version="0", routes=served.app.routes)))
    documented = _operations(served.doc)
    assert routes | {("GET", "/openapi.json")} == set(documented)
    assert len(routes) == 43     # 22 of them the Prometheus API, 2 the Sentry SDK endpoints;
                                 # the console at `/` is a page
    assert [k for k, op in documented.items() if op.get("x-shoal-undocumented")] == []


def test_every_route_declares_the_errors_its_code_can_give(served):
    for (method, path), op in _operations(served.doc).items():
        declared = _declared(op)
        where = f"{method} {path}: {sorted(declared)}"
        assert 403 in declared, where                   # Host / Origin refusals
        assert 500 not in declared, where
        # 422 is Prometheus's `execution` error, on its query routes only
        if 422 in declared:
            assert path in ("/api/v1/query", "/api/v1/query_range"), where
        if op.get("x-shoal-scope"):
            assert {401, 403} <= declared, where
        if path.startswith("/v1/"):
            assert 400 in declared, where
        if "requestBody" in op:
            assert {408, 413, 415} <= declared, where
        if "{table}" in path:
            assert 404 in declared, where
        if path in ("/v1/query", "/v1/ingest/{table}", "/v1/logs", "/v1/traces",
                    "/v1/metrics", "/api/v1/write"):
            assert {429, 503} <= declared, where
    ops = _operations(served.doc)
    assert 503 in _declared(ops[("GET", "/readyz")])
    assert 404 in _declared(ops[("GET", "/v1/maintenance")])    # ?table=unknown


def _response(doc: dict[str, Any], ref_or_response: dict[str, Any]) -> dict[str, Any]:
    ref = ref_or_response.get("$ref")
    if ref is None:
        return ref_or_response
    return doc["components"]["responses"][ref.rsplit("/", 1)[1]]


def test_error_answers_carry_the_error_document_and_their_headers(served):
    doc = served.doc
    for (method, path), op in _operations(doc).items():
        for status, ref in op["responses"].items():
            if int(status) < 400:
                continue
            response = _response(doc, ref)
            headers = response.get("headers", {})
            content = response["content"]["application/json"]["schema"]
            assert "#/components/schemas/Error" in str(content), (method, path, status)
            if path == "/api/v1/write":         # remote write: one line of plain text
                assert "text/plain" in response["content"], (method, path, status)
            elif path.startswith("/api/v1/") and status not in ("401", "403"):
                assert "#/components/schemas/PromError" in str(content), (method, path)
            if status in ("429", "503"):
                assert "Retry-After" in headers, (method, path, status)
            if status == "401":
                assert "WWW-Authenticate" in headers, (method, path, status)


def test_scopes_in_the_document_are_the_ones_the_server_enforces(served):
    """Without a token exactly the routes with `x-shoal-scope` answer 401; with a token of
    another scope they answer 403."""
    wrong = {"ingest": QUERY, "query": INGEST, "admin": QUERY, "metrics": INGEST}
    for (method, path), op in _operations(served.doc).items():
        url = served.url + path.replace("{table}", "no_such_table")
        # JSON routes refuse other content types before anything else (shoal.server.edge)
        json_body = "application/json" in str(op.get("requestBody", {}).get("content", {}))
        headers = {"Content-Type": "application/json"} if json_body else {}
        r = httpx.request(method, url, headers=headers, timeout=30)
        scope = op.get("x-shoal-scope")
        assert (r.status_code == 401) == bool(scope), (method, path, r.status_code, r.text)
        if scope:
            r = httpx.request(method, url, timeout=30,
                              headers={**headers, "Authorization": f"Bearer {wrong[scope]}"})
            assert r.status_code == 403, (method, path, r.status_code, r.text)
