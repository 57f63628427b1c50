// The Tables pages: every table with its size and settings; one table with its columns,
// schema history, snapshot timeline and the last rejects of its reject table.

import { api, ApiError, query, quote } from "./api.js";
import { bytes, clear, count, errorBox, h, time } from "./dom.js";
import { grid } from "./grid.js";

const REJECTS_SHOWN = 20;

const iso = (ns) => new Date(ns / 1e6).toISOString().replace(/\.\d+Z$/, "Z");

function link(name) {
  return h("a", { href: `#/tables/${encodeURIComponent(name)}` }, name);
}

export function renderList(main) {
  const body = h("tbody");
  const table = h("table.grid.tables", { "aria-label": "Tables" },
    h("thead", h("tr", ["table", "rows", "extents", "bytes", "schema version", "mode",
      "retention"].map((c) => h("th", { scope: "col" }, c)))), body);
  clear(main, h("h1", "Tables"), h("div.grid-scroll", table));
  let alive = true;
  (async () => {
    try {
      const { tables } = await api("/v1/tables");
      if (!alive) return;
      if (!tables.length) body.append(h("tr", h("td", { colspan: 7 }, "No tables yet.")));
      for (const t of tables) {
        const size = h("td.num", "…");
        body.append(h("tr", { dataset: { table: t.name } },
          h("th", { scope: "row" }, link(t.name)),
          h("td.num", count(t.row_count)), h("td.num", count(t.extent_count)), size,
          h("td.num", String(t.schema_version)), h("td", t.mode), h("td", t.retention || "—")));
        api(`/v1/tables/${encodeURIComponent(t.name)}/storage`)
          .then((s) => { size.textContent = bytes(s.bytes); })
          .catch((e) => { size.textContent = "?"; size.title = e.message; });
      }
    } catch (e) {
      main.append(errorBox(e));
    }
  })();
  return () => { alive = false; };
}

function section(title, id, ...content) {
  return h(`section#${id}.panel`, { "aria-labelledby": `${id}-title` },
    h(`h2#${id}-title`, title), ...content);
}

function columnsTable(columns) {
  return h("table.grid", { "aria-label": "Columns" },
    h("thead", h("tr", ["column", "type", "nullable", "header", "default"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", columns.map((c) => h("tr", { dataset: { column: c.name } },
      h("th", { scope: "row" }, c.name), h("td.type", c.type), h("td", c.nullable ? "yes" : "no"),
      h("td", c.header == null ? "—" : c.header === "*" ? "all headers" : `header ${c.header}`),
      h("td", c.default === undefined ? "—" : JSON.stringify(c.default))))));
}

// Each version against the one before: "added region", "widened status from int to string".
function schemaHistory(versions) {
  const typeIn = (v) => new Map(v.columns.map((c) => [c.name, c.type]));
  const items = versions.map((v, i) => {
    const before = i ? typeIn(versions[i - 1]) : new Map();
    const now = typeIn(v);
    const widened = v.widened.map((n) => (before.has(n)
      ? `${n} from ${before.get(n)} to ${now.get(n)}` : n));
    return h("li", { dataset: { version: String(v.version) } },
      h("strong", `v${v.version}`), " ",
      v.version === 1 || !v.added.length && !v.widened.length
        ? `${v.columns.length} columns`
        : [v.added.length ? `added ${v.added.join(", ")}` : "",
          widened.length ? `widened ${widened.join(", ")}` : ""].filter(Boolean).join("; "));
  });
  return h("ol.schema-history", items.reverse());
}

function summaryText(s) {
  const parts = [];
  for (const [k, v] of Object.entries(s.summary || {})) {
    parts.push(`${k.replaceAll("_", " ")} ${typeof v === "number" ? count(v) : JSON.stringify(v)}`);
  }
  return parts.join(", ");
}

function timeline(doc) {
  return h("table.grid.snapshots", { "aria-label": "Snapshots" },
    h("thead", h("tr", ["snapshot", "operation", "rows added", "schema", "time", "summary"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", doc.snapshots.map((s) => h("tr", { dataset: { snapshot: String(s.snapshot_id) } },
      h("th.num", { scope: "row" }, String(s.snapshot_id)),
      h("td", h(`span.op.op-${s.operation}`, s.operation)),
      h("td.num", s.summary && s.summary.added_rows != null ? count(s.summary.added_rows) : "—"),
      h("td.num", `v${s.schema_version}`),
      h("td", h("time", { datetime: new Date(s.created_at * 1000).toISOString() },
        time(s.created_at))),
      h("td.muted", summaryText(s))))));
}

// A reject's `raw` bytes arrive as base64: show them as the text they were (UTF-8).
function decodeRaw(answer) {
  const i = answer.columns.findIndex((c) => c.name === "raw");
  if (i < 0) return answer;
  const text = (b64) => {
    try {
      return new TextDecoder("utf-8", { fatal: true })
        .decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
    } catch {
      return b64;     // not text: leave the base64 as it is
    }
  };
  const rows = answer.rows.map((r) => r.map((v, j) => (j === i && v != null ? text(v) : v)));
  const columns = answer.columns.map((c, j) => (j === i ? { ...c, type: "raw" } : c));
  return { ...answer, columns, rows };
}

export function renderTable(main, name) {
  const enc = encodeURIComponent(name);
  const slots = {
    summary: h("div.table-summary", "…"),
    columns: h("div", "…"),
    schemas: h("div", "…"),
    snapshots: h("div", "…"),
    rejects: h("div", "…"),
  };
  clear(main,
    h("nav.crumbs", { "aria-label": "Breadcrumb" },
      h("a", { href: "#/tables" }, "Tables"), " / ", name),
    h("h1", name),
    slots.summary,
    h("div.table-page",
      section("Columns", "columns", slots.columns),
      section("Schema history", "schemas", slots.schemas)),
    section("Snapshots", "snapshots", slots.snapshots),
    section(`Last rejects (${name}__rejects)`, "rejects", slots.rejects));

  const fill = (slot, promise, draw) => promise.then((doc) => clear(slot, draw(doc)))
    .catch((e) => clear(slot, errorBox(e)));
  fill(slots.summary, Promise.all([api(`/v1/tables/${enc}`), api(`/v1/tables/${enc}/storage`)]),
    ([d, s]) => h("dl.facts", [
      ["rows", count(d.row_count)], ["extents", count(d.extent_count)],
      ["bytes", bytes(s.bytes)], ["schema version", `v${d.schema_version}`],
      ["mode", d.mode], ["retention", d.retention || "none"],
      ["snapshot", String(d.snapshot_id)],
      ["time range", s.min_ts == null ? "—" : `${iso(s.min_ts)} – ${iso(s.max_ts)}`],
    ].map(([k, v]) => h("div", h("dt", k), h("dd", v)))));
  fill(slots.columns, api(`/v1/tables/${enc}`), (d) => columnsTable(d.columns));
  fill(slots.schemas, api(`/v1/tables/${enc}/schemas`), (d) => schemaHistory(d.versions));
  fill(slots.snapshots, api(`/v1/tables/${enc}/snapshots?limit=50`), (d) => [
    timeline(d),
    d.total > d.snapshots.length
      ? h("p.muted", `newest ${d.snapshots.length} of ${d.total}`) : null]);
  if (name.endsWith("__rejects")) {
    clear(slots.rejects, h("p.muted", "This is a reject table."));
  } else {
    const rejects = `${name}__rejects`;
    query("sql", `SELECT _timestamp, source, error, ${quote("field")}, file, line, topic, ` +
      `${quote("partition")}, ${quote("offset")}, raw FROM ${quote(rejects)} ` +
      `ORDER BY _timestamp DESC LIMIT ${REJECTS_SHOWN}`)
      .then((answer) => clear(slots.rejects, answer.rows.length
        ? grid(decodeRaw(answer), { label: "Rejects" }) : h("p.muted", "No rejects.")))
      .catch((e) => clear(slots.rejects, e instanceof ApiError && e.status === 404
        ? h("p.muted", "No rejects (the table has none yet).") : errorBox(e)));
  }
}
