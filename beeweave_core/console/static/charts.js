// Small SVG charts for the dashboard: ticks at 1, 2, 2.5 or 5 times a power of ten, labels
// laid out so they cannot collide (one row per bar, every n-th date), and bars that keep a
// sensible width with one day or one memory of data.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const INK = "#1f2933", MUTED = "#52606d", BAR = "#1d5fa8", LINE = "#de911d";

  function s(tag, attrs, ...children) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) n.setAttribute(k, v);
    for (const c of children) if (c !== null && c !== undefined) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return n;
  }

  function niceStep(raw, integer) {
    if (!(raw > 0)) return 1;
    if (integer && raw <= 1) return 1;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    // Counts step by whole numbers: 2.5 is nice only from 25 up.
    const factors = integer && mag < 10 ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
    return factors.map((m) => m * mag).find((x) => x >= raw - 1e-9);
  }

  // Ticks from 0 to a nice maximum covering max, about `count` of them.
  function niceTicks(max, count, integer) {
    const step = niceStep((max > 0 ? max : 1) / (count || 5), integer);
    const top = Math.max(step, Math.ceil((max > 0 ? max : 1) / step - 1e-9) * step);
    const ticks = [];
    for (let i = 0; i * step <= top + step * 1e-9; i++) ticks.push(+(i * step).toPrecision(12));
    return {ticks, top, step};
  }

  // As many decimals as the step has: a step of 2.5 labels 2.5 and 7.5, not "3" and "8".
  function stepDecimals(step) {
    for (let d = 0; d < 6; d++) {
      const scaled = step * Math.pow(10, d);
      if (Math.abs(scaled - Math.round(scaled)) < 1e-9 * Math.max(1, scaled)) return d;
    }
    return 6;
  }

  function fmt(v, step) {
    const decimals = stepDecimals(step);
    return Number(v).toLocaleString("en-US", {minimumFractionDigits: decimals, maximumFractionDigits: decimals});
  }

  function svg(w, h, label) {
    return s("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": label, width: w, height: h});
  }

  function empty(container, text) {
    container.replaceChildren(Object.assign(document.createElement("p"), {className: "help", textContent: text}));
  }

  // Horizontal bars, one row per label: the labels are never drawn over each other.
  function barChart(container, rows, opts) {
    opts = opts || {};
    if (!rows.length) return empty(container, opts.empty || "");
    const w = opts.width || 520, rowH = 26, top = 8, labelW = opts.labelWidth || 150, right = 56;
    const h = top + rows.length * rowH + 28;
    const max = Math.max(...rows.map((r) => r.value));
    const {ticks, top: vmax, step} = niceTicks(max, 4, opts.integer !== false);
    const x = (v) => labelW + (v / vmax) * (w - labelW - right);
    const g = svg(w, h, opts.label || "");
    const grid = s("g", {class: "grid"}), axis = s("g", {class: "axis"});
    for (const t of ticks) {
      grid.append(s("line", {x1: x(t), x2: x(t), y1: top, y2: top + rows.length * rowH}));
      axis.append(s("text", {x: x(t), y: h - 8, "text-anchor": "middle", "font-size": 11, fill: MUTED}, fmt(t, step)));
    }
    g.append(grid, axis);
    rows.forEach((r, i) => {
      const y = top + i * rowH;
      const label = window.BW.short(r.label, 22);
      g.append(s("text", {x: labelW - 8, y: y + rowH / 2 + 4, "text-anchor": "end", "font-size": 12, fill: INK},
                 s("title", {}, r.label), label));
      const bw = Math.max(1, x(r.value) - labelW);
      g.append(s("rect", {x: labelW, y: y + 4, width: bw, height: rowH - 8, fill: r.color || BAR, rx: 2},
                 s("title", {}, `${r.label}: ${r.value}`)));
      g.append(s("text", {x: labelW + bw + 6, y: y + rowH / 2 + 4, "font-size": 12, fill: INK},
                 (opts.format || ((v) => String(v)))(r.value)));
    });
    container.replaceChildren(g);
  }

  // Every day from the first to the last (a gap counts 0); over more than a quarter, weeks
  // (from Monday), over more than two years, months: each bar stays wide enough to see.
  function buckets(growth) {
    if (!growth.length) return {unit: "day", rows: []};
    const by = new Map(growth.map((d) => [d.day, d]));
    const first = new Date(growth[0].day + "T00:00:00Z"), last = new Date(growth[growth.length - 1].day + "T00:00:00Z");
    const span = Math.round((last - first) / 864e5) + 1;
    const unit = span <= 92 ? "day" : span <= 730 ? "week" : "month";
    const keyOf = (d) => {
      if (unit === "day") return d.toISOString().slice(0, 10);
      if (unit === "month") return d.toISOString().slice(0, 7);
      const monday = new Date(d.getTime() - ((d.getUTCDay() + 6) % 7) * 864e5);
      return monday.toISOString().slice(0, 10);
    };
    const rows = [];
    let total = 0;
    for (let d = first; d <= last; d = new Date(d.getTime() + 864e5)) {
      const row = by.get(d.toISOString().slice(0, 10)), key = keyOf(d);
      if (row) total = row.total;
      if (!rows.length || rows[rows.length - 1].day !== key) rows.push({day: key, added: 0, total});
      const b = rows[rows.length - 1];
      b.added += row ? row.added : 0; b.total = total;
    }
    return {unit, rows};
  }

  // Memories added per day, week or month (bars, left axis) and the live total (line, right axis).
  function growthChart(container, growth, T) {
    const {unit, rows: data} = buckets(growth);
    if (!data.length) return empty(container, T.no_data);
    const w = 900, h = 300, left = 48, right = 56, top = 14, bottom = 56;
    const pw = w - left - right, ph = h - top - bottom;
    const a = niceTicks(Math.max(...data.map((d) => d.added)), 4, true);
    const b = niceTicks(Math.max(...data.map((d) => d.total)), 4, true);
    const slot = pw / data.length, bar = Math.min(slot * 0.7, 40);
    const cx = (i) => left + slot * (i + 0.5);
    const ya = (v) => top + ph - (v / a.top) * ph, yb = (v) => top + ph - (v / b.top) * ph;
    const g = svg(w, h, T.growth + ": " + T.growth_help);
    const grid = s("g", {class: "grid"}), axis = s("g", {class: "axis"});
    for (const t of a.ticks) {
      grid.append(s("line", {x1: left, x2: left + pw, y1: ya(t), y2: ya(t)}));
      axis.append(s("text", {x: left - 6, y: ya(t) + 4, "text-anchor": "end", "font-size": 11, fill: BAR}, fmt(t, a.step)));
    }
    for (const t of b.ticks) {
      axis.append(s("text", {x: left + pw + 6, y: yb(t) + 4, "font-size": 11, fill: "#8d5a0b"}, fmt(t, b.step)));
    }
    axis.append(s("line", {x1: left, x2: left + pw, y1: top + ph, y2: top + ph}));
    const every = Math.max(1, Math.ceil(data.length / Math.floor(pw / 84)));  // a date label is ~70px wide
    data.forEach((d, i) => {
      g.append(s("rect", {x: cx(i) - bar / 2, y: ya(d.added), width: bar, height: top + ph - ya(d.added), fill: BAR, rx: 1},
                 s("title", {}, `${d.day}: ${T.added} ${d.added}; ${T.live_total} ${d.total}`)));
      if (i % every === 0 || data.length === 1) {
        axis.append(s("text", {x: cx(i), y: top + ph + 18, "text-anchor": "middle", "font-size": 11, fill: MUTED}, d.day));
      }
    });
    const pts = data.map((d, i) => `${cx(i)},${yb(d.total)}`).join(" ");
    g.prepend(grid);
    g.append(axis, s("polyline", {points: pts, fill: "none", stroke: LINE, "stroke-width": 2.5}));
    data.forEach((d, i) => g.append(s("circle", {cx: cx(i), cy: yb(d.total), r: data.length > 60 ? 1.5 : 3.5, fill: LINE})));
    const key = s("g", {"font-size": 12});
    key.append(s("rect", {x: left, y: h - 14, width: 12, height: 10, fill: BAR}),
               s("text", {x: left + 16, y: h - 5, fill: INK}, T.added + " " + T["per_" + unit]),
               s("line", {x1: left + 200, x2: left + 220, y1: h - 9, y2: h - 9, stroke: LINE, "stroke-width": 2.5}),
               s("text", {x: left + 226, y: h - 5, fill: INK}, T.live_total));
    g.append(key);
    container.replaceChildren(g);
  }

  window.BWCharts = {niceTicks, barChart, growthChart, buckets, fmt};
})();
