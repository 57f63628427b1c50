// The console's only way to the server: the JSON API, with the user's bearer token.
//
// The token lives in sessionStorage (gone when the tab closes). Every call carries it as
// `Authorization: Bearer`; a 401 raises `ApiError` with `unauthorized`, which the app turns
// into the sign-in prompt. Errors keep the server's document: code, message and details
// (with line/column for query errors).

const TOKEN_KEY = "shoal.token";
export const ARROW = "application/vnd.apache.arrow.stream";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, code, message, details = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }

  // Where in a statement the error is: {line, column} (1-based), or null. The server's
  // details carry it for parse errors; engine errors say "line 1 pos 7" (0-based pos).
  get position() {
    const d = this.details.find((x) => x && x.line != null);
    if (d) return { line: d.line, column: d.column ?? null };
    const m = /line (\d+),? (?:pos|col(?:umn)?) (\d+)/i.exec(this.message);
    if (!m) return null;
    const col = Number(m[2]) + (/pos/i.test(m[0]) ? 1 : 0);
    return { line: Number(m[1]), column: col };
  }
}

const listeners = new Set();
export function onUnauthorized(fn) { listeners.add(fn); }

// `path` on this origin; `body` is sent as JSON; `accept: ARROW` answers an ArrayBuffer,
// `text: true` the body as text; otherwise the parsed JSON.
export async function api(path, { method = "GET", body, signal, accept, text = false } = {}) {
  const headers = {};
  const t = token.get();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (accept) headers.Accept = accept;
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: "no-store",
  });
  if (!r.ok) {
    let doc = null;
    try { doc = await r.json(); } catch { doc = null; }
    const e = doc && doc.error ? doc.error : { code: `http_${r.status}`, message: r.statusText };
    const err = new ApiError(r.status, e.code, e.message, e.details || []);
    if (r.status === 401) listeners.forEach((fn) => fn(err));
    throw err;
  }
  if (accept === ARROW) {
    return { buffer: await r.arrayBuffer(), stats: r.headers.get("X-Shoal-Stats") };
  }
  return text ? r.text() : r.json();
}

const BUSY_RETRIES = 5;

// Resolves after `seconds`, or rejects with an AbortError when `signal` aborts first.
function pause(seconds, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) { reject(new DOMException("aborted", "AbortError")); return; }
    const t = setTimeout(resolve, seconds * 1000);
    if (signal) {
      signal.addEventListener("abort", () => {
        clearTimeout(t);
        reject(new DOMException("aborted", "AbortError"));
      }, { once: true });
    }
  });
}

// One statement: {sql} or {kql}; the answer document of POST /v1/query. A 429
// `too_many_queries` is retried a few times, a second apart: the statements of a search the
// user has just replaced (aborted here) hold their query slots until the server sees them
// go, and a new search must not fail because of them.
export async function query(language, text, { signal, accept } = {}) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await api("/v1/query", { method: "POST", body: { [language]: text }, signal,
        accept });
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== "too_many_queries" ||
          attempt >= BUSY_RETRIES) throw e;
      await pause(1, signal);
    }
  }
}

export function quote(name) {
  return "`" + String(name).replaceAll("`", "``") + "`";
}
