// The console shell: sign-in, the page router (#/query, #/tables[/t], #/live, #/logs[/t])
// and the navigation. Each page module exports `render(main, params)`, which may return a
// function the router calls when the user leaves the page (e.g. to stop a refresh timer).

import { api, onUnauthorized, token } from "./api.js";
import { clear, errorBox, h } from "./dom.js";
import * as live from "./live.js";
import * as logs from "./logs.js";
import * as queryPage from "./query.js";
import * as tables from "./tables.js";

const main = document.getElementById("main");
const authState = document.getElementById("auth-state");
let leave = null;
let signedIn = false;

const routes = [
  [/^#\/query$/, () => queryPage.render(main)],
  [/^#\/tables$/, () => tables.renderList(main)],
  [/^#\/tables\/([^/]+)$/, (m) => tables.renderTable(main, decodeURIComponent(m[1]))],
  [/^#\/live$/, () => live.render(main)],
  [/^#\/logs$/, () => logs.render(main, null)],
  [/^#\/logs\/([^/]+)$/, (m) => logs.render(main, decodeURIComponent(m[1]))],
];

function route() {
  if (leave) { leave(); leave = null; }
  if (!signedIn) return;
  const hash = location.hash || "#/query";
  for (const [re, page] of routes) {
    const m = re.exec(hash);
    if (m) {
      markNav(hash);
      leave = page(m) || null;
      return;
    }
  }
  location.hash = "#/query";
}

function markNav(hash) {
  for (const a of document.querySelectorAll("nav a")) {
    const current = hash.startsWith(`#/${a.dataset.page}`);
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// Sign-in: the server says whether it needs a token (401 on a read) and whether the one
// given is good. Nothing is loaded until it answers 200.
async function probe() {
  try {
    await api("/v1/tables");
    return null;
  } catch (e) {
    return e;
  }
}

function showSignIn(err) {
  signedIn = false;
  if (leave) { leave(); leave = null; }
  clear(authState);
  const input = h("input#token", { type: "password", autocomplete: "off", required: true,
    "aria-describedby": "token-help" });
  const form = h("form.signin", { "aria-labelledby": "signin-title" },
    h("h1#signin-title", "Sign in"),
    h("p#token-help", "This server requires a bearer token. It is kept for this tab only " +
      "(sessionStorage) and sent with every API call."),
    h("label", { for: "token" }, "Token"), input,
    h("button", { type: "submit" }, "Sign in"),
    err && token.get() ? errorBox(err) : null);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    token.set(input.value.trim());
    await start();
  });
  clear(main, form);
  input.focus();
}

function showSignedIn() {
  signedIn = true;
  clear(authState);
  if (token.get()) {
    authState.append("signed in ", h("button.link", {
      type: "button",
      onclick: () => { token.clear(); start(); },
    }, "sign out"));
  } else {
    authState.append(h("span.muted", "no authentication (loopback)"));
  }
  route();
}

async function start() {
  const err = await probe();
  if (err && err.status === 401) { showSignIn(err); return; }
  if (err) { clear(main, errorBox(err)); return; }
  showSignedIn();
}

onUnauthorized((err) => { if (signedIn) showSignIn(err); });
window.addEventListener("hashchange", route);
start();
