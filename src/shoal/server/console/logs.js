// The Logs page: pick a log table (one with `_timestamp` and a text column), a time range
// (last 15 m, 1 h, 24 h, or custom, in UTC) and a search: bare words must occur as terms
// (`has`), `-word` must not, "a phrase" must occur as written (`contains`), and
// `field:value` (or `attrs.path:value` into a dynamic column) keeps the rows whose field is
// that value. The search becomes one KQL query, shown under the box; a histogram of the
// matching rows over time sits above the newest rows. Clicking a value filters by it.
// When nothing matches, a hint says when the table does have rows (the time range of its
// current snapshot) and offers to search that range.

import { api, query } from "./api.js";
import { barRange } from "./chart.js";
import { clear, count, errorBox, h, time } from "./dom.js";
import { grid, isNumeric } from "./grid.js";

const ROWS_SHOWN = 500;
const TEXT_COLUMNS = ["message", "body", "msg", "log", "text", "line"];
const RANGES = { "15m": 15 * 60, "1h": 3600, "24h": 86400 };
const RANGE_WORDS = { "15m": "in the last 15 minutes", "1h": "in the last hour",
  "24h": "in the last 24 hours" };
const BINS = [1, 5, 10, 30, 60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 86400];
const FIELD = /^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*):(.+)$/;

export function kqlString(s) {
  return `"${String(s).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

function kqlTime(seconds) {
  return `datetime(${new Date(seconds * 1000).toISOString()})`;
}

// The search box as terms: ["word", "-word", "\"a phrase\"", "field:value", ...].
export function terms(text) {
  return [...text.matchAll(/-?[A-Za-z0-9_.]+:"(?:[^"\\]|\\.)*"|-?"(?:[^"\\]|\\.)*"|\S+/g)]
    .map((m) => m[0]);
}

const unquote = (s) => (s.startsWith('"') && s.endsWith('"') && s.length > 1
  ? s.slice(1, -1).replace(/\\(.)/g, "$1") : s);

// KQL conditions for a search over `columns` ([{name, type}] of the table, shoal types).
export function conditions(text, columns) {
  const byName = new Map(columns.map((c) => [c.name, c]));
  const textCol = TEXT_COLUMNS.find((n) => byName.get(n) && byName.get(n).type === "string")
    || (columns.find((c) => c.type === "string") || {}).name;
  const out = [];
  for (let term of terms(text)) {
    const negate = term.startsWith("-") && term.length > 1;
    if (negate) term = term.slice(1);
    const f = FIELD.exec(term);
    if (f && byName.has(f[1])) {
      const col = byName.get(f[1]);
      const value = unquote(f[3]);
      let cond;
      if (f[2]) cond = `tostring(${f[1]}${f[2]}) == ${kqlString(value)}`;
      else if (isNumeric(col.type) || ["int", "long", "real"].includes(col.type)) {
        cond = Number.isFinite(Number(value)) ? `${f[1]} == ${Number(value)}`
          : `tostring(${f[1]}) == ${kqlString(value)}`;
      } else if (col.type === "bool") cond = `${f[1]} == ${value === "true"}`;
      else cond = `${f[1]} == ${kqlString(value)}`;
      out.push(negate ? `not(${cond})` : cond);
      continue;
    }
    if (!textCol) continue;
    const phrase = term.startsWith('"');
    const op = phrase ? (negate ? "!contains" : "contains") : (negate ? "!has" : "has");
    out.push(`${textCol} ${op} ${kqlString(unquote(term))}`);
  }
  return out;
}

function pickBin(seconds) {
  return BINS.find((b) => seconds / b <= 90) || 86400;
}

function binText(s) {
  return s % 86400 === 0 ? `${s / 86400}d` : s % 3600 === 0 ? `${s / 3600}h`
    : s % 60 === 0 ? `${s / 60}m` : `${s}s`;
}

export function buildQueries(table, columns, text, from, to) {
  const where = [`_timestamp between (${kqlTime(from)} .. ${kqlTime(to)})`,
    ...conditions(text, columns)];
  const base = [table, ...where.map((w) => `| where ${w}`)].join("\n");
  const bin = pickBin(to - from);
  // KQL's bin() by 1s/1m/1h/1d is date_trunc, which the embedded engine answers (other
  // spans need Spark): count by the largest such unit in `bin`, add up into `bin` here.
  const unit = [86400, 3600, 60, 1].find((u) => bin % u === 0);
  return {
    rows: `${base}\n| sort by _timestamp desc\n| take ${ROWS_SHOWN}`,
    histogram: `${base}\n| summarize count() by bin(_timestamp, ${binText(unit)})`,
    bin,
  };
}

function histogram(answer, from, to, bin, width) {
  const counts = new Map();
  for (const [t, n] of answer.rows) {
    const at = Math.floor(Date.parse(t) / 1000 / bin) * bin;
    counts.set(at, (counts.get(at) || 0) + n);
  }
  const x = [];
  const y = [];
  for (let t = Math.floor(from / bin) * bin; t <= to; t += bin) {
    x.push(t);
    y.push(counts.get(t) || 0);
  }
  const total = answer.rows.reduce((s, r) => s + r[1], 0);
  const fig = h("figure.histogram", { dataset: { total: String(total), bins: String(x.length) } });
  const target = h("div.chart-plot");
  fig.append(target, h("figcaption", `${count(total)} matching rows, ${binText(bin)} bins`));
  if (typeof uPlot !== "undefined") {
    queueMicrotask(() => new uPlot({
      width: Math.max(320, width), height: 140, legend: { show: false },
      scales: { x: { time: true, range: [from, to] }, y: { range: barRange } },
      series: [{}, { label: "rows", stroke: "#1f77b4", fill: "#1f77b499",
        paths: uPlot.paths.bars({ size: [0.9, 40], align: 1 }), points: { show: false } }],
      axes: [{}, { size: 50 }],
    }, [x, y], target));
  }
  return { fig, total };
}

export function render(main, chosen) {
  const tableSel = h("select#log-table", { "aria-label": "Log table" });
  const range = h("select#range", { "aria-label": "Time range" },
    h("option", { value: "15m" }, "Last 15 minutes"), h("option", { value: "1h" }, "Last hour"),
    h("option", { value: "24h" }, "Last 24 hours"),
    h("option", { value: "custom" }, "Custom (UTC)"));
  range.value = "1h";
  const fromIn = h("input#range-from",
    { type: "datetime-local", step: 1, "aria-label": "From (UTC)" });
  const toIn = h("input#range-to",
    { type: "datetime-local", step: 1, "aria-label": "To (UTC)" });
  const custom = h("span.custom-range", { hidden: true }, fromIn, " – ", toIn);
  const search = h("input#search", { type: "search", "aria-label": "Search",
    placeholder: 'words, -word, "a phrase", field:value' });
  const go = h("button#search-run", { type: "submit" }, "Search");
  const kqlView = h("pre#logs-kql.muted");
  const status = h("span#logs-status.muted", { role: "status" });
  const hint = h("p#logs-hint.muted", { hidden: true });
  const out = h("div#logs-result");
  let columns = [];
  let ctl = null;

  range.addEventListener("change", () => {
    custom.hidden = range.value !== "custom";
    if (range.value === "custom" && !fromIn.value) {
      const now = Date.now();
      fromIn.value = new Date(now - 3600e3).toISOString().slice(0, 19);
      toIn.value = new Date(now).toISOString().slice(0, 19);
    }
  });

  function window_() {
    if (range.value !== "custom") {
      const to = Math.ceil(Date.now() / 1000);
      return [to - RANGES[range.value], to];
    }
    const from = Date.parse(`${fromIn.value}Z`) / 1000;
    const to = Date.parse(`${toIn.value}Z`) / 1000;
    if (!Number.isFinite(from) || !Number.isFinite(to) || from >= to) return null;
    return [from, to];
  }

  async function run() {
    const table = tableSel.value;
    if (!table) return;
    const win = window_();
    clear(out);
    clear(hint);
    hint.hidden = true;
    if (!win) {
      out.append(errorBox({ code: "bad_range", message: "pick a start before the end" }));
      return;
    }
    const [from, to] = win;
    const q = buildQueries(table, columns, search.value, from, to);
    kqlView.textContent = q.rows;
    if (ctl) ctl.abort();
    ctl = new AbortController();
    status.textContent = "searching…";
    try {
      const [hist, rows] = await Promise.all([
        query("kql", q.histogram, { signal: ctl.signal }),
        query("kql", q.rows, { signal: ctl.signal })]);
      const width = out.clientWidth || main.clientWidth - 40;
      const { fig, total } = histogram(hist, from, to, q.bin, width);
      status.textContent = `${count(total)} matching rows` +
        (total > rows.rows.length ? `, newest ${rows.rows.length} shown` : "");
      clear(out, fig, grid(rows, { label: "Log rows", compact: true,
        onCell: (col, v) => addFilter(col.name, v) }));
      if (total === 0) emptyHint(table, from, to, ctl.signal);
    } catch (e) {
      if (e.name === "AbortError") return;
      status.textContent = "failed";
      clear(out, errorBox(e, q.rows));
    }
  }

  // "no rows in the last hour; this table has rows from X to Y", and a button to look there
  async function emptyHint(table, from, to, signal) {
    let storage;
    try {
      storage = await api(`/v1/tables/${encodeURIComponent(table)}/storage`, { signal });
    } catch (e) {
      if (e.name !== "AbortError") console.warn("no time range for the hint", e);
      return;
    }
    if (signal.aborted) return;
    const when = RANGE_WORDS[range.value] ||
      `between ${time(from)} and ${time(to)}`;
    const what = search.value.trim() ? "no matching rows" : "no rows";
    if (storage.min_ts == null) {
      clear(hint, `${what} ${when}; this table has no rows yet`);
    } else {
      const lo = Math.floor(storage.min_ts / 1e9);
      const hi = Math.ceil(storage.max_ts / 1e9);
      clear(hint, `${what} ${when}; this table has rows from `,
        h("time.from", { datetime: new Date(lo * 1000).toISOString() }, time(lo)), " to ",
        h("time.to", { datetime: new Date(hi * 1000).toISOString() }, time(hi)), " ",
        h("button.link#search-table-range", { type: "button", onclick: () => {
          range.value = "custom";
          custom.hidden = false;
          fromIn.value = new Date(lo * 1000).toISOString().slice(0, 19);
          toIn.value = new Date((hi + 1) * 1000).toISOString().slice(0, 19);
          run();
        } }, "search that range"));
    }
    hint.hidden = false;
  }

  function addFilter(name, value) {
    if (name === "_timestamp") return;
    const v = String(value);
    const term = /^[^\s"]+$/.test(v) ? `${name}:${v}` : `${name}:${kqlString(v)}`;
    if (!terms(search.value).includes(term)) search.value = `${search.value} ${term}`.trim();
    run();
  }

  const form = h("form.logs-bar", { role: "search" }, h("label", { for: "log-table" }, "Table "),
    tableSel, range, custom, search, go);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  tableSel.addEventListener("change", () => {
    location.hash = `#/logs/${encodeURIComponent(tableSel.value)}`;
  });
  clear(main, h("h1", "Logs"), form, h("details.kql", h("summary", "KQL"), kqlView), status, hint, out);

  (async () => {
    try {
      const { tables } = await api("/v1/tables");
      const logTables = tables.filter((t) => !t.name.endsWith("__rejects") &&
        t.columns.some((c) => c.name === "_timestamp") &&
        t.columns.some((c) => c.type === "string"));
      if (!logTables.length) {
        clear(out, h("p.muted", "No table with _timestamp and a text column."));
        return;
      }
      const pick = logTables.find((t) => t.name === chosen) ||
        logTables.find((t) => t.columns.some((c) => TEXT_COLUMNS.includes(c.name))) ||
        logTables[0];
      for (const t of logTables) tableSel.append(h("option", { value: t.name }, t.name));
      tableSel.value = pick.name;
      columns = pick.columns;
      search.focus();
      run();
    } catch (e) {
      clear(out, errorBox(e));
    }
  })();
  return () => { if (ctl) ctl.abort(); };
}
