"""What the web console needs from the server, over real sockets: the console's files at
`/` and `/console/...` (with a Content-Security-Policy, open without a token), the table
history routes (`/v1/tables/{t}/snapshots`, `/schemas`, `/storage`), query errors with
their line and column, and ingest rows counted by path.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime

from shoal.server.webconsole import CONSOLE_DIR
from tests.server.conftest import ADMIN, INGEST, QUERY, create


def test_console_page_and_modules_are_served_with_a_csp(http):
    r = http.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/app.js">' in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    # every file the page names is served, as its type
    for ref in re.findall(r'(?:src|href)="(/console/[^"]+)"', r.text):
        asset = http.get(ref)
        assert asset.status_code == 200, ref
        assert asset.headers["content-security-policy"] == csp
        kind = "javascript" if ref.endswith(".js") else "css"
        assert kind in asset.headers["content-type"], (ref, asset.headers["content-type"])
    # and every module a module imports
    for module in sorted(CONSOLE_DIR.glob("*.js")):
        for name in re.findall(r'from "\./([a-z]+\.js)"', module.read_text()):
            assert http.get(f"/console/{name}").status_code == 200, (module.name, name)
    assert http.get("/console/nope.js").status_code == 404
    assert http.get("/console/../webconsole.py").status_code == 404


def test_console_files_need_no_token_but_data_does(auth_server):
    with auth_server.client() as anonymous:
        assert anonymous.get("/").status_code == 200
        assert anonymous.get("/console/app.js").status_code == 200
        assert anonymous.get("/v1/tables").status_code == 401
    with auth_server.client(ADMIN) as admin:
        create(admin, "console_secured", [{"name": "a", "type": "int"}])
    for route in ("snapshots", "schemas", "storage"):
        with auth_server.client() as anonymous:
            assert anonymous.get(f"/v1/tables/console_secured/{route}").status_code == 401
        with auth_server.client(INGEST) as ingest_only:
            assert ingest_only.get(f"/v1/tables/console_secured/{route}").status_code == 403
        with auth_server.client(QUERY) as reader:
            assert reader.get(f"/v1/tables/console_secured/{route}").status_code == 200


def test_snapshots_schemas_and_storage_of_a_table(http, table_name, open_server):
    create(http, table_name, [{"name": "service", "type": "string"},
                              {"name": "n", "type": "int", "default": 0}])
    rows = "\n".join(json.dumps({"_timestamp": f"2026-11-26T10:0{i}:00Z", "service": "api",
                                 "n": i}) for i in range(3))
    assert http.post(f"/v1/ingest/{table_name}", content=rows).status_code == 200
    assert http.post(f"/v1/tables/{table_name}/columns",
                     json={"columns": [{"name": "n", "type": "long"}]}).status_code == 200
    wider = json.dumps({"_timestamp": "2026-11-26T11:00:00Z", "service": "web",
                        "n": 1 << 40, "region": "eu"})     # evolves: `region` appears
    assert http.post(f"/v1/ingest/{table_name}", content=wider).status_code == 200

    snaps = http.get(f"/v1/tables/{table_name}/snapshots").json()
    catalog = open_server.db.catalog.snapshots(table_name)
    assert snaps["table"] == table_name and snaps["total"] == len(catalog)
    assert [s["snapshot_id"] for s in snaps["snapshots"]] == \
        sorted((s.snapshot_id for s in catalog), reverse=True)
    assert snaps["snapshots"][-1]["operation"] == "create"
    appends = [s for s in snaps["snapshots"] if s["operation"] == "append"]
    assert sorted(s["summary"]["added_rows"] for s in appends) == [1, 3]
    assert all(isinstance(s["created_at"], float) for s in snaps["snapshots"])
    one = http.get(f"/v1/tables/{table_name}/snapshots", params={"limit": 1}).json()
    assert one["snapshots"] == snaps["snapshots"][:1] and one["total"] == snaps["total"]
    assert http.get(f"/v1/tables/{table_name}/snapshots",
                    params={"limit": 0}).status_code == 400

    versions = http.get(f"/v1/tables/{table_name}/schemas").json()["versions"]
    assert versions[0]["version"] == 1 and versions[0]["added"] == [
        "_timestamp", "props", "service", "n"]
    assert {"name": "n", "type": "int", "nullable": True, "header": None,
            "default": 0} in versions[0]["columns"]
    assert [v["version"] for v in versions] == [1, 2, 3]
    assert (versions[1]["added"], versions[1]["widened"]) == ([], ["n"])   # int -> long
    assert (versions[2]["added"], versions[2]["widened"]) == (["region"], [])
    assert versions[2]["version"] == \
        http.get(f"/v1/tables/{table_name}").json()["schema_version"]

    storage = http.get(f"/v1/tables/{table_name}/storage").json()
    entries = open_server.db.catalog.manifests(table_name)
    assert storage == {
        "table": table_name, "snapshot_id": snaps["snapshots"][0]["snapshot_id"], "rows": 4,
        "extents": len(entries), "blocks": sum(e.block_count for e in entries),
        "bytes": sum(e.byte_size for e in entries),
        "min_ts": _ns(datetime(2026, 11, 26, 10, 0, tzinfo=UTC)),
        "max_ts": _ns(datetime(2026, 11, 26, 11, 0, tzinfo=UTC))}


def _ns(t: datetime) -> int:
    return int(t.timestamp()) * 10**9


def test_history_of_an_unknown_table_is_404(http):
    for route in ("snapshots", "schemas", "storage"):
        r = http.get(f"/v1/tables/no_such_table/{route}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "table_not_found"


def test_sql_syntax_errors_carry_line_and_column(http):
    r = http.post("/v1/query", json={"sql": "SELECT a,\nFROM t WHERE ("})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "sql_syntax"
    assert err["details"] == [{"line": 2, "column": 14, "field": "sql",
                               "message": err["message"]}]
    r = http.post("/v1/query", json={"sql": "\n  DROP VIEW t"})
    assert r.json()["error"]["details"][0] | {"message": ""} == {
        "line": 2, "column": 3, "field": "sql", "message": ""}
    r = http.post("/v1/query", json={"kql": "t\n| where a = 1"})
    assert r.json()["error"]["details"][0] | {"message": ""} == {
        "line": 2, "column": 11, "field": "kql", "message": ""}


def test_ingest_rows_are_counted_by_path(http, table_name):
    create(http, table_name, [{"name": "a", "type": "int"}])
    assert http.post(f"/v1/ingest/{table_name}", content=b'{"a": 1}\n{"a": 2}').status_code == 200
    records = ",".join('{"body": {"stringValue": "line %d"}}' % i for i in range(3))
    otlp = '{"resourceLogs": [{"scopeLogs": [{"logRecords": [%s]}]}]}' % records
    assert http.post("/v1/logs", content=otlp,
                     headers={"Content-Type": "application/json"}).status_code == 200
    lines = http.get("/metrics").text.splitlines()
    assert f'shoal_ingest_path_rows_total{{path="rest",table="{table_name}"}} 2.0' in lines
    assert 'shoal_ingest_path_rows_total{path="otlp",table="otel_logs"} 3.0' in lines


def test_vendored_files_are_the_pinned_release():
    uplot = CONSOLE_DIR / "vendor" / "uplot"
    recorded = dict(re.findall(r"\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|",
                               (uplot / "SOURCE.md").read_text()))
    assert set(recorded) == {"uPlot.iife.min.js", "uPlot.min.css", "LICENSE"}
    for name, digest in recorded.items():
        assert hashlib.sha256((uplot / name).read_bytes()).hexdigest() == digest, name
    assert (uplot / "uPlot.iife.min.js").read_text().startswith(
        "/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
