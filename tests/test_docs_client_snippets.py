"""The client code the docs give for the default ports runs against a live `shoal serve`.

Every Python block of docs/kql.md, docs/http-api.md and docs/flight-sql.md that connects to
a default port (the Kusto SDK on 8720, ADBC on 8815) is run as written against a real
server holding a small `logs` table; the only change to its text is the port numbers, which
become the test server's (free ports, so the test neither needs nor takes 8720 and 8815).
Each block must run, and what it prints or fetches must be the table's answer.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerHandle, free_port, start_server

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("kql.md", "http-api.md", "flight-sql.md")
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
DEFAULTS = ("127.0.0.1:8720", "127.0.0.1:8815")
ROWS = [{"service": "api", "level": "error", "message": "deadlock detected"},
        {"service": "api", "level": "info", "message": "ok"},
        {"service": "web", "level": "error", "message": "timeout"}]


def snippets() -> list[tuple[str, str]]:
    """(page, code) of every Python block of PAGES that connects to a default port."""
    out = []
    for page in PAGES:
        for code in BLOCK.findall((ROOT / "docs" / page).read_text()):
            if any(d in code for d in DEFAULTS):
                out.append((page, code))
    return out


def test_each_client_page_has_its_snippet():
    pages = [page for page, _ in snippets()]
    assert sorted(set(pages)) == sorted(PAGES), pages


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[ServerHandle, int]]:
    flight = free_port()
    srv = start_server(tmp_path_factory.mktemp("snippets"), extra_args=["--lazy-spark"],
                       env={"SHOAL_FLIGHT_PORT": str(flight), "SHOAL_QUERY_ENGINE": "local"})
    try:
        r = httpx.post(f"{srv.url}/v1/tables", timeout=30, json={
            "name": "logs", "columns": [{"name": c, "type": "string"}
                                        for c in ("service", "level", "message")]})
        assert r.status_code == 201, r.text
        body = "".join(f'{{"service": "{r["service"]}", "level": "{r["level"]}", '
                       f'"message": "{r["message"]}"}}\n' for r in ROWS)
        r = httpx.post(f"{srv.url}/v1/ingest/logs", content=body.encode(), timeout=30)
        assert r.status_code == 200, r.text
        yield srv, flight
    finally:
        srv.stop()


def _run(code: str, srv: ServerHandle, flight: int) -> tuple[dict[str, object], str]:
    http = srv.url.removeprefix("http://")
    code = code.replace(DEFAULTS[0], http).replace(DEFAULTS[1], f"127.0.0.1:{flight}")
    namespace: dict[str, object] = {"__name__": "__snippet__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "<snippet>", "exec"), namespace)
    # what a user would see on their terminal: ADBC's "Cannot disable autocommit" and the like
    assert [str(w.message) for w in caught] == []
    return namespace, out.getvalue()


@pytest.mark.parametrize("page,code", snippets(), ids=[p for p, _ in snippets()])
def test_the_snippet_runs_against_the_default_ports(server, page, code):
    srv, flight = server
    namespace, printed = _run(code, srv, flight)
    if page == "kql.md":
        assert printed.splitlines()[0] == "['shoal']"
        assert sorted(printed.splitlines()[1:]) == ["error 2", "info 1"]
    elif page == "http-api.md":
        assert printed.strip() == "3"
    else:
        rows = namespace["table"].to_pylist()          # errors per service
        assert sorted(rows, key=lambda r: r["service"]) == [{"service": "api", "n": 1},
                                                             {"service": "web", "n": 1}]
