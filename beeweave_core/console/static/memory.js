// One memory: what it says, its details, history and relationships; edit content and tags,
// pin, expiry, archive, delete. After every change the page shows what the server answered.
"use strict";
(function () {
  const {T, el, api, say, fail, confirmDialog, when, short, splitTags, memoryLink} = window.BW;
  if (!window.BW.ready) return;
  const id = document.body.dataset.memoryId;
  const path = "/memories/" + encodeURIComponent(id);
  const $ = (x) => document.getElementById(x);
  let chunk = null;

  function localInput(iso) {  // datetime-local shows UTC here: the page says so in the label's value
    return iso ? new Date(iso).toISOString().slice(0, 19) : "";
  }

  function show(c) {
    chunk = c;
    $("memory-title").textContent = short(c.summary || c.raw_content, 80);
    $("content").textContent = c.raw_content;
    $("content-edit").value = c.raw_content;
    $("tags-edit").value = (c.tags || []).join(", ");
    $("expiry-edit").value = localInput(c.expires_at);
    const pin = $("pin");
    pin.setAttribute("aria-pressed", String(Boolean(c.pinned)));
    pin.textContent = c.pinned ? T.unpin : T.pin;
    const archived = c.status === "archived";
    $("archive").textContent = archived ? T.restore : T.archive;
    $("graph-link").href = "/ui/graph?id=" + encodeURIComponent(c.id);
    const rows = [[T.id, c.id], [T.user, c.user_id], [T.agent, c.agent_id || T.none],
      [T.session, c.session_id || T.none], [T.status, c.status + (c.pinned ? " · " + T.pinned : "")],
      [T.type, c.processed_content ? c.processed_content.type : "text"], [T.intent, c.intent || T.none],
      [T.timestamp, when(c.timestamp)], [T.expiry, when(c.expires_at)], [T.tags, (c.tags || []).join(", ") || T.none],
      [T.entities, (c.entities || []).join(", ") || T.none], [T.summary, c.summary || T.none],
      [T.weight, Number(c.weight).toFixed(3)], [T.confidence, Number(c.confidence).toFixed(2)],
      [T.access_count, c.access_count]];
    $("details").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {text: String(v)})]));
    const fb = (c.metadata && c.metadata.feedback) || {};
    $("feedback").replaceChildren(...["used", "up", "down"].map((k) =>
      el("li", {"data-kind": k}, el("b", {text: String(fb[k] || 0)}), " " + T[k])));
    const meta = Object.assign({}, c.metadata || {});
    $("metadata").textContent = JSON.stringify(meta, null, 2);
    $("memory").hidden = false;
  }

  async function history() {
    const out = await api("GET", path + "/history");
    $("history").replaceChildren(...(out.versions.length ? out.versions.map((v) => el("li", {},
      el("div", {class: "meta"}, T.replaced_at + " " + when(v.replaced_at) + " · " + T.reason + ": " + (v.reason || T.none)),
      el("div", {class: "content", text: v.chunk.raw_content}))) : [el("li", {text: T.no_history})]));
  }

  async function relationships() {
    const out = await api("GET", path + "/relationships");
    const body = $("relationships").querySelector("tbody");
    const others = [...new Set(out.relationships.map((r) => r.source_id === id ? r.target_id : r.source_id))];
    const texts = new Map();
    await Promise.all(others.slice(0, 60).map(async (o) => {
      try { texts.set(o, (await api("GET", "/memories/" + encodeURIComponent(o))).raw_content); } catch (e) { /* gone */ }
    }));
    body.replaceChildren(...(out.relationships.length ? out.relationships.map((r) => {
      const outgoing = r.source_id === id, other = outgoing ? r.target_id : r.source_id;
      return el("tr", {}, el("td", {text: r.type}), el("td", {text: outgoing ? "→" : "←"}),
        el("td", {}, memoryLink(other, texts.has(other) ? short(texts.get(other), 90) : other)),
        el("td", {text: Number(r.weight).toFixed(2)}));
    }) : [el("tr", {}, el("td", {colspan: "4", text: T.no_relationships}))]));
  }

  async function change(changes, message) {
    try {
      show(await api("PATCH", path, changes));
      say(message || T.saved);
      await history();
    } catch (e) { fail(e); }
  }

  $("content-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    change({content: $("content-edit").value});
  });
  $("tags-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    change({tags: splitTags($("tags-edit").value)});
  });
  $("expiry-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("expiry-edit").value;
    if (v) change({expires_at: v + (v.length === 16 ? ":00" : "") + "+00:00"});
  });
  $("clear-expiry").addEventListener("click", () => change({expires_at: null}));
  $("pin").addEventListener("click", () => change({pinned: !chunk.pinned}));
  $("archive").addEventListener("click", async () => {
    if (chunk.status === "archived") return change({status: "active"});
    if (await confirmDialog(T.confirm_archive)) change({status: "archived"}, T.archived);
  });
  $("delete").addEventListener("click", async () => {
    if (!(await confirmDialog(T.confirm_delete))) return;
    try {
      await api("DELETE", path);
      $("memory").hidden = true;
      $("memory-title").textContent = T.deleted;
      say(T.deleted);
    } catch (e) { fail(e); }
  });

  (async () => {
    try {
      show(await api("GET", path));
      await Promise.all([history(), relationships()]);
    } catch (e) {
      if (e.status === 404) { $("memory-title").textContent = T.not_found; say(T.not_found); } else fail(e);
    }
    window.BW.done();
  })();
})();
