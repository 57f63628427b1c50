// The result grid: typed column headers, nulls shown as null, JSON (dynamic) values
// pretty-printed, numbers right-aligned, long answers paged. `onCell(column, value)` (if
// given) makes each value a button, e.g. to filter by it.
//
// `compact` (the log view): one line per row. No value wraps; a long one is cut with an
// ellipsis and carries its full text as a tooltip, and a JSON value opens in full
// (pretty-printed) when clicked, and closes again.

import { h } from "./dom.js";

export const PAGE_SIZE = 100;
const NUMERIC = /^(tinyint|smallint|int|bigint|float|double|decimal)/;

export function isNumeric(type) { return NUMERIC.test(type); }
export function isTime(type) { return /^(timestamp|date)/.test(type); }

// A string holding a JSON object or array (how dynamic values arrive) as parsed JSON.
function asJson(v) {
  if (v !== null && typeof v === "object") return v;
  if (typeof v !== "string" || !/^\s*[[{]/.test(v)) return undefined;
  try { return JSON.parse(v); } catch { return undefined; }
}

export function cell(value, type, compact = false) {
  if (value === null || value === undefined) return h("span.null", "null");
  const json = asJson(value);
  if (json !== undefined) {
    return compact ? h("code.json", JSON.stringify(json))
      : h("pre.json", JSON.stringify(json, null, 2));
  }
  if (isNumeric(type) && typeof value === "number") return String(value);
  return String(value);
}

// `compact`: JSON values on one line (the log view) instead of indented.
export function grid(answer, { onCell, pageSize = PAGE_SIZE, label = "Result",
  compact = false } = {}) {
  const { columns, rows } = answer;
  const wrap = h("div.grid-wrap");
  const pages = Math.max(1, Math.ceil(rows.length / pageSize));
  let page = 0;
  const table = h(compact ? "table.grid.compact" : "table.grid", { "aria-label": label });
  const status = h("span.pager-status", { "aria-live": "polite" });
  const prev = h("button", { type: "button", onclick: () => show(page - 1) }, "‹ Previous");
  const next = h("button", { type: "button", onclick: () => show(page + 1) }, "Next ›");
  const head = h("thead", h("tr", columns.map((c) => h("th", { scope: "col",
    class: isNumeric(c.type) ? "num" : null },
  h("span.col-name", c.name), h("span.col-type", c.type)))));
  const body = h("tbody");
  table.append(head, body);

  function show(p) {
    page = Math.min(Math.max(0, p), pages - 1);
    body.replaceChildren();
    for (const row of rows.slice(page * pageSize, (page + 1) * pageSize)) {
      body.append(h("tr", row.map((v, i) => {
        const c = columns[i];
        const content = cell(v, c.type, compact);
        const td = h("td", { class: isNumeric(c.type) ? "num" : null });
        const json = v === null ? undefined : asJson(v);
        if (compact && v !== null && v !== undefined) {
          td.classList.add("clip");
          td.title = json === undefined ? String(v) : JSON.stringify(json);
        }
        if (compact && json !== undefined) {
          td.classList.add("expandable");
          td.tabIndex = 0;
          td.setAttribute("aria-expanded", "false");
          const toggle = () => {
            const open = td.classList.toggle("open");
            td.setAttribute("aria-expanded", String(open));
            td.replaceChildren(open ? h("pre.json", JSON.stringify(json, null, 2))
              : cell(v, c.type, true));
          };
          td.addEventListener("click", toggle);
          td.addEventListener("keydown", (ev) => {
            if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(); }
          });
        }
        if (onCell && v !== null && json === undefined) {
          const hint = `filter by ${c.name}`;
          td.append(h("button.cell", { type: "button",
            title: compact ? `${String(v)}\n(click: ${hint})` : hint,
            onclick: () => onCell(c, v) }, content));
        } else {
          td.append(content);
        }
        return td;
      })));
    }
    const first = rows.length ? page * pageSize + 1 : 0;
    const last = Math.min(rows.length, (page + 1) * pageSize);
    status.textContent = `rows ${first}–${last} of ${rows.length}`;
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }
  show(0);
  wrap.append(h("div.grid-scroll", table));
  wrap.append(h("div.pager", rows.length > pageSize ? [prev, next] : null, status));
  return wrap;
}

export function csv(answer) {
  const esc = (v) => {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  const lines = [answer.columns.map((c) => esc(c.name)).join(",")];
  for (const row of answer.rows) lines.push(row.map(esc).join(","));
  return lines.join("\n") + "\n";
}

export function download(name, data, type) {
  const url = URL.createObjectURL(new Blob([data], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
