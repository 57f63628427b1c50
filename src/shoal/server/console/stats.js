// The pruning stats of an answer as a picture: for extents and for blocks, one bar split
// into pruned (skipped without reading) and read, with the counts in words beside it;
// then bytes read and the engine that ran the statement, with its reason.

import { bytes, count, h } from "./dom.js";

function bar(level, considered, pruned, read) {
  const total = Math.max(1, considered);
  const part = (cls, n, what) => {
    const el = h(`span.${cls}`, { title: `${count(n)} ${what}` });
    el.style.width = `${(100 * n) / total}%`;
    return el;
  };
  // what the cascade left unread among those it did not prune (e.g. a LIMIT stopped early)
  const other = Math.max(0, considered - pruned - read);
  return h("div.stat-row", { dataset: { level } },
    h("span.stat-label", level),
    h("span.stat-bar", { role: "img",
      "aria-label": `${level}: ${considered} considered, ${pruned} pruned, ${read} read` },
    part("pruned", pruned, "pruned"), part("read", read, "read"),
    other ? part("unread", other, "not read") : null),
    h("span.stat-text",
      `${count(considered)} considered · ${count(pruned)} pruned · ${count(read)} read`));
}

export function statsPicture(stats) {
  if (!stats) return null;
  const fig = h("figure.stats", { "aria-label": "Pruning stats" });
  fig.append(
    bar("extents", stats.extents_considered, stats.extents_pruned, stats.extents_read),
    bar("blocks", stats.blocks_considered, stats.blocks_pruned, stats.blocks_read),
    h("div.stat-foot",
      h("span.bytes", `${bytes(stats.bytes_read)} read`),
      stats.engine ? h("span.engine", { title: stats.engine_reason || "" },
        `engine: ${stats.engine}`) : null,
      stats.engine_reason ? h("span.muted", ` (${stats.engine_reason})`) : null,
      stats.truncated ? h("span.warn", ` truncated by ${stats.truncated_by}`) : null));
  if (stats.scans && stats.scans.length > 1) {
    fig.append(h("details", h("summary", `${stats.scans.length} scans`),
      h("ul", stats.scans.map((s) => h("li",
        `${s.table}${s.alias && s.alias !== s.table ? ` as ${s.alias}` : ""}: ` +
        `${s.extents_read}/${s.extents_considered} extents, ` +
        `${s.blocks_read}/${s.blocks_considered} blocks, ${bytes(s.bytes_read)}` +
        (s.pushed ? ` — pushed ${s.pushed}` : ""))))));
  } else if (stats.scans && stats.scans.length === 1 && stats.scans[0].pushed) {
    fig.append(h("div.muted.pushed", `pushed: ${stats.scans[0].pushed}`));
  }
  return fig;
}
