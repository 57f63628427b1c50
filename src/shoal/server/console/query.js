// The Query page: an editor for SQL or KQL, run with Ctrl+Enter (or Cmd+Enter), cancel,
// EXPLAIN, a history kept in localStorage, and the answer as pruning stats, an automatic
// chart and a paged grid with CSV/JSON/Arrow downloads.
//
// Cancel aborts the HTTP request; the server sees its client go away and cancels the
// statement (its Spark jobs or embedded run), freeing its query slot.

import { ARROW, query } from "./api.js";
import { chart } from "./chart.js";
import { clear, errorBox, h } from "./dom.js";
import { csv, download, grid } from "./grid.js";
import { statsPicture } from "./stats.js";

const HISTORY_KEY = "shoal.history";
const HISTORY_MAX = 50;
const DRAFT_KEY = "shoal.draft";

export function loadHistory() {
  try { return JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]"); } catch { return []; }
}

function remember(language, text) {
  const items = loadHistory().filter((x) => !(x.language === language && x.text === text));
  items.unshift({ language, text, at: Date.now() });
  localStorage.setItem(HISTORY_KEY, JSON.stringify(items.slice(0, HISTORY_MAX)));
}

// Tab indents (two spaces) instead of leaving the editor; Escape then Tab leaves it, so the
// keyboard never gets stuck. Ctrl/Cmd+Enter runs.
function editorKeys(editor, run) {
  let released = false;
  editor.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      run();
    } else if (ev.key === "Escape") {
      released = true;
    } else if (ev.key === "Tab" && !released && !ev.shiftKey) {
      ev.preventDefault();
      const { selectionStart: s, selectionEnd: e, value } = editor;
      editor.value = `${value.slice(0, s)}  ${value.slice(e)}`;
      editor.selectionStart = editor.selectionEnd = s + 2;
    } else {
      released = false;
    }
  });
}

// The character offset of (line, column) in `text`, for putting the caret on an error.
function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let off = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length); i += 1) off += lines[i].length + 1;
  return off + Math.max(0, (column || 1) - 1);
}

export function render(main, initial = {}) {
  const lang = h("select#language", { "aria-label": "Language" },
    h("option", { value: "sql" }, "SQL"), h("option", { value: "kql" }, "KQL"));
  const draft = JSON.parse(sessionStorage.getItem(DRAFT_KEY) || "null");
  lang.value = initial.language || (draft && draft.language) || "sql";
  const editor = h("textarea#editor", {
    "aria-label": "Query", spellcheck: "false", rows: 8,
    placeholder: "SELECT ... (Ctrl+Enter runs; Tab indents, Escape then Tab leaves)",
  });
  editor.value = initial.text || (draft && draft.text) || "SHOW TABLES";
  const runBtn = h("button#run", { type: "button", title: "Ctrl+Enter" }, "Run");
  const explainBtn = h("button#explain", { type: "button" }, "Explain");
  const cancelBtn = h("button#cancel", { type: "button", disabled: true }, "Cancel");
  const status = h("span#query-status.muted", { role: "status" });
  const errorSlot = h("div#query-error");
  const result = h("section#result", { "aria-label": "Result" });
  const historyList = h("ol.history");
  let running = null;

  const saveDraft = () => sessionStorage.setItem(DRAFT_KEY,
    JSON.stringify({ language: lang.value, text: editor.value }));
  editor.addEventListener("input", saveDraft);
  lang.addEventListener("change", saveDraft);

  function drawHistory() {
    clear(historyList, loadHistory().map((item) => h("li", h("button.link.history-item", {
      type: "button", title: item.text,
      onclick: () => { lang.value = item.language; editor.value = item.text; saveDraft();
        editor.focus(); },
    }, h("span.lang", item.language.toUpperCase()), ` ${item.text.slice(0, 80)}`))));
  }

  async function execute(language, text, { explain = false } = {}) {
    if (running) running.abort();
    const ctl = new AbortController();
    running = ctl;
    cancelBtn.disabled = false;
    runBtn.disabled = true;
    clear(errorSlot);
    status.textContent = "running…";
    const started = performance.now();
    try {
      let answer;
      if (explain && language === "kql") {
        // KQL runs as SQL: explain the statement it translates to
        const probe = await query("kql", `${text}\n| take 0`, { signal: ctl.signal });
        answer = await query("sql", `EXPLAIN ${probe.sql}`, { signal: ctl.signal });
      } else {
        answer = await query(language, explain ? `EXPLAIN ${text}` : text,
          { signal: ctl.signal });
      }
      if (!explain) remember(language, text);
      drawHistory();
      const ms = Math.round(performance.now() - started);
      status.textContent = `${answer.rows.length} rows in ${ms} ms`;
      showAnswer(answer, language, text);
    } catch (e) {
      if (e.name === "AbortError") {
        // replaced by a newer run: that one owns the status now
        if (running === ctl) {
          status.textContent = "cancelled (the server finishes the statement on its own)";
        }
      } else {
        status.textContent = "failed";
        // the previous answer's stats, chart and grid would read as this query's
        clear(result);
        errorSlot.append(errorBox(e, text));
        const pos = e.position;
        if (pos) {
          const at = offsetOf(text, pos.line, pos.column);
          editor.focus();
          editor.setSelectionRange(at, at + 1);
        }
      }
    } finally {
      if (running === ctl) {
        running = null;
        cancelBtn.disabled = true;
        runBtn.disabled = false;
      }
    }
  }

  function showAnswer(answer, language, text) {
    const downloads = h("div.downloads", "Download: ",
      h("button.link", { type: "button",
        onclick: () => download("result.csv", csv(answer), "text/csv") }, "CSV"),
      h("button.link", { type: "button",
        onclick: () => download("result.json", JSON.stringify(answer, null, 2),
          "application/json") }, "JSON"),
      h("button.link", { type: "button",
        onclick: async () => {
          const r = await query(language, text, { accept: ARROW });
          download("result.arrow", r.buffer, ARROW);
        } }, "Arrow"));
    const parts = [statsPicture(answer.stats)];
    if (answer.sql) parts.push(h("details.translated", h("summary", "SQL it ran as"),
      h("pre", answer.sql)));
    const c = chart(answer, answer.render, result.clientWidth || main.clientWidth - 40);
    if (c) parts.push(c);
    parts.push(downloads, grid(answer));
    clear(result, parts);
  }

  const run = () => execute(lang.value, editor.value);
  runBtn.addEventListener("click", run);
  explainBtn.addEventListener("click", () => execute(lang.value, editor.value,
    { explain: true }));
  cancelBtn.addEventListener("click", () => { if (running) running.abort(); });
  editorKeys(editor, run);

  clear(main,
    h("h1", "Query"),
    h("div.query-layout",
      h("div.query-main",
        h("div.toolbar", h("label", { for: "language" }, "Language "), lang, runBtn,
          explainBtn, cancelBtn, status),
        editor, errorSlot, result),
      h("aside.query-side", { "aria-label": "History" }, h("h2", "History"), historyList)));
  drawHistory();
  editor.focus();
  if (initial.run) run();
  return () => { if (running) running.abort(); };
}
