// The automatic chart (uPlot, vendored): drawn when an answer has a time column and at
// least one numeric column. One line per numeric column, or, with string columns in the
// answer, one per group (their values joined) and numeric column. Bars when the numbers are
// counts (`count`, `count_`, `n`, `*_count`) or when a KQL render hint asks for a column or
// bar chart; lines for `timechart`/`linechart`; no chart for `render table`.
//
// Bars of several series are stacked (each group's bar sits on the one below, in opaque
// colours; the legend lists them top of the stack first and shows each one's own value),
// and the y-axis of bars starts at 0, so a bar's height is its value.

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

// Running totals of `series` (bottom first) for a stacked bar chart: a time point where
// every series is null stays null.
export function stack(series) {
  const out = [];
  let below = null;
  for (const s of series) {
    const sums = s.values.map((v, i) => {
      const base = below ? below[i] : null;
      if (v == null) return base;
      return (base || 0) + v;
    });
    out.push(sums);
    below = sums;
  }
  return out;
}

// The y-range of bars: from 0 (or below, for negative values) to a little over the top.
export function barRange(u, min, max) {
  const lo = Math.min(0, min == null ? 0 : min);
  const hi = Math.max(0, max == null ? 0 : max);
  return hi === lo ? [lo, lo + 1] : [lo, hi + (hi - lo) * 0.05];
}

export function chart(answer, render, width) {
  const data = chartData(answer, render);
  if (!data || !data.x.length || typeof uPlot === "undefined") return null;
  const { x, series, bars } = data;
  const stacked = bars && series.length > 1;
  const figure = h("figure.chart", {
    dataset: { series: String(series.length), kind: bars ? "bars" : "lines",
      layout: stacked ? "stacked" : "single" },
  });
  const caption = h("figcaption", `${data.title ? `${data.title}: ` : ""}` +
    `${series.length} series over ${x.length} time points ` +
    `(${stacked ? "stacked bars" : bars ? "bars" : "lines"})`);
  const colour = (i) => PALETTE[i % PALETTE.length];
  // drawn tallest (the whole stack) first, so each lower part is painted over it
  const order = series.map((s, i) => i);
  if (stacked) order.reverse();
  const sums = stacked ? stack(series) : series.map((s) => s.values);
  const opts = {
    width: Math.max(320, width || 900),
    height: 280,
    scales: { x: { time: true }, y: bars ? { range: barRange } : {} },
    series: [{ label: "time" }, ...order.map((i) => {
      const s = {
        label: series[i].label,
        stroke: colour(i),
        fill: stacked ? colour(i) : bars ? `${colour(i)}99` : undefined,
        width: bars ? 0 : 1.5,
        paths: bars ? uPlot.paths.bars({ size: [0.8, 60] }) : undefined,
        points: { show: !bars && x.length < 60 },
        spanGaps: false,
      };
      // the legend shows the series' own value, not the running total it is drawn at
      if (stacked) {
        s.value = (u, v, si, idx) => (idx == null || series[i].values[idx] == null
          ? "--" : series[i].values[idx]);
      }
      return s;
    })],
    axes: [{}, { size: 60 }],
    // where the y-axis starts, once drawn (the tests read it; so can a curious user)
    hooks: { draw: [(u) => { figure.dataset.yMin = String(u.scales.y.min); }] },
  };
  figure.colours = Object.fromEntries(series.map((s, i) => [s.label, colour(i)]));
  const target = h("div.chart-plot");
  figure.append(target, caption);
  // uPlot measures the page: build it once the figure is in the document.
  queueMicrotask(() => {
    figure.uplot = new uPlot(opts, [x, ...order.map((i) => sums[i])], target);
  });
  return figure;
}
