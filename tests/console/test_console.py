"""The web console in a real browser (Debian chromium via Playwright) against a live
`shoal serve` holding generated logs: queries and their grid, chart and stats; a table's
page; the log search; positioned errors; the live metrics page.

Each test waits on what the page shows (Playwright's auto-waiting `expect`), never on time.
The main pages are photographed (into docs/console/ for the README with SHOAL_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import collections
import csv
import io
import json
import time
from typing import Any

import httpx
import pyarrow as pa
import pytest
from playwright.sync_api import expect

from tests.console.conftest import REJECTS, SERVICES, Generated, ingest, screenshot, sql
from tests.support.server import ServerHandle

pytestmark = pytest.mark.usefixtures("logs")
expect.set_options(timeout=60_000)     # a hang guard only


def run(page: Any, url: str, language: str, text: str) -> None:
    page.goto(f"{url}/#/query")
    page.select_option("#language", language)
    page.fill("#editor", text)
    page.press("#editor", "Control+Enter")


def grid_rows(page: Any, scope: str = "#result") -> list[list[str]]:
    rows = page.locator(f"{scope} table.grid tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
            for i in range(rows.count())]


def test_sql_query_shows_its_rows_stats_and_downloads(page, server: ServerHandle,
                                                      logs: Generated, tmp_path) -> None:
    run(page, server.url, "sql",
        "SELECT service, count(*) AS n, max(region) AS region FROM logs "
        "GROUP BY service ORDER BY service")
    expect(page.locator("#query-status")).to_contain_text("3 rows")
    by_service = collections.Counter(r["service"] for r in logs.rows)
    regions = {s: max(r["region"] for r in logs.rows if r["service"] == s and "region" in r)
               for s in SERVICES}
    assert grid_rows(page) == [[s, str(by_service[s]), regions[s]] for s in sorted(SERVICES)]
    headers = page.locator("#result table.grid thead th").all_inner_texts()
    assert [h.split() for h in headers] == [["service", "string"], ["n", "bigint"],
                                            ["region", "string"]]
    # the pruning stats as a picture: one extent per batch, both read, and the engine
    stats = page.locator("figure.stats")
    expect(stats.locator("[data-level=extents] .stat-text")).to_have_text(
        "2 considered · 0 pruned · 2 read")
    expect(stats.locator(".engine")).to_have_text("engine: local")
    with page.expect_download() as dl:
        page.get_by_role("button", name="CSV").click()
    path = tmp_path / "result.csv"
    dl.value.save_as(path)
    assert list(csv.reader(io.StringIO(path.read_text()))) == [
        ["service", "n", "region"], *([s, str(by_service[s]), regions[s]]
                                      for s in sorted(SERVICES))]
    with page.expect_download() as dl:
        page.get_by_role("button", name="Arrow").click()
    arrow = pa.ipc.open_stream(dl.value.path().read_bytes()).read_all()
    assert arrow.to_pylist() == [{"service": s, "n": by_service[s], "region": regions[s]}
                                 for s in sorted(SERVICES)]


def test_nulls_and_dynamic_values_in_the_grid(page, server: ServerHandle) -> None:
    run(page, server.url, "sql",
        "SELECT region, attrs FROM logs WHERE message = 'GET /orders/1 ok'")
    expect(page.locator("#query-status")).to_contain_text("1 rows")
    cells = page.locator("#result table.grid tbody tr").first.locator("td")
    expect(cells.nth(0).locator(".null")).to_have_text("null")   # written before `region`
    assert json.loads(cells.nth(1).locator("pre.json").inner_text()) == {"http": {"status": 200}}


def test_long_results_are_paged(page, server: ServerHandle, logs: Generated) -> None:
    run(page, server.url, "sql", "SELECT latency_ms, message FROM logs ORDER BY _timestamp DESC")
    status = page.locator("#result .pager-status")
    expect(status).to_have_text(f"rows 1–100 of {len(logs.rows)}")
    expect(page.locator("#result table.grid tbody tr")).to_have_count(100)
    first = page.locator("#result table.grid tbody tr td:nth-child(2)").first
    expect(first).to_have_text("GET /orders/0 ok")
    page.get_by_role("button", name="Next ›").click()
    expect(status).to_have_text(f"rows 101–200 of {len(logs.rows)}")
    expect(first).to_have_text("GET /orders/100 failed deadlock")


def test_time_series_query_draws_a_chart(page, server: ServerHandle, logs: Generated) -> None:
    cut = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(logs.made_at - 4 * 3600))
    run(page, server.url, "sql",
        "SELECT date_trunc('HOUR', _timestamp) AS hour, service, avg(latency_ms) AS latency "
        f"FROM logs WHERE _timestamp >= TIMESTAMP '{cut}' GROUP BY 1, 2 ORDER BY 1, 2")
    # the older batch's extent ends before the cut: pruned, unread
    expect(page.locator("figure.stats [data-level=extents] .stat-text")).to_have_text(
        "2 considered · 1 pruned · 1 read")
    chart = page.locator("figure.chart")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-series", "3")       # one line per service
    expect(chart).to_have_attribute("data-kind", "lines")
    labels = chart.locator(".u-legend .u-series .u-label").all_inner_texts()
    assert sorted(labels[1:]) == sorted(SERVICES)             # [0] is the time axis
    screenshot(page, "query")

    # a count per hour is drawn as bars, one series
    run(page, server.url, "sql",
        "SELECT date_trunc('HOUR', _timestamp) AS hour, count(*) AS n FROM logs "
        "GROUP BY 1 ORDER BY 1")
    expect(chart).to_have_attribute("data-kind", "bars")
    expect(chart).to_have_attribute("data-series", "1")
    expect(chart.locator("canvas")).to_have_count(1)

    # KQL's render hint decides: a column chart of two numeric columns, or no chart at all
    run(page, server.url, "kql",
        "logs\n| where _timestamp > ago(1h)\n| project _timestamp, latency_ms, "
        "twice = latency_ms * 2\n| render columnchart")
    expect(chart).to_have_attribute("data-kind", "bars")
    expect(chart).to_have_attribute("data-series", "2")
    expect(page.locator("details.translated pre")).to_contain_text("SELECT")
    run(page, server.url, "kql", "logs\n| project _timestamp, latency_ms\n| render table")
    expect(page.locator("#query-status")).to_contain_text(f"{len(logs.rows)} rows")
    expect(page.locator("figure.chart")).to_have_count(0)
    # no time column: no chart
    run(page, server.url, "sql", "SELECT service, count(*) AS n FROM logs GROUP BY service")
    expect(page.locator("#query-status")).to_contain_text("3 rows")
    expect(page.locator("figure.chart")).to_have_count(0)


def test_invalid_query_shows_the_error_at_its_position(page, server: ServerHandle) -> None:
    text = "SELECT service,\n  count(*) AS n\nFROM logs\nGROUP BY BY service"
    r = httpx.post(f"{server.url}/v1/query", json={"sql": text}, timeout=60)
    assert r.status_code == 400
    where = r.json()["error"]["details"][0]
    run(page, server.url, "sql", text)
    error = page.locator("#query-error .error")
    expect(error).to_contain_text("sql_syntax (400)")
    expect(error.locator(".position")).to_have_text(
        f"line {where['line']}, column {where['column']}")
    caret = error.locator("pre.caret").inner_text().split("\n")
    assert caret[0] == text.split("\n")[where["line"] - 1]
    assert caret[1] == " " * (where["column"] - 1) + "^"
    # the editor's caret is put on the offending token
    start = page.eval_on_selector("#editor", "e => e.selectionStart")
    lines = text.split("\n")
    assert start == sum(len(x) + 1 for x in lines[:where["line"] - 1]) + where["column"] - 1

    run(page, server.url, "kql", "logs\n| where level = 'error'")
    expect(error).to_contain_text("kql_syntax (400)")
    expect(error.locator(".position")).to_have_text("line 2, column 15")


def test_editor_keyboard(page, server: ServerHandle) -> None:
    page.goto(f"{server.url}/#/query")
    editor = page.locator("#editor")
    page.fill("#editor", "SELECT 1 AS one")
    page.press("#editor", "End")
    page.press("#editor", "Tab")                      # Tab indents inside the editor
    expect(editor).to_have_value("SELECT 1 AS one  ")
    expect(editor).to_be_focused()
    page.press("#editor", "Escape")
    page.press("#editor", "Tab")                      # Escape, then Tab leaves it
    expect(editor).not_to_be_focused()
    editor.focus()
    page.keyboard.press("Control+Enter")
    expect(page.locator("#result table.grid tbody td")).to_have_text("1")


def test_cancel_aborts_the_request(page, server: ServerHandle) -> None:
    # The browser holds the query request (as a slow statement would) until it is aborted.
    held: list[Any] = []
    page.route("**/v1/query", lambda route: held.append(route))
    run(page, server.url, "sql", "SELECT count(*) AS n FROM logs")
    expect(page.locator("#cancel")).to_be_enabled()
    expect(page.locator("#run")).to_be_disabled()
    page.click("#cancel")
    expect(page.locator("#query-status")).to_contain_text("cancelled")
    expect(page.locator("#run")).to_be_enabled()
    expect(page.locator("#cancel")).to_be_disabled()
    assert len(held) == 1
    page.unroute("**/v1/query")


def test_history_and_explain(page, server: ServerHandle) -> None:
    run(page, server.url, "sql", "SELECT count(*) AS total FROM logs")
    expect(page.locator("#query-status")).to_contain_text("1 rows")
    page.reload()       # the history is in localStorage: it outlives the page
    item = page.locator("ol.history .history-item").first
    expect(item).to_contain_text("SELECT count(*) AS total FROM logs")
    page.fill("#editor", "")
    item.click()
    expect(page.locator("#editor")).to_have_value("SELECT count(*) AS total FROM logs")
    page.fill("#editor", "SELECT * FROM logs WHERE service = 'api'")
    page.click("#explain")
    expect(page.locator("#query-status")).to_contain_text("1 rows")
    headers = page.locator("#result table.grid thead .col-name").all_inner_texts()
    assert "pushed" in headers and "engine" in headers
    expect(page.locator("#result table.grid tbody")).to_contain_text("service")
    # KQL: the plan of the SQL the query translates to
    page.select_option("#language", "kql")
    page.fill("#editor", "logs\n| where level == 'error'\n| count")
    page.click("#explain")
    expect(page.locator("#result table.grid tbody")).to_contain_text("level")
    expect(page.locator("#query-error")).to_be_empty()


def test_tables_list(page, server: ServerHandle, logs: Generated) -> None:
    storage = httpx.get(f"{server.url}/v1/tables/logs/storage", timeout=30).json()
    page.goto(f"{server.url}/#/tables")
    cells = page.locator("tr[data-table=logs] td")
    expect(cells.nth(0)).to_have_text(f"{len(logs.rows):,}")        # rows
    expect(cells.nth(1)).to_have_text(str(storage["extents"]))     # extents
    expect(cells.nth(2)).to_have_text(f"{storage['bytes'] / 1024:.1f} KB")
    expect(cells.nth(3)).to_have_text("2")                          # schema version
    expect(cells.nth(5)).to_have_text("30d")                        # retention
    page.locator("tr[data-table=logs] a").click()
    expect(page.locator("h1")).to_have_text("logs")


def test_table_page_shows_schema_history_and_snapshots(page, server: ServerHandle,
                                                      logs: Generated) -> None:
    snapshots = httpx.get(f"{server.url}/v1/tables/logs/snapshots", timeout=30).json()
    page.goto(f"{server.url}/#/tables/logs")
    columns = page.locator("#columns tbody tr")
    expect(columns).to_have_count(8)      # _timestamp, props, five declared, region
    types = {columns.nth(i).locator("th").inner_text(): columns.nth(i).locator("td.type")
             .inner_text() for i in range(8)}
    assert types["latency_ms"] == "long" and types["attrs"] == "dynamic"
    assert types["region"] == "string" and types["_timestamp"] == "timestamp"
    expect(page.locator("#schemas li[data-version='2']")).to_contain_text("added region")
    rows = page.locator("#snapshots tbody tr")
    expect(rows).to_have_count(len(snapshots["snapshots"]))
    shown = [(rows.nth(i).get_attribute("data-snapshot"),
              rows.nth(i).locator("td").nth(0).inner_text()) for i in range(rows.count())]
    assert shown == [(str(s["snapshot_id"]), s["operation"]) for s in snapshots["snapshots"]]
    appends = page.locator("#snapshots tbody tr:has(.op-append) td:nth-child(3)")
    assert sorted(appends.all_inner_texts()) == sorted(["240", "60"])
    rejects = page.locator("#rejects table.grid tbody tr")
    expect(rejects).to_have_count(len(REJECTS))
    raw = rejects.locator("td:last-child").all_inner_texts()      # JSON is pretty-printed
    assert sorted("".join(x.split()) for x in raw) == \
        sorted("".join(r.decode().split()) for _, r, _ in REJECTS)
    expect(page.locator("#rejects")).to_contain_text("line 2: cannot read this record")
    screenshot(page, "table")


def test_log_search_with_a_word_and_a_time_range(page, server: ServerHandle,
                                                 logs: Generated) -> None:
    page.goto(f"{server.url}/#/logs/logs")
    expect(page.locator("#log-table")).to_have_value("logs")
    page.select_option("#range", "1h")
    page.fill("#search", "deadlock")
    page.press("#search", "Enter")
    want = logs.matching("deadlock", 3600)
    assert len(want) == 3
    hist = page.locator("figure.histogram")
    expect(hist).to_have_attribute("data-total", str(len(want)))
    expect(hist.locator("canvas")).to_have_count(1)
    rows = page.locator("#logs-result table.grid tbody tr")
    expect(rows).to_have_count(len(want))
    messages = page.locator("#logs-result table.grid tbody tr td:nth-child(5)")
    assert sorted(messages.all_inner_texts()) == sorted(r["message"] for r in want)
    screenshot(page, "logs")

    # click a value: its field:value filter joins the search
    api_row = next(r for r in want if r["service"] == "api")
    page.locator("#logs-result button.cell", has_text="api").first.click()
    expect(page.locator("#search")).to_have_value("deadlock service:api")
    expect(rows).to_have_count(sum(1 for r in want if r["service"] == "api"))
    expect(messages.first).to_have_text(api_row["message"])

    # a wider range finds the older ones too
    page.select_option("#range", "24h")
    page.fill("#search", "deadlock")
    page.press("#search", "Enter")
    expect(hist).to_have_attribute("data-total", str(len(logs.matching("deadlock", 86400))))

    # a custom range (UTC) around the one 100.5 minutes old; `-word` excludes
    page.select_option("#range", "custom")
    page.fill("#range-from", _local(logs.made_at - 110 * 60))
    page.fill("#range-to", _local(logs.made_at - 90 * 60))
    page.press("#search", "Enter")
    expect(hist).to_have_attribute("data-total", "1")
    expect(messages).to_have_text(["GET /orders/100 failed deadlock"])
    page.fill("#search", "deadlock -failed")
    page.press("#search", "Enter")
    expect(hist).to_have_attribute("data-total", "0")
    expect(rows).to_have_count(0)


def _local(ts: float) -> str:
    """A datetime-local input's value (the console reads it as UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts))


def test_live_page_refreshes_without_a_reload(page, server: ServerHandle) -> None:
    sql(server.url, "CREATE TABLE IF NOT EXISTS events (kind string)")
    ingest(server.url, "events", [{"_ts": 0, "kind": "first"}])
    page.goto(f"{server.url}/#/live")
    page.evaluate("window.__sameDocument = true")
    row = page.locator("#live-throughput tbody tr", has_text="events · rest")
    expect(row).to_be_visible()
    before = int(row.locator("td").nth(0).inner_text().replace(",", ""))
    ingest(server.url, "events", [{"_ts": 0, "kind": "second"}, {"_ts": 0, "kind": "third"}])
    expect(row.locator("td").nth(0)).to_have_text(f"{before + 2:,}")
    assert page.evaluate("window.__sameDocument") is True
    expect(page.locator("#live-maintenance")).to_contain_text("pending")
    expect(page.locator("#live-throughput canvas")).to_have_count(1)
    screenshot(page, "live")
