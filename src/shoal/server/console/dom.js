// A tiny DOM builder: h("tag.class#id", {attrs, onclick}, ...children). Text is always
// set as text (never parsed as HTML), so server values cannot inject markup.

export function h(spec, attrs = {}, ...children) {
  const [, tag = "div", rest = ""] = /^([a-z0-9]*)(.*)$/i.exec(spec);
  const el = document.createElement(tag || "div");
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  const plain = attrs !== null && typeof attrs === "object" && !Array.isArray(attrs) &&
    !(attrs instanceof Node);
  if (!plain) {
    children.unshift(attrs);
    attrs = {};
  }
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function bytes(n) {
  if (n == null) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export function count(n) {
  return n == null ? "—" : Number(n).toLocaleString("en-US");
}

export function time(seconds) {
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// An error where it happened: code, the server's message, and the position if any.
export function errorBox(err, source) {
  const box = h("div.error", { role: "alert" });
  box.append(h("strong", `${err.code || "error"}${err.status ? ` (${err.status})` : ""}`),
    h("span.message", ` ${err.message}`));
  const pos = err.position;
  if (pos && source != null) {
    const line = String(source).split("\n")[pos.line - 1];
    box.append(h("div.position", `line ${pos.line}` +
      (pos.column != null ? `, column ${pos.column}` : "")));
    if (line !== undefined && pos.column != null) {
      box.append(h("pre.caret", `${line}\n${" ".repeat(Math.max(0, pos.column - 1))}^`));
    }
  }
  return box;
}
