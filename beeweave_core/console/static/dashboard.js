// The dashboard: GET /stats and GET /patterns/hot drawn as cards, charts and lists. The same
// script draws `beeweave report`'s file from the numbers embedded in it (no server, no key).
"use strict";
(function () {
  const {T, el, short, when, memoryLink, scopeUser} = window.BW;
  const C = window.BWCharts;
  const $ = (x) => document.getElementById(x);
  const embedded = document.getElementById("bw-data");
  const link = (id, text) => embedded ? el("span", {title: id}, text) : memoryLink(id, text);

  function cards(st) {
    const share = st.used_share === null || st.used_share === undefined ? "–" : Math.round(st.used_share * 100) + "%";
    const items = [[T.total, st.total], [T.searches, st.searches], [T.used_share, share],
      [T.dead_letters, st.dead_letters], [T.queue, st.pending_events],
      ...Object.entries(st.by_status).map(([k, v]) => [T.status + ": " + (T["status_" + k] || k), v])];
    $("cards").replaceChildren(...items.map(([k, v]) => el("li", {}, el("b", {text: String(v)}), el("span", {text: k}))));
  }

  function latency(st) {
    const l = st.latency;
    if (!l || !l.count) return $("latency").replaceChildren(el("p", {class: "help", text: T.latency_none}));
    const rows = [["p50", l.p50], ["p95", l.p95], ["p99", l.p99], ["max", l.max]].filter(([, v]) => v !== null)
      .map(([label, value]) => ({label, value, color: label === "max" ? "#9aa5b1" : "#1d5fa8"}));
    C.barChart($("latency"), rows, {integer: false, labelWidth: 60, width: 900, label: T.latency,
      format: (v) => Number(v).toFixed(v < 10 ? 2 : 1) + " " + T.ms});
    $("latency").append(el("p", {class: "help", text: `${T.searches}: ${l.count} · ${T.mean} ${Number(l.mean).toFixed(2)} ${T.ms}`}));
  }

  function counts(id, obj, title) {
    const rows = Object.entries(obj || {}).slice(0, 12).map(([k, v]) => ({label: k === "(none)" ? T.none : k, value: v}));
    C.barChart($(id), rows, {empty: T.no_data, label: title, width: 440, labelWidth: 130});
  }

  function mini(id, items, line) {
    $(id).replaceChildren(...(items.length ? items.map(line) : [el("li", {class: "help", text: T.no_data})]));
  }

  function render(st, patterns) {
    cards(st);
    C.growthChart($("growth"), st.growth, T);
    latency(st);
    counts("by-agent", st.by_agent, T.by_agent);
    counts("by-intent", st.by_intent, T.by_intent);
    mini("hottest", st.hottest, (m) => el("li", {}, link(m.id, short(m.text, 120)),
      el("span", {class: "help"}, ` · ${T.heat} ${m.heat} · ${T.used} ${m.used} · ${T.up} ${m.up} · ${T.down} ${m.down}`)));
    mini("newest", st.newest, (m) => el("li", {}, link(m.id, short(m.text, 120)),
      el("span", {class: "help"}, ` · ${when(m.timestamp)} · ${m.agent_id || T.none}`)));
    $("hot-questions").replaceChildren(...(patterns.length ? patterns.map((p) => el("li", {},
      link(p.memory_id, short(p.query, 120)),
      el("span", {class: "help"}, " · " + Object.entries(p.counts || {}).map(([w, n]) => `${w} ${n}`).join(", ") +
         " · " + p.intent))) : [el("li", {class: "help", text: T.no_hot})]));
  }

  (async () => {
    if (embedded) {
      const data = JSON.parse(embedded.textContent);
      render(data.stats, data.patterns || []);
      return window.BW.done();
    }
    if (!window.BW.ready) return;
    try {
      const user = scopeUser();
      const [st, hot] = await Promise.all([window.BW.api("GET", "/stats", undefined, {user_id: user}),
                                           window.BW.api("GET", "/patterns/hot", undefined, {user_id: user})]);
      render(st, hot.patterns);
    } catch (e) { window.BW.fail(e); }
    window.BW.done();
  })();
})();
