// The memory browser: hybrid search (POST /search) when there is search text, otherwise the
// list of memories (GET /memories), both with the same filters, a page at a time.
"use strict";
(function () {
  const {T, el, api, fail, short, tagList, memoryLink, when, splitTags} = window.BW;
  if (!window.BW.ready) return;
  const SIZE = 10, MAX_K = 100, TRAIL = "bw_trail";
  const params = new URLSearchParams(location.search);
  const fields = {q: "q", user: "f-user", agent: "f-agent", session: "f-session", tags: "f-tags",
                  since: "f-since", until: "f-until", status: "f-status", type: "f-type"};
  for (const [name, id] of Object.entries(fields)) document.getElementById(id).value = params.get(name) || "";
  // A search applies the store's "nothing relevant" gate when it has one; "ungated" turns any
  // gate off (abstain_below: 0) to list the closest memories anyway.
  const ungated = params.get("ungated") === "1";
  document.getElementById("f-ungated").checked = ungated;
  const page = Math.max(0, parseInt(params.get("page") || "0", 10) || 0);
  const list = document.getElementById("results");

  function filters() {
    const f = {};
    const v = (name) => (params.get(name) || "").trim();
    if (v("agent")) f.agent_id = v("agent");
    if (v("session")) f.session_id = v("session");
    if (v("tags")) f.tags = splitTags(v("tags"));
    if (v("since")) f.since = v("since") + "T00:00:00+00:00";
    if (v("until")) f.until = v("until") + "T23:59:59.999+00:00";
    if (v("status")) f.status = v("status");
    if (v("type")) f.type = v("type");
    return f;
  }

  function sources(hit) {
    return Object.entries(hit.sources || {}).map(([name, s]) => {
      let text = name + " #" + (s.rank + 1) + " (" + Number(s.score).toFixed(3) + ")";
      if (s.via) text += " via " + s.via + " ← " + short(s.from_id, 12);
      return text;
    }).join(" · ");
  }

  function item(chunk, hit) {
    const meta = el("div", {class: "meta"},
      hit ? el("span", {}, T.score + " ", el("span", {class: "score",
        text: hit.relevance == null ? "–" : Number(hit.relevance).toFixed(3)})) : null,
      hit ? el("span", {}, T.sources + ": " + (sources(hit) || T.none)) : null,
      el("span", {}, T.user + ": " + chunk.user_id),
      el("span", {}, T.agent + ": " + (chunk.agent_id || T.none)),
      el("span", {}, T.status + ": " + chunk.status + (chunk.pinned ? " · " + T.pinned : "")),
      el("span", {}, when(chunk.timestamp)),
      el("span", {}, tagList(chunk.tags)));
    return el("li", {"data-id": chunk.id},
      el("div", {class: "text"}, memoryLink(chunk.id, short(chunk.raw_content, 280))), meta);
  }

  function pageHref(p) {
    const u = new URL(location.href); u.searchParams.set("page", String(p)); return u.pathname + u.search;
  }

  function pager(hasNext) {
    const prev = document.getElementById("prev"), next = document.getElementById("next");
    prev.hidden = page === 0; next.hidden = !hasNext;
    if (page > 0) prev.href = pageHref(page - 1);
    if (hasNext) next.href = pageHref(page + 1);
    document.getElementById("page-no").textContent = T.page + " " + (page + 1);
  }

  async function run() {
    list.replaceChildren(el("li", {text: T.loading}));
    const q = (params.get("q") || "").trim(), user = (params.get("user") || "").trim() || null;
    try {
      if (q) {
        const k = Math.min(MAX_K, (page + 1) * SIZE + 1);
        const body = {query: q, k, user_id: user, filters: filters()};
        if (ungated) body.abstain_below = 0;
        const out = await api("POST", "/search", body);
        const hits = out.hits.slice(page * SIZE, (page + 1) * SIZE);
        list.replaceChildren(...hits.map((h) => item(h.chunk, h)));
        pager(out.hits.length > (page + 1) * SIZE);
      } else {
        const sig = JSON.stringify([...params.entries()].filter(([k]) => k !== "page" && k !== "lang"));
        let trail = JSON.parse(sessionStorage.getItem(TRAIL) || "null");
        if (!trail || trail.sig !== sig) trail = {sig, cursors: [null]};
        const p = page < trail.cursors.length ? page : 0;
        const f = filters();
        const out = await api("GET", "/memories", undefined, {
          user_id: user, agent_id: f.agent_id, session_id: f.session_id, tags: f.tags, since: f.since,
          until: f.until, status: f.status, type: f.type, limit: SIZE, cursor: trail.cursors[p]});
        trail.cursors = trail.cursors.slice(0, p + 1);
        if (out.next_cursor) trail.cursors.push(out.next_cursor);
        sessionStorage.setItem(TRAIL, JSON.stringify(trail));
        list.replaceChildren(...out.memories.map((m) => item(m, null)));
        pager(Boolean(out.next_cursor) && out.memories.length > 0);
      }
      if (!list.children.length) list.replaceChildren(el("li", {text: q && !ungated ? T.no_relevant : T.no_results}));
    } catch (e) {
      list.replaceChildren(); fail(e);
    }
    window.BW.done();
  }
  run();
})();
