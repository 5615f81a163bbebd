// Review: pending memories (approve or reject several at once), memories the lifecycle flagged
// (keep, archive or delete each), and dead letters (retry the selected or all). Both lists come
// from the one review flow, GET /review by reason, and every decision is POST /review/decide.
"use strict";
(function () {
  const {T, el, api, say, fail, confirmDialog, when, short, memoryLink, scopeUser} = window.BW;
  if (!window.BW.ready) return;
  const $ = (x) => document.getElementById(x);
  const user = scopeUser();

  function checkItem(id, label, body) {
    const box = el("input", {type: "checkbox", value: id, "aria-label": T.select + " " + label});
    return el("li", {"data-id": id}, box, el("div", {class: "body"}, body));
  }
  const checked = (list) => [...$(list).querySelectorAll("input[type=checkbox]:checked")].map((b) => b.value);
  function selectAll(allBox, list) {
    $(allBox).addEventListener("change", () => {
      for (const b of $(list).querySelectorAll("input[type=checkbox]")) b.checked = $(allBox).checked;
    });
  }
  const empty = (text) => el("li", {class: "empty", text});

  async function pending() {
    const out = await api("GET", "/review", undefined, {user_id: user, reason: "pending", limit: 200});
    const chunks = out.items.map((i) => i.chunk);
    $("pending-all").checked = false;
    $("pending").replaceChildren(...(chunks.length ? chunks.map((c) => checkItem(c.id, short(c.raw_content, 40),
      [el("div", {class: "text"}, memoryLink(c.id, short(c.raw_content, 300))),
       el("div", {class: "meta"}, T.user + ": " + c.user_id, " · ", T.agent + ": " + (c.agent_id || T.none),
          " · ", when(c.timestamp))])) : [empty(T.no_pending)]));
  }

  async function flags() {
    const out = await api("GET", "/review", undefined,
                          {user_id: user, reason: ["stale", "expired", "verify", "fact_conflict"], limit: 1000});
    const items = out.items.map((i) => {
      const text = i.chunk.raw_content;
      const act = (decision) => el("button", {type: "button", class: decision === "delete" ? "danger" : null,
        "data-decision": decision, onclick: () => resolve(i.chunk_id, decision, text)}, T[decision]);
      return el("li", {"data-id": i.chunk_id}, el("div", {class: "body"},
        el("div", {class: "text"}, memoryLink(i.chunk_id, short(text, 300))),
        el("div", {class: "meta"}, T.reasons + ": " + i.reasons.join(", "), " · ", T.flagged_at + " " + when(i.flagged_at))),
        el("div", {class: "row"}, act("keep"), act("archive"), act("delete")));
    });
    $("flags").replaceChildren(...(items.length ? items : [empty(T.no_flags)]));
  }

  async function resolve(id, decision, text) {
    if (decision !== "keep" && !(await confirmDialog((decision === "delete" ? T.confirm_delete : T.confirm_archive) +
        " " + short(text, 60)))) return;
    try {
      await api("POST", "/review/decide", {ids: [id], decision});
      say(T[decision] + ": " + short(text, 60));
      await flags();
    } catch (e) { fail(e); }
  }

  async function dead() {
    const out = await api("GET", "/dead-letters", undefined, {user_id: user, limit: 200});
    $("dead-all").checked = false;
    $("dead").replaceChildren(...(out.dead_letters.length ? out.dead_letters.map((d) => checkItem(d.event.id,
      short(d.event.query || d.event.id, 40),
      [el("div", {class: "text", text: short(d.event.query || "", 200) + (d.event.response ? " → " + short(d.event.response, 120) : "")}),
       el("div", {class: "meta"}, T.event + " " + d.event.id, " · ", T.user + ": " + d.event.user_id, " · ",
          T.attempts + ": " + d.attempts, " · ", T.failed_at + " " + when(d.failed_at)),
       el("pre", {class: "error", text: short(d.error, 400)})])) : [empty(T.no_dead)]));
  }

  $("approve").addEventListener("click", async () => {
    const ids = checked("pending");
    if (!ids.length) return;
    try {
      const out = await api("POST", "/review/decide", {ids, decision: "keep"});
      say(T.approved + ": " + out.ids.length);
      await pending();
    } catch (e) { fail(e); }
  });
  $("reject").addEventListener("click", async () => {
    const ids = checked("pending");
    if (!ids.length || !(await confirmDialog(T.confirm_reject))) return;
    try {
      const out = await api("POST", "/review/decide", {ids, decision: "delete"});
      say(T.rejected + ": " + out.ids.length);
      await pending();
    } catch (e) { fail(e); }
  });
  async function retry(ids) {
    try {
      const out = await api("POST", "/dead-letters/retry", ids === null ? {} : {ids});
      say(T.retried + ": " + out.retried);
      await api("POST", "/flush", undefined, {timeout: 5});
      await dead();
    } catch (e) { fail(e); }
  }
  $("retry").addEventListener("click", () => { const ids = checked("dead"); if (ids.length) retry(ids); });
  $("retry-all").addEventListener("click", () => retry(null));
  selectAll("pending-all", "pending");
  selectAll("dead-all", "dead");

  Promise.all([["pending", pending], ["flags", flags], ["dead", dead]].map(([name, load]) => {
    $(name).replaceChildren(empty(T.loading));
    return load().catch((e) => { $(name).replaceChildren(); fail(e); });
  })).then(window.BW.done);
})();
