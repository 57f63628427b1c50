// The automatic chart (uPlot, vendored): drawn when an answer has a time column and at
// least one numeric column. One line per numeric column, or, with string columns in the
// answer, one per group (their values joined) and numeric column. Bars when the numbers are
// counts (`count`, `count_`, `n`, `*_count`) or when a KQL render hint asks for a column or
// bar chart; lines for `timechart`/`linechart`; no chart for `render table`.

import { h } from "./dom.js";
import { isNumeric, isTime } from "./grid.js";

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
  "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const MAX_SERIES = 20;
const COUNTS = /^(count_?|n|rows|.*_count|count_.*)$/i;

// What to draw, or null: {x: [seconds], series: [{label, values}], bars}.
export function chartData(answer, render) {
  const vis = render && render.visualization;
  if (vis === "table" || vis === "card" || vis === "piechart") return null;
  const cols = answer.columns;
  const t = cols.findIndex((c) => isTime(c.type));
  if (t < 0) return null;
  const nums = cols.map((c, i) => i).filter((i) => i !== t && isNumeric(cols[i].type));
  if (!nums.length) return null;
  const groups = cols.map((c, i) => i).filter((i) => i !== t && !nums.includes(i));
  const times = [...new Set(answer.rows.map((r) => r[t]).filter((v) => v != null))]
    .map((v) => [v, Date.parse(v) / 1000]).sort((a, b) => a[1] - b[1]);
  const at = new Map(times.map(([v], i) => [v, i]));
  const series = new Map();
  for (const row of answer.rows) {
    if (row[t] == null) continue;
    const group = groups.map((g) => String(row[g])).join(" / ");
    for (const n of nums) {
      const label = [group, nums.length > 1 || !group ? cols[n].name : ""]
        .filter(Boolean).join(" ");
      if (!series.has(label)) {
        if (series.size >= MAX_SERIES) continue;
        series.set(label, new Array(times.length).fill(null));
      }
      series.get(label)[at.get(row[t])] = row[n];
    }
  }
  const bars = vis === "columnchart" || vis === "barchart" ||
    (!vis && nums.every((n) => COUNTS.test(cols[n].name)));
  return {
    x: times.map(([, s]) => s),
    series: [...series].map(([label, values]) => ({ label, values })),
    bars,
    title: render && render.properties && render.properties.title,
  };
}

export function chart(answer, render, width) {
  const data = chartData(answer, render);
  if (!data || !data.x.length || typeof uPlot === "undefined") return null;
  const { x, series, bars } = data;
  const figure = h("figure.chart", {
    dataset: { series: String(series.length), kind: bars ? "bars" : "lines" },
  });
  const caption = h("figcaption", `${data.title ? `${data.title}: ` : ""}` +
    `${series.length} series over ${x.length} time points (${bars ? "bars" : "lines"})`);
  const barPaths = bars ? uPlot.paths.bars({ size: [0.8 / Math.max(1, series.length), 40] })
    : null;
  const opts = {
    width: Math.max(320, width || 900),
    height: 280,
    scales: { x: { time: true } },
    series: [{ label: "time" }, ...series.map((s, i) => ({
      label: s.label,
      stroke: PALETTE[i % PALETTE.length],
      fill: bars ? `${PALETTE[i % PALETTE.length]}99` : undefined,
      width: bars ? 0 : 1.5,
      paths: barPaths || undefined,
      points: { show: !bars && x.length < 60 },
      spanGaps: false,
    }))],
    axes: [{}, { size: 60 }],
  };
  const target = h("div.chart-plot");
  figure.append(target, caption);
  // uPlot measures the page: build it once the figure is in the document.
  queueMicrotask(() => {
    // eslint-disable-next-line no-new
    new uPlot(opts, [x, ...series.map((s) => s.values)], target);
  });
  return figure;
}
