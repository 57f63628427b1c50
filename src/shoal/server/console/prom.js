// Prometheus text exposition format (what GET /metrics answers) -> samples.

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

// [{name, labels: {k: v}, value}], comments and blank lines skipped.
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, k, v] of (m[2] || "").matchAll(LABEL)) {
      labels[k] = v.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

// Samples of `name`, keyed by the values of `keys` joined with "\u0000".
export function series(samples, name, keys) {
  const out = new Map();
  for (const s of samples) {
    if (s.name !== name) continue;
    out.set(keys.map((k) => s.labels[k] ?? "").join("\u0000"), s.value);
  }
  return out;
}
