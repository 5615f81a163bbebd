// A memory's neighbourhood: breadth-first over GET /memories/{id}/relationships, laid out by a
// small force simulation, drawn in SVG. Pan by dragging, zoom with the wheel or the buttons,
// click (or Enter) on a memory to open it. Each edge type has its own colour and dash, the
// legend lists those present, several edge types between two memories are drawn as separate
// curves, and a label is only drawn where it does not cover another label or a node.
"use strict";
(function () {
  const {T, el, api, fail, short} = window.BW;
  if (!window.BW.ready) return;
  const NS = "http://www.w3.org/2000/svg";
  const MAX_NODES = 40;
  const STYLE = {
    semantic: ["#1d5fa8", ""], session: ["#9333ea", "7 4"], entity: ["#c2410c", "2 3"], tag: ["#15803d", "9 3 2 3"],
    merged_into: ["#7e22ce", "1 0"], supports: ["#0e7490", "12 3"], contradicts: ["#b91c1c", "4 2"],
    cites: ["#a16207", "1 4"], causes: ["#be185d", "10 2 2 2 2 2"], derived_from: ["#4d7c0f", "5 5"],
    related: ["#475569", "3 6"],
  };
  const style = (type) => STYLE[type] || ["#64748b", "2 2"];
  const $ = (x) => document.getElementById(x);
  const params = new URLSearchParams(location.search);
  const center = params.get("id"), hops = Math.min(2, Math.max(1, parseInt(params.get("hops") || "2", 10) || 2));
  $("g-id").value = center || "";
  $("g-hops").value = String(hops);

  function s(tag, attrs, ...children) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) n.setAttribute(k, v);
    for (const c of children) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return n;
  }

  async function getMemory(id) {
    try { return await api("GET", "/memories/" + encodeURIComponent(id)); } catch (e) {
      if (e.status === 404) return null;
      throw e;
    }
  }
  const rels = (id) => api("GET", "/memories/" + encodeURIComponent(id) + "/relationships").then((r) => r.relationships);

  async function neighbourhood() {
    const first = await getMemory(center);
    if (!first) return null;
    const nodes = new Map([[first.id, {chunk: first, depth: 0}]]);
    const edges = new Map();
    let frontier = [first.id], hidden = 0;
    const addEdges = (list, known) => {
      for (const r of list) {
        if (known && !(nodes.has(r.source_id) && nodes.has(r.target_id))) continue;
        const pair = [r.source_id, r.target_id].sort();
        const key = pair.join("\u0000") + "\u0000" + r.type;
        const old = edges.get(key);
        if (!old || old.weight < r.weight) edges.set(key, {a: r.source_id, b: r.target_id, type: r.type, weight: r.weight});
      }
    };
    for (let depth = 1; depth <= hops; depth++) {
      const lists = await Promise.all(frontier.map(rels));
      const wanted = [];
      for (const list of lists) {
        for (const r of list) for (const other of [r.source_id, r.target_id]) {
          if (!nodes.has(other) && !wanted.includes(other)) wanted.push(other);
        }
      }
      const room = Math.max(0, MAX_NODES - nodes.size);
      hidden += Math.max(0, wanted.length - room);
      const found = await Promise.all(wanted.slice(0, room).map(getMemory));
      const next = [];
      found.forEach((c) => { if (c) { nodes.set(c.id, {chunk: c, depth}); next.push(c.id); } });
      lists.forEach((list) => addEdges(list, true));
      frontier = next;
    }
    // Edges among the outermost memories are known only from their own lists.
    (await Promise.all(frontier.map(rels))).forEach((list) => addEdges(list, true));
    return {nodes, edges: [...edges.values()], hidden};
  }

  function layout(nodes, edges, w, h) {
    const ids = [...nodes.keys()], pos = new Map(), n = ids.length;
    const rings = new Map();
    ids.forEach((id) => { const d = nodes.get(id).depth; rings.set(d, (rings.get(d) || []).concat([id])); });
    for (const [d, ring] of rings) ring.forEach((id, i) => {
      const a = (2 * Math.PI * i) / ring.length + d * 0.7;
      pos.set(id, {x: d === 0 ? 0 : Math.cos(a) * d * 160, y: d === 0 ? 0 : Math.sin(a) * d * 120});
    });
    const k = Math.sqrt((w * h) / Math.max(1, n)) * 0.55;
    let temp = Math.min(w, h) / 8;
    for (let it = 0; it < 300; it++) {
      const disp = new Map(ids.map((id) => [id, {x: 0, y: 0}]));
      for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
        const p = pos.get(ids[i]), q = pos.get(ids[j]);
        let dx = p.x - q.x, dy = p.y - q.y, d = Math.hypot(dx, dy) || 0.01;
        const f = (k * k) / d;
        dx = (dx / d) * f; dy = (dy / d) * f;
        disp.get(ids[i]).x += dx; disp.get(ids[i]).y += dy; disp.get(ids[j]).x -= dx; disp.get(ids[j]).y -= dy;
      }
      for (const e of edges) {
        const p = pos.get(e.a), q = pos.get(e.b);
        let dx = p.x - q.x, dy = p.y - q.y, d = Math.hypot(dx, dy) || 0.01;
        const f = (d * d) / k / 3;
        dx = (dx / d) * f; dy = (dy / d) * f;
        disp.get(e.a).x -= dx; disp.get(e.a).y -= dy; disp.get(e.b).x += dx; disp.get(e.b).y += dy;
      }
      for (const id of ids) {
        if (nodes.get(id).depth === 0) continue;  // the memory asked about stays in the middle
        const p = pos.get(id), v = disp.get(id), d = Math.hypot(v.x, v.y) || 1;
        p.x += (v.x / d) * Math.min(d, temp); p.y += (v.y / d) * Math.min(d, temp);
        p.x = Math.max(-w / 2, Math.min(w / 2, p.x)); p.y = Math.max(-h / 2, Math.min(h / 2, p.y));
      }
      temp *= 0.985;
    }
    return pos;
  }

  const overlaps = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

  function placeLabels(order, pos, radius, labels) {
    const placed = [];
    const circles = order.map((id) => ({x: pos.get(id).x - radius(id), y: pos.get(id).y - radius(id),
                                        w: 2 * radius(id), h: 2 * radius(id), id}));
    for (const id of order) {
      const text = labels.get(id), p = pos.get(id), r = radius(id);
      const box = text.getBBox(), tw = box.width, th = box.height;
      const spots = [[p.x - tw / 2, p.y + r + 3], [p.x - tw / 2, p.y - r - 3 - th], [p.x + r + 4, p.y - th / 2],
                     [p.x - r - 4 - tw, p.y - th / 2]];
      let ok = false;
      for (const [x, y] of spots) {
        const b = {x: x - 2, y: y - 1, w: tw + 4, h: th + 2};
        if (placed.some((o) => overlaps(b, o)) || circles.some((c) => c.id !== id && overlaps(b, c))) continue;
        text.setAttribute("x", x); text.setAttribute("y", y + th * 0.8);
        text.previousSibling.setAttribute("x", x); text.previousSibling.setAttribute("y", y + th * 0.8);
        placed.push(b); ok = true; break;
      }
      if (!ok) { text.setAttribute("visibility", "hidden"); text.previousSibling.setAttribute("visibility", "hidden"); }
    }
  }

  function draw(g) {
    const box = $("graph"), w = 1000, h = 640;
    const pos = layout(g.nodes, g.edges, w - 160, h - 120);
    const svg = s("svg", {viewBox: `${-w / 2} ${-h / 2} ${w} ${h}`, role: "group", "aria-label": T.graph_of + " " + center});
    const view = s("g", {id: "viewport"});
    svg.append(view);
    box.replaceChildren(svg);
    const edgeLayer = s("g", {class: "edges"}), nodeLayer = s("g", {class: "nodes"}), labelLayer = s("g", {class: "labels"});
    view.append(edgeLayer, nodeLayer, labelLayer);
    const byPair = new Map();
    for (const e of g.edges) {
      const pair = [e.a, e.b].sort().join("\u0000");
      byPair.set(pair, (byPair.get(pair) || []).concat([e]));
    }
    for (const list of byPair.values()) list.forEach((e, i) => {
      const [a, b] = [e.a, e.b].sort(), p = pos.get(a), q = pos.get(b);
      const bend = (i - (list.length - 1) / 2) * 26;  // several types between two memories: side by side
      const mx = (p.x + q.x) / 2, my = (p.y + q.y) / 2, d = Math.hypot(q.x - p.x, q.y - p.y) || 1;
      const cx = mx - ((q.y - p.y) / d) * bend, cy = my + ((q.x - p.x) / d) * bend;
      const [color, dash] = style(e.type);
      edgeLayer.append(s("path", {d: `M${p.x},${p.y} Q${cx},${cy} ${q.x},${q.y}`, fill: "none", stroke: color,
        "stroke-width": 1.5 + Math.min(2.5, e.weight * 2), "stroke-dasharray": dash || null, "data-type": e.type,
        "stroke-opacity": 0.9}, s("title", {}, `${e.type} (${Number(e.weight).toFixed(2)})`)));
    });
    const degree = new Map();
    for (const e of g.edges) for (const id of [e.a, e.b]) degree.set(id, (degree.get(id) || 0) + 1);
    const radius = (id) => g.nodes.get(id).depth === 0 ? 14 : 7 + Math.min(5, degree.get(id) || 0);
    const labels = new Map();
    const order = [...g.nodes.keys()].sort((a, b) => g.nodes.get(a).depth - g.nodes.get(b).depth ||
                                                     (degree.get(b) || 0) - (degree.get(a) || 0));
    for (const id of order) {
      const {chunk, depth} = g.nodes.get(id), p = pos.get(id);
      const text = chunk.summary || chunk.raw_content, label = short(text, 26);
      const open = () => { location.href = "/ui/memory/" + encodeURIComponent(id); };
      const node = s("g", {class: "node", tabindex: "0", role: "link", "data-id": id, "aria-label": short(text, 120)},
        s("title", {}, short(text, 300)),
        s("circle", {cx: p.x, cy: p.y, r: radius(id), fill: depth === 0 ? "#f0b429" : depth === 1 ? "#1d5fa8" : "#7b93ad"}));
      node.addEventListener("click", open);
      node.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } });
      nodeLayer.append(node);
      const halo = s("text", {class: "halo", x: p.x, y: p.y}, label);
      const t = s("text", {x: p.x, y: p.y, "data-for": id, "font-weight": depth === 0 ? 600 : 400}, label);
      labelLayer.append(halo, t);
      labels.set(id, t);
    }
    placeLabels(order, pos, radius, labels);
    fit(svg, view, w, h);
    panZoom(svg, view);
    legend(g.edges);
    $("graph-count").textContent = `${g.nodes.size} ${T.nodes} · ${g.edges.length} ${T.edges}` +
      (g.hidden ? ` · ${g.hidden} ${T.more_nodes}` : "");
  }

  // Frame what was drawn: a small neighbourhood is shown larger, never smaller than it was laid out.
  function fit(svg, view, w, h) {
    const b = view.getBBox(), pad = 30;
    const bw = Math.max(b.width + 2 * pad, w * 0.55), bh = Math.max(b.height + 2 * pad, h * 0.55);
    const scale = Math.max(bw / w, bh / h), vw = w * scale, vh = h * scale;
    const cx = b.x + b.width / 2, cy = b.y + b.height / 2;
    svg.setAttribute("viewBox", `${cx - vw / 2} ${cy - vh / 2} ${vw} ${vh}`);
  }

  function panZoom(svg, view) {
    let scale = 1, tx = 0, ty = 0, drag = null;
    const apply = () => view.setAttribute("transform", `translate(${tx},${ty}) scale(${scale})`);
    const toSvg = (ev) => { const pt = svg.createSVGPoint(); pt.x = ev.clientX; pt.y = ev.clientY;
                            return pt.matrixTransform(svg.getScreenCTM().inverse()); };
    const zoom = (f, at) => {
      const next = Math.max(0.25, Math.min(6, scale * f)), c = at || {x: 0, y: 0};
      tx = c.x - ((c.x - tx) * next) / scale; ty = c.y - ((c.y - ty) * next) / scale; scale = next; apply();
    };
    svg.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, toSvg(ev)); },
                         {passive: false});
    svg.addEventListener("pointerdown", (ev) => {
      if (ev.target.closest(".node")) return;
      const p = toSvg(ev); drag = {x: p.x - tx, y: p.y - ty}; svg.classList.add("dragging");
      svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener("pointermove", (ev) => { if (!drag) return; const p = toSvg(ev); tx = p.x - drag.x; ty = p.y - drag.y; apply(); });
    const stop = () => { drag = null; svg.classList.remove("dragging"); };
    svg.addEventListener("pointerup", stop); svg.addEventListener("pointercancel", stop);
    $("zoom-in").onclick = () => zoom(1.25);
    $("zoom-out").onclick = () => zoom(1 / 1.25);
    $("zoom-reset").onclick = () => { scale = 1; tx = 0; ty = 0; apply(); };
    window.BWGraph = {state: () => ({scale, tx, ty})};
  }

  function legend(edges) {
    const counts = new Map();
    for (const e of edges) counts.set(e.type, (counts.get(e.type) || 0) + 1);
    const dot = (fill, label) => el("li", {"data-node": label}, s("svg", {width: 14, height: 14, "aria-hidden": "true"},
      s("circle", {cx: 7, cy: 7, r: 6, fill})), label);
    $("legend").replaceChildren(dot("#f0b429", T.node_center), dot("#1d5fa8", T.node_hop1), dot("#7b93ad", T.node_hop2),
                                ...[...counts.entries()].sort().map(([type, n]) => {
      const [color, dash] = style(type);
      const sw = s("svg", {width: 36, height: 10, "aria-hidden": "true"},
        s("line", {x1: 0, x2: 36, y1: 5, y2: 5, stroke: color, "stroke-width": 3, "stroke-dasharray": dash || null}));
      const name = T["edge_" + type] && T["edge_" + type] !== type ? `${T["edge_" + type]} · ${type}` : type;
      return el("li", {"data-type": type}, sw, `${name} (${n})`);
    }));
  }

  (async () => {
    if (!center) { $("graph").replaceChildren(el("p", {class: "help", text: T.graph_empty})); return window.BW.done(); }
    $("graph").replaceChildren(el("p", {class: "help", text: T.loading}));
    try {
      const g = await neighbourhood();
      if (!g) { $("graph").replaceChildren(el("p", {class: "help", text: T.not_found})); return window.BW.done(); }
      $("graph-center").textContent = short(g.nodes.get(g.nodes.keys().next().value).chunk.raw_content, 60);
      draw(g);
    } catch (e) { fail(e); }
    window.BW.done();
  })();
})();
