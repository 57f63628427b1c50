"""docs/http-api.md lists every route the server has: its route table is exactly what
`python -m shoal.server.routes_doc --markdown` builds from the OpenAPI document, and the
page covers what the document cannot (the Kusto routes' clients, the gRPC listeners)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from shoal.server.routes_doc import DOCS_BEGIN, DOCS_END, current_document, markdown_table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "http-api.md"


def _generated_part(text: str) -> str:
    start, end = text.index(DOCS_BEGIN), text.index(DOCS_END)
    return text[start:end + len(DOCS_END) + 1]


def test_the_page_holds_exactly_the_generated_route_table():
    doc = current_document()
    assert _generated_part(PAGE.read_text()) == markdown_table(doc), (
        "docs/http-api.md is out of date: run "
        "`python -m shoal.server.routes_doc --update docs/http-api.md`")
    rows = re.findall(r"^\| `(\w+) (\S+)` \|", markdown_table(doc), re.M)
    assert {(m.lower(), p) for m, p in rows} == {
        (m, p) for p, ops in doc["paths"].items() for m in ops}
    assert len(rows) == len(set(rows))


def test_the_generator_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "shoal.server.routes_doc", "--markdown"],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == _generated_part(PAGE.read_text())
    bad = subprocess.run([sys.executable, "-m", "shoal.server.routes_doc"],
                         capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "usage:" in bad.stdout


def test_the_page_covers_the_kusto_routes_and_the_grpc_listeners():
    text = PAGE.read_text()
    table = _generated_part(text)
    for route in ("POST /v2/rest/query", "POST /v1/rest/mgmt", "POST /v1/query",
                  "POST /v1/ingest/{table}", "GET /readyz"):
        assert f"`{route}`" in table, route
    grpc = text[text.index("## Not HTTP"):]
    assert "| 8815 | Arrow Flight SQL" in grpc and "| 4317 | OTLP/gRPC" in grpc
    assert 'with_no_authentication("http://127.0.0.1:8720")' in text
