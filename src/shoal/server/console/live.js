// The Live page: the server's own /metrics, scraped every REFRESH_MS without reloading
// the page. Ingest throughput by table and path (REST and OTLP requests, the Kafka and
// file-drop pipelines), Kafka lag, file-drop progress, maintenance units, and the server's
// query and staging gauges. Rates are the change between two scrapes.

import { api } from "./api.js";
import { bytes, clear, count, errorBox, h } from "./dom.js";
import { parseMetrics, series } from "./prom.js";

const REFRESH_MS = 2000;
const HISTORY = 90;     // points kept for the throughput chart
const SEP = "\u0000";

// rows by "table\0path"
function ingestRows(samples) {
  const out = new Map(series(samples, "shoal_ingest_path_rows_total", ["table", "path"]));
  for (const [kind, name] of [["kafka", "shoal_kafka_rows_total"],
    ["filedrop", "shoal_filedrop_rows_total"], ["scrape", "shoal_scrape_rows_total"]]) {
    for (const [table, v] of series(samples, name, ["table"])) out.set(`${table}${SEP}${kind}`, v);
  }
  return out;
}

function table(label, headers, rows, empty) {
  if (!rows.length) return h("p.muted", empty);
  return h("table.grid", { "aria-label": label },
    h("thead", h("tr", headers.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", rows.map((r) => h("tr", r.map((v, i) => (i === 0
      ? h("th", { scope: "row" }, v) : h("td.num", v)))))));
}

export function render(main) {
  const stamp = h("span#live-updated.muted", { role: "status" },
    "waiting for the first scrape…");
  const slots = {
    throughput: h("div"), chart: h("div.live-chart"), kafka: h("div"), filedrop: h("div"),
    maintenance: h("div"), server: h("div"), error: h("div"),
  };
  const panel = (id, title, ...content) => h(`section#${id}.panel`,
    { "aria-labelledby": `${id}-title` }, h(`h2#${id}-title`, title), ...content);
  clear(main, h("h1", "Live"), h("p", stamp), slots.error,
    panel("live-throughput", "Ingest throughput", slots.chart, slots.throughput),
    h("div.live-grid",
      panel("live-kafka", "Kafka", slots.kafka),
      panel("live-filedrop", "File-drop", slots.filedrop),
      panel("live-maintenance", "Maintenance", slots.maintenance),
      panel("live-server", "Server", slots.server)));

  let previous = null;
  let scrapes = 0;
  const history = { t: [], perTable: new Map() };
  let plot = null;
  let plotKey = "";

  function drawChart(width) {
    const names = [...history.perTable.keys()].sort();
    const key = names.join(SEP);
    const data = [history.t, ...names.map((n) => history.perTable.get(n))];
    if (!names.length || history.t.length < 2 || typeof uPlot === "undefined") return;
    if (plot && key === plotKey) { plot.setData(data); return; }
    if (plot) plot.destroy();
    plotKey = key;
    clear(slots.chart);
    plot = new uPlot({
      width: Math.max(320, width), height: 180,
      scales: { x: { time: true } },
      series: [{ label: "time" }, ...names.map((n, i) => ({
        label: `${n} rows/s`,
        stroke: ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"][i % 5],
        width: 1.5 }))],
      axes: [{}, { size: 60 }],
    }, data, slots.chart);
  }

  async function scrape() {
    let text;
    try {
      text = await api("/metrics", { text: true });
      clear(slots.error);
    } catch (e) {
      clear(slots.error, errorBox(e));
      return;
    }
    const now = Date.now() / 1000;
    const samples = parseMetrics(text);
    const rows = ingestRows(samples);
    const dt = previous ? now - previous.at : null;
    const rate = (k) => (dt && previous.rows.has(k)
      ? (rows.get(k) - previous.rows.get(k)) / dt : null);

    const perTable = new Map();
    const lines = [...rows.keys()].sort().map((k) => {
      const [t, path] = k.split(SEP);
      const r = rate(k);
      if (r != null) perTable.set(t, (perTable.get(t) || 0) + r);
      return [`${t} · ${path}`, count(rows.get(k)), r == null ? "…" : r.toFixed(1)];
    });
    clear(slots.throughput, table("Ingest throughput", ["table · path", "rows", "rows/s"],
      lines, "No rows ingested since the server started."));
    if (dt) {
      history.t.push(now);
      for (const t of perTable.keys()) {
        if (!history.perTable.has(t)) {
          history.perTable.set(t, new Array(history.t.length - 1).fill(null));
        }
      }
      for (const [t, arr] of history.perTable) arr.push(perTable.has(t) ? perTable.get(t) : null);
      if (history.t.length > HISTORY) {
        history.t.shift();
        for (const arr of history.perTable.values()) arr.shift();
      }
      drawChart(slots.throughput.clientWidth || main.clientWidth - 40);
    }

    const lag = series(samples, "shoal_kafka_lag", ["table"]);
    const krows = series(samples, "shoal_kafka_records_total", ["table"]);
    const kup = series(samples, "shoal_kafka_pipeline_up", ["table"]);
    clear(slots.kafka, table("Kafka", ["table", "records", "lag", "up"],
      [...kup.keys()].map((t) => [t, count(krows.get(t)), lag.has(t) ? count(lag.get(t)) : "—",
        kup.get(t) ? "yes" : "no"]), "No Kafka pipelines bound."));

    const f = (n) => series(samples, `shoal_filedrop_${n}`, ["table"]);
    const [files, frows, fbytes, scans, errors, fup] = ["files_total", "rows_total",
      "bytes_total", "scans_total", "scan_errors_total", "pipeline_up"].map(f);
    clear(slots.filedrop, table("File-drop", ["table", "files", "rows", "bytes", "scans",
      "scan errors", "up"], [...fup.keys()].map((t) => [t, count(files.get(t)),
      count(frows.get(t)), bytes(fbytes.get(t)), count(scans.get(t)), count(errors.get(t)),
      fup.get(t) ? "yes" : "no"]), "No file-drop pipelines bound."));

    const queue = series(samples, "shoal_maintenance_queue", ["state"]);
    const units = series(samples, "shoal_maintenance_units_total", ["kind", "outcome"]);
    clear(slots.maintenance,
      table("Maintenance queue", ["state", "units"], [...queue].map(([s, v]) => [s, count(v)]),
        "No maintenance metrics."),
      table("Maintenance units", ["kind · outcome", "units"],
        [...units].map(([k, v]) => [k.replace(SEP, " · "), count(v)]), "No units run yet."));

    const one = (n) => { const s = samples.find((x) => x.name === n); return s ? s.value : null; };
    const byStatus = new Map();
    for (const s of samples.filter((x) => x.name === "shoal_http_requests_total")) {
      byStatus.set(s.labels.status, (byStatus.get(s.labels.status) || 0) + s.value);
    }
    clear(slots.server, table("Server", ["gauge", "value"], [
      ["queries running", count(one("shoal_queries_running"))],
      ["staging pending", bytes(one("shoal_staging_pending_bytes"))],
      ["staging flushes", count(one("shoal_staging_flushes_total"))],
      ["Spark restarts", count(one("shoal_spark_restarts"))],
      ...[...byStatus].sort().map(([s, v]) => [`HTTP ${s}`, count(v)]),
    ], "—"));

    previous = { at: now, rows };
    scrapes += 1;
    main.dataset.scrapes = String(scrapes);
    stamp.textContent = `updated ${new Date().toLocaleTimeString()} · every ${REFRESH_MS / 1000} s`;
  }

  scrape();
  const timer = setInterval(scrape, REFRESH_MS);
  return () => { clearInterval(timer); if (plot) plot.destroy(); delete main.dataset.scrapes; };
}
