"""How the console draws and clears answers, in a real browser (Debian chromium via
Playwright) against a live `shoal serve` holding the generated logs: grouped counts as
stacked bars on an axis from 0 (read back from the canvas's pixels), a failed query
clearing the answer before it, the log grid keeping each row on one line with long values
cut and openable, an empty log search naming the table's time range, and schema history
naming a widening's old and new type.

Each test waits on what the page shows (Playwright's auto-waiting `expect`), never on time.
"""

from __future__ import annotations

import collections
import json
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.console.conftest import SERVICES, Generated, ingest, sql
from tests.support.server import ServerHandle

pytestmark = pytest.mark.usefixtures("logs")
expect.set_options(timeout=60_000)     # a hang guard only

# Reads the stacked bar chart back from its canvas: at the time point in the middle of those
# where every series has a value, the colour at the middle of each series' part of the bar,
# that part's height in data units, and where 0 is on the y-axis.
READ_BARS = """(fig) => {
  const u = fig.uplot;
  const n = u.series.length - 1;
  const xs = u.data[0];
  const full = xs.map((_, j) => j).filter((j) => u.data.slice(1).every((d) => d[j] != null));
  const i = full[Math.floor(full.length / 2)];
  const px = Math.round(u.valToPos(xs[i], "x", true));
  const colour = (y) => {
    const d = u.ctx.getImageData(px, Math.round(y), 1, 1).data;
    return "#" + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, "0")).join("");
  };
  const parts = [];
  for (let k = 1; k <= n; k += 1) {
    const top = u.data[k][i];
    const below = k < n ? u.data[k + 1][i] : 0;
    const y = (u.valToPos(top, "y", true) + u.valToPos(below, "y", true)) / 2;
    parts.push({ label: u.series[k].label, height: top - below, colour: colour(y) });
  }
  return { at: xs[i], parts, colours: fig.colours, yMin: u.scales.y.min,
           zeroAt: u.valToPos(0, "y", true), plotBottom: u.bbox.top + u.bbox.height,
           justAboveZero: colour(u.valToPos(0, "y", true) - 2) };
}"""


def run(page: Any, url: str, language: str, text: str) -> None:
    page.goto(f"{url}/#/query")
    page.select_option("#language", language)
    page.fill("#editor", text)
    page.press("#editor", "Control+Enter")


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _shown(ts: float) -> str:
    """A time as the console writes it."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


def test_grouped_counts_are_stacked_bars_from_zero(page, server: ServerHandle,
                                                   logs: Generated) -> None:
    run(page, server.url, "sql",
        "SELECT date_trunc('HOUR', _timestamp) AS hour, service, count(*) AS n FROM logs "
        "GROUP BY 1, 2 ORDER BY 1, 2")
    chart = page.locator("figure.chart")
    expect(chart).to_have_attribute("data-kind", "bars")
    expect(chart).to_have_attribute("data-series", "3")
    expect(chart).to_have_attribute("data-layout", "stacked")
    expect(chart).to_have_attribute("data-y-min", "0")
    expect(chart.locator("figcaption")).to_contain_text("stacked bars")
    drawn = chart.evaluate(READ_BARS)
    hour = int(drawn["at"])
    counts = collections.Counter(r["service"] for r in logs.rows
                                 if hour <= r["_ts"] < hour + 3600)
    # each service's part of the bar is its own count, painted in its own colour
    assert {p["label"]: p["height"] for p in drawn["parts"]} == {s: counts[s] for s in SERVICES}
    assert {p["label"]: p["colour"] for p in drawn["parts"]} == drawn["colours"]
    assert len(set(drawn["colours"].values())) == 3
    # the axis starts at 0, at the bottom of the plot, and the bottom part starts there
    assert drawn["yMin"] == 0
    assert abs(drawn["zeroAt"] - drawn["plotBottom"]) <= 1
    assert drawn["justAboveZero"] == drawn["parts"][-1]["colour"]
    # the legend lists the parts top of the stack first
    labels = chart.locator(".u-legend .u-series .u-label").all_inner_texts()[1:]
    assert labels == [p["label"] for p in drawn["parts"]]


def test_a_failed_query_clears_the_previous_answer(page, server: ServerHandle) -> None:
    run(page, server.url, "sql",
        "SELECT date_trunc('HOUR', _timestamp) AS hour, count(*) AS n FROM logs GROUP BY 1")
    expect(page.locator("figure.chart canvas")).to_have_count(1)
    expect(page.locator("figure.stats")).to_have_count(1)
    page.fill("#editor", "SELECT count(*) FROM no_such_table")
    page.press("#editor", "Control+Enter")
    expect(page.locator("#query-error .error")).to_contain_text("no_such_table")
    expect(page.locator("#query-status")).to_have_text("failed")
    for leftover in ("figure.stats", "figure.chart", "table.grid", ".downloads"):
        expect(page.locator(f"#result {leftover}")).to_have_count(0)
    # and the next good answer shows as usual, without the error
    page.fill("#editor", "SELECT 1 AS one")
    page.press("#editor", "Control+Enter")
    expect(page.locator("#result table.grid tbody td")).to_have_text("1")
    expect(page.locator("#query-error")).to_be_empty()


def test_an_empty_log_search_names_the_tables_time_range(page, server: ServerHandle) -> None:
    sql(server.url, "CREATE TABLE IF NOT EXISTS old_logs (level string, message string)")
    start = time.time() - 3 * 86400
    rows = [{"_timestamp": _iso(start + 60 * i), "level": "info", "message": f"old {i}"}
            for i in range(3)]
    ingest(server.url, "old_logs", rows)
    page.goto(f"{server.url}/#/logs/old_logs")
    expect(page.locator("#range")).to_have_value("1h")
    hint = page.locator("#logs-hint")
    expect(hint).to_have_text(
        f"no rows in the last hour; this table has rows from {_shown(start)} to "
        f"{_shown(start + 120)} search that range")
    expect(page.locator("figure.histogram")).to_have_attribute("data-total", "0")
    # a search with words says "matching"
    page.fill("#search", "nothing")
    page.press("#search", "Enter")
    expect(hint).to_contain_text("no matching rows in the last hour; this table has rows")
    # the hint's button searches the range the table has
    page.fill("#search", "")
    page.click("#search-table-range")
    expect(page.locator("figure.histogram")).to_have_attribute("data-total", "3")
    expect(page.locator("#logs-result table.grid tbody tr")).to_have_count(3)
    expect(hint).to_be_hidden()


def test_the_log_grid_keeps_each_row_on_one_line(page, server: ServerHandle) -> None:
    sql(server.url, "CREATE TABLE IF NOT EXISTS host_logs "
                    "(host string, level string, message string, attrs dynamic)")
    host = "ip-10-200-30-40.eu-central-1.compute.internal"
    attrs = {f"key_{i:02d}": f"a value long enough to need room {i}" for i in range(12)}
    ingest(server.url, "host_logs", [{"_timestamp": _iso(time.time() - 60), "host": host,
                                      "level": "warn", "message": "disk almost full",
                                      "attrs": attrs}])
    page.goto(f"{server.url}/#/logs/host_logs")
    rows = page.locator("#logs-result table.grid tbody tr")
    expect(rows).to_have_count(1)
    row = rows.first
    host_button = row.locator("button.cell", has_text=host)
    level_button = row.locator("button.cell", has_text="warn")
    # the host is one line, as tall as a one-word value
    assert host_button.bounding_box()["height"] <= level_button.bounding_box()["height"] + 1
    assert host in host_button.get_attribute("title")
    # attrs: cut with an ellipsis, the full value as the tooltip
    cell = row.locator("td.expandable")
    full = json.dumps(attrs, separators=(",", ":"))
    expect(cell).to_have_attribute("title", full)
    code = cell.locator("code.json")
    assert code.evaluate("e => e.scrollWidth > e.clientWidth")
    assert code.evaluate("e => getComputedStyle(e).textOverflow") == "ellipsis"
    # a click opens it in full, pretty-printed; another closes it
    cell.click()
    expect(cell).to_have_attribute("aria-expanded", "true")
    opened = cell.locator("pre.json")
    expect(opened).to_contain_text('"key_11": "a value long enough to need room 11"')
    assert opened.evaluate("e => e.scrollWidth <= e.clientWidth")
    cell.click()
    expect(cell.locator("code.json")).to_have_count(1)


def test_schema_history_names_the_types_of_a_widening(page, server: ServerHandle) -> None:
    sql(server.url, "CREATE TABLE IF NOT EXISTS widened (host string, status int)")
    sql(server.url, "ALTER TABLE widened ALTER COLUMN status TYPE string")
    page.goto(f"{server.url}/#/tables/widened")
    expect(page.locator("#schemas li[data-version='2']")).to_have_text(
        "v2 widened status from int to string")
    expect(page.locator("#schemas li[data-version='1']")).to_have_text("v1 4 columns")
