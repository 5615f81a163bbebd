// What every console page shares: the API key, calls to the REST API, safe DOM building,
// the status line, the confirm dialog and the language switch. No framework, no build.
"use strict";
(function () {
  const T = JSON.parse(document.getElementById("bw-strings").textContent);
  const KEY = "bw_key", ME = "bw_me", SCOPE = "bw_scope";

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c !== null && c !== undefined) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.detail) || ("HTTP " + status));
      this.status = status; this.body = body;
    }
  }

  function signOut() {
    sessionStorage.removeItem(KEY); sessionStorage.removeItem(ME); sessionStorage.removeItem(SCOPE);
  }

  function toLogin() {
    location.href = "/ui/login?next=" + encodeURIComponent(location.pathname + location.search);
  }

  async function api(method, path, body, params, key) {
    const url = new URL("/api/v1" + path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v === null || v === undefined || v === "") continue;
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, one);
    }
    const headers = {"X-API-Key": key || sessionStorage.getItem(KEY) || ""};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(url, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) {
      if (!key && (r.status === 401 || (r.status === 403 && data && /not recognised/.test(data.detail || "")))) {
        signOut(); toLogin();
      }
      throw new ApiError(r.status, data);
    }
    return data;
  }

  function me() { return JSON.parse(sessionStorage.getItem(ME) || "null"); }

  // The one user a route that takes one user should ask about: the key's only user, or the one
  // picked in the header when the key covers several; null for a key of the whole tenant.
  function scopeUser() {
    const m = me();
    if (!m || !m.users) return null;
    if (m.users.length === 1) return m.users[0];
    return sessionStorage.getItem(SCOPE) || m.users[0];
  }

  const statusLine = () => document.getElementById("status");
  function say(text) { const s = statusLine(); s.classList.remove("bad"); s.textContent = text; }
  function fail(err) {
    const s = statusLine(); s.classList.add("bad");
    s.textContent = T.error + ": " + (err && err.message ? err.message : String(err));
  }

  function confirmDialog(text) {
    const dialog = document.getElementById("confirm-dialog");
    document.getElementById("confirm-text").textContent = text;
    const opener = document.activeElement;
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => {
        resolve(dialog.returnValue === "ok");
        if (opener && opener.focus) opener.focus();
      }, {once: true});
      dialog.returnValue = "";
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
    });
  }

  function when(iso) {
    if (!iso) return T.never;
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  // Cut long text at a word boundary (any character boundary for CJK), never mid-word.
  function short(text, n) {
    text = String(text || "").replace(/\s+/g, " ").trim();
    if (text.length <= n) return text;
    let cut = text.slice(0, n - 1);
    const space = cut.lastIndexOf(" ");
    if (space > n * 0.5 && !/[\u3000-\u9fff\uff00-\uffef]/.test(text.charAt(n - 1))) cut = cut.slice(0, space);
    return cut.replace(/[\s,.;:，。；：]+$/, "") + "…";
  }

  function tagList(tags) { return (tags || []).map((t) => el("span", {class: "tag", text: t})); }
  function memoryLink(id, text) { return el("a", {href: "/ui/memory/" + encodeURIComponent(id)}, text || id); }
  function splitTags(text) { return String(text || "").split(/[,，]/).map((s) => s.trim()).filter(Boolean); }

  function header() {
    const lang = document.getElementById("lang");
    if (lang) {  // not in beeweave report's file, which is written in one language
      lang.addEventListener("change", () => {
        const u = new URL(location.href); u.searchParams.set("lang", lang.value); location.href = u.toString();
      });
    }
    const out = document.getElementById("sign-out");
    if (!out) return true;
    if (!sessionStorage.getItem(KEY)) { toLogin(); return false; }
    out.addEventListener("click", () => { signOut(); location.href = "/ui/login"; });
    const m = me();
    if (m) {
      document.getElementById("who").textContent = T.signed_in_as + " " + m.tenant + " · " +
        (m.users ? m.users.join(", ") : T.all_users);
      if (m.users && m.users.length > 1) {
        const box = document.getElementById("scope-box"), sel = document.getElementById("scope");
        for (const u of m.users) sel.append(el("option", {value: u, selected: u === scopeUser()}, u));
        box.hidden = false;
        sel.addEventListener("change", () => { sessionStorage.setItem(SCOPE, sel.value); location.reload(); });
      }
    }
    return true;
  }

  // Marks the page as drawn (data-ready), whatever the outcome: tests wait for it.
  function done() { document.body.dataset.ready = "1"; }

  window.BW = {T, el, api, ApiError, me, scopeUser, say, fail, confirmDialog, when, short, tagList, memoryLink,
               splitTags, signOut, done, KEY, ME, ready: header()};
})();
