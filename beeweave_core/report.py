"""``beeweave report``: one self-contained HTML page about a memory.

Inline SVG only (no script, no stylesheet or font from elsewhere), so the file opens
anywhere, offline, and can be mailed around. It shows the numbers of
:func:`beeweave_core.stats.compute_stats`, a search latency histogram, the growth of the
memory per day, distributions by source agent and intent, and a picture of the memory
graph around the hottest memories (the hottest on an inner ring, the memories they are
related to around them, edges coloured by relation type).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from .records import KnowledgeChunk, Relationship, RelationType
from .stats import MemoryStats, StatsRecorder, compute_stats, heat

__all__ = ["render_report", "write_report", "EDGE_COLORS"]

EDGE_COLORS = {RelationType.SEMANTIC.value: "#4c78a8", RelationType.SESSION.value: "#72b7b2",
               RelationType.ENTITY.value: "#e45756", RelationType.TAG.value: "#54a24b",
               RelationType.MERGED_INTO.value: "#b279a2"}
_HOT, _NEIGHBOUR, _INK, _GRID = "#f2a900", "#9fb3c8", "#333", "#ddd"
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1000px;color:#222}
h1{margin-bottom:.2rem} .sub{color:#666;margin-top:0} section{margin:2rem 0}
.cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #e3e3e3;border-radius:8px;padding:.7rem 1rem}
.card b{display:block;font-size:1.4rem} table{border-collapse:collapse;width:100%;font-size:.9rem}
td,th{border-bottom:1px solid #eee;padding:.3rem .4rem;text-align:left;vertical-align:top}
svg text{font-family:inherit} .legend span{display:inline-block;margin-right:1rem}
.legend i{display:inline-block;width:1.2rem;height:.25rem;margin-right:.3rem;vertical-align:middle}
"""


def _svg(id_: str, w: int, h: int, body: Sequence[str], label: str) -> str:
    return (f'<svg id="{id_}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(label)}">' + "".join(body) + "</svg>")


def _empty(id_: str, w: int, h: int, text: str) -> str:
    return _svg(id_, w, h, [f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle" fill="#888">{escape(text)}</text>'],
                text)


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= v)


def _axes(w: int, h: int, pad: tuple[int, int, int, int], ymax: float, ylabel: str) -> list[str]:
    left, top, right, bottom = pad
    out = []
    for i in range(5):
        y = top + (h - top - bottom) * i / 4
        value = ymax * (4 - i) / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="{_GRID}"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" fill="#666">'
                   f'{value:g}</text>')
    out.append(f'<text x="12" y="{top + (h - top - bottom) / 2:.0f}" font-size="11" fill="#666" '
               f'transform="rotate(-90 12 {top + (h - top - bottom) / 2:.0f})" text-anchor="middle">{escape(ylabel)}</text>')
    return out


def latency_histogram(samples: Sequence[float], marks: Mapping[str, float | None], *, w: int = 900,
                      h: int = 260, bins: int = 24) -> str:
    """Bars of search latency (ms) with the p50 / p95 / p99 marks."""
    if not samples:
        return _empty("latency-histogram", w, h, "no searches recorded yet")
    a = np.asarray(samples, dtype=np.float64)
    hi = float(a.max()) if a.max() > 0 else 1.0
    counts, edges = np.histogram(a, bins=bins, range=(0.0, hi * 1.0001))
    left, top, right, bottom = 50, 20, 20, 40
    pw, ph = w - left - right, h - top - bottom
    ymax = _nice_max(float(counts.max()))
    body = _axes(w, h, (left, top, right, bottom), ymax, "searches")
    bw = pw / bins
    for i, c in enumerate(counts):
        bh = ph * c / ymax
        body.append(f'<rect class="bar" x="{left + i * bw + 1:.1f}" y="{top + ph - bh:.1f}" width="{bw - 2:.1f}" '
                    f'height="{bh:.1f}" fill="#4c78a8"><title>{edges[i]:.1f}-{edges[i + 1]:.1f} ms: {c}</title></rect>')
    for i in range(0, bins + 1, max(1, bins // 6)):
        x = left + i * bw
        body.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle" font-size="11" fill="#666">'
                    f'{edges[i]:.1f}</text>')
    body.append(f'<text x="{left + pw / 2}" y="{h - 6}" text-anchor="middle" font-size="11" fill="#666">ms</text>')
    for name, value in marks.items():
        if value is None:
            continue
        x = left + pw * min(value / (hi * 1.0001), 1.0)
        body.append(f'<line class="mark" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e45756" '
                    f'stroke-dasharray="4 3"/><text x="{x + 3:.1f}" y="{top + 12}" font-size="11" fill="#e45756">'
                    f'{escape(name)} {value:.1f}</text>')
    return _svg("latency-histogram", w, h, body, "search latency histogram")


def growth_chart(growth: Sequence[tuple[str, int, int]], *, w: int = 900, h: int = 260) -> str:
    """Memories added per day (bars) and the running total (line)."""
    if not growth:
        return _empty("growth-chart", w, h, "no memories yet")
    left, top, right, bottom = 50, 20, 50, 40
    pw, ph = w - left - right, h - top - bottom
    n = len(growth)
    ymax = _nice_max(max(g[2] for g in growth))
    body = _axes(w, h, (left, top, right, bottom), ymax, "memories")
    bw = pw / n
    points = []
    for i, (day, added, total) in enumerate(growth):
        bh = ph * added / ymax
        x = left + i * bw
        body.append(f'<rect class="bar" x="{x + 1:.1f}" y="{top + ph - bh:.1f}" width="{max(bw - 2, 1):.1f}" '
                    f'height="{bh:.1f}" fill="{_HOT}"><title>{escape(day)}: +{added} (total {total})</title></rect>')
        points.append(f"{x + bw / 2:.1f},{top + ph - ph * total / ymax:.1f}")
    body.append(f'<polyline class="total" points="{" ".join(points)}" fill="none" stroke="{_INK}" stroke-width="2"/>')
    for i in sorted({0, n // 2, n - 1}):
        body.append(f'<text x="{left + i * bw + bw / 2:.1f}" y="{h - bottom + 16}" text-anchor="middle" '
                    f'font-size="11" fill="#666">{escape(growth[i][0])}</text>')
    return _svg("growth-chart", w, h, body, "memory growth per day")


def bar_chart(id_: str, counts: Mapping[str, int], *, w: int = 440) -> str:
    """Horizontal bars for a distribution."""
    if not counts:
        return _empty(id_, w, 60, "none")
    items = list(counts.items())[:12]
    row, label_w = 22, 150
    h = row * len(items) + 10
    top = max(v for _, v in items) or 1
    body = []
    for i, (name, v) in enumerate(items):
        y = 5 + i * row
        bw = (w - label_w - 50) * v / top
        short = name if len(name) <= 22 else name[:21] + "…"
        body.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">{escape(short)}</text>'
                    f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{bw:.1f}" height="{row - 6}" fill="#4c78a8">'
                    f'<title>{escape(name)}: {v}</title></rect>'
                    f'<text x="{label_w + bw + 5:.1f}" y="{y + 15}" font-size="12">{v}</text>')
    return _svg(id_, w, h, body, id_.replace("-", " "))


def graph_picture(hot: Sequence[KnowledgeChunk], neighbours: Mapping[str, KnowledgeChunk],
                  edges: Sequence[Relationship], *, w: int = 900, h: int = 620) -> str:
    """The hottest memories on an inner ring, their related memories around them."""
    if not hot:
        return _empty("memory-graph", w, h, "no memory has been used yet")
    cx, cy = w / 2, h / 2
    pos: dict[str, tuple[float, float]] = {}
    r_in = 0.0 if len(hot) == 1 else min(w, h) * 0.2
    angle_of = {}
    for i, c in enumerate(hot):
        a = 2 * math.pi * i / len(hot) - math.pi / 2
        angle_of[c.id] = a
        pos[c.id] = (cx + r_in * math.cos(a), cy + r_in * math.sin(a))
    # Each neighbour sits on the outer ring near the first hot memory it is related to.
    anchor: dict[str, str] = {}
    for e in edges:
        for here, there in ((e.source_id, e.target_id), (e.target_id, e.source_id)):
            if here in angle_of and there in neighbours and there not in anchor:
                anchor[there] = here
    groups: dict[str, list[str]] = {}
    for nid in sorted(anchor, key=lambda n: (angle_of[anchor[n]], n)):
        groups.setdefault(anchor[nid], []).append(nid)
    r_out = min(w, h) * 0.42
    sector = 2 * math.pi / len(hot)
    for hid, members in groups.items():
        for j, nid in enumerate(members):
            a = angle_of[hid] + sector * 0.8 * ((j + 1) / (len(members) + 1) - 0.5)
            pos[nid] = (cx + r_out * math.cos(a), cy + r_out * math.sin(a))
    body = []
    for e in edges:
        if e.source_id in pos and e.target_id in pos:
            (x1, y1), (x2, y2) = pos[e.source_id], pos[e.target_id]
            color = EDGE_COLORS.get(e.type.value, "#999")
            body.append(f'<line class="edge" data-type="{e.type.value}" data-source="{escape(e.source_id)}" '
                        f'data-target="{escape(e.target_id)}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
                        f'y2="{y2:.1f}" stroke="{color}" stroke-width="{1 + 2 * min(float(e.weight), 1.0):.1f}" '
                        f'stroke-opacity="0.8"><title>{e.type.value} ({float(e.weight):.2f})</title></line>')
    top_heat = max(heat(c) for c in hot) or 1
    for c in hot:
        x, y = pos[c.id]
        r = 10 + 14 * heat(c) / top_heat
        body.append(_node(c, x, y, r, _HOT, "node hot", label=True))
    for nid, (x, y) in pos.items():
        if nid in neighbours:
            body.append(_node(neighbours[nid], x, y, 7, _NEIGHBOUR, "node", label=False))
    return _svg("memory-graph", w, h, body, "memory graph around the hottest memories")


def _node(c: KnowledgeChunk, x: float, y: float, r: float, fill: str, cls: str, *, label: bool) -> str:
    text = c.summary or c.raw_content
    tip = f"{c.id} [{c.user_id}] heat {heat(c)}: {text[:200]}"
    out = (f'<circle class="{cls}" data-id="{escape(c.id)}" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" '
           f'stroke="#fff" stroke-width="1.5"><title>{escape(tip)}</title></circle>')
    if label:
        short = " ".join(text.split())[:28]
        out += (f'<text x="{x:.1f}" y="{y + r + 13:.1f}" text-anchor="middle" font-size="11" '
                f'fill="{_INK}">{escape(short)}</text>')
    return out


def _graph_data(memory: Any, stats: MemoryStats, top: int,
                max_neighbours: int = 48) -> tuple[list[KnowledgeChunk], dict[str, KnowledgeChunk], list[Relationship]]:
    backend = memory.backend
    hot_ids = [m.id for m in stats.hottest[:top]]
    found = backend.get(hot_ids)
    hot = [found[i] for i in hot_ids if i in found]
    if not hot:
        return [], {}, []
    edges = backend.edges([c.id for c in hot], direction="both")
    hot_set = {c.id for c in hot}
    strength: dict[str, float] = {}
    for e in edges:
        for other in (e.source_id, e.target_id):
            if other not in hot_set:
                strength[other] = max(strength.get(other, 0.0), float(e.weight))
    keep = sorted(strength, key=lambda i: (-strength[i], i))[:max_neighbours]
    got = backend.get(keep)
    if stats.user_id is not None:  # a user's report shows only that user's memories
        got = {k: v for k, v in got.items() if v.user_id == stats.user_id}
    shown = hot_set | set(got)
    seen: set[tuple[str, str, str]] = set()
    drawn = []
    for e in backend.edges(sorted(shown), direction="both"):
        key = (e.source_id, e.target_id, e.type.value)
        if e.source_id in shown and e.target_id in shown and key not in seen:
            seen.add(key)
            drawn.append(e)
    return hot, got, drawn


def _table(rows: Sequence[Any], cols: Sequence[tuple[str, str]]) -> str:
    if not rows:
        return "<p><i>none</i></p>"
    head = "".join(f"<th>{escape(t)}</th>" for t, _ in cols)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(getattr(r, a)))}</td>" for _, a in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_report(memory: Any, *, user_id: str | None = None, top: int = 8,
                  recorder: StatsRecorder | None = None, title: str = "BeeWeave memory report") -> str:
    """The report as one HTML string."""
    stats = compute_stats(memory, user_id=user_id, top=max(top, 10), recorder=recorder)
    lat = stats.latency
    hot, neighbours, edges = _graph_data(memory, stats, top)
    cards = [("memories", stats.total), ("active", stats.by_status.get("active", 0)),
             ("pending review", stats.by_status.get("pending", 0)), ("searches recorded", stats.searches),
             ("searches that led to a used memory",
              "-" if stats.used_share is None else f"{stats.used_share:.0%}"),
             ("dead letters (failed events; retry with beeweave dead-letters retry)", stats.dead_letters),
             ("latency p50 / p95 / p99",
              "-" if lat.p50 is None else f"{lat.p50:.1f} / {lat.p95:.1f} / {lat.p99:.1f} ms")]
    legend = "".join(f'<span><i style="background:{c}"></i>{t}</span>' for t, c in EDGE_COLORS.items())
    cols = [("heat", "heat"), ("id", "id"), ("user", "user_id"), ("agent", "agent_id"), ("status", "status"),
            ("memory", "text")]
    scope = f" · user {escape(user_id)}" if user_id else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1><p class="sub">generated {escape(stats.generated_at)}{scope}</p>
<section id="summary" class="cards">{"".join(f'<div class="card"><b>{escape(str(v))}</b>{escape(k)}</div>' for k, v in cards)}</section>
<section><h2>Search latency</h2>{latency_histogram(lat.samples, {"p50": lat.p50, "p95": lat.p95, "p99": lat.p99})}</section>
<section><h2>Growth</h2><p class="sub">bars: memories added per day; line: live memories in total</p>
{growth_chart(stats.growth)}</section>
<section><h2>Memory graph around the hottest memories</h2>
<p class="legend"><span><i style="background:{_HOT};height:.8rem;width:.8rem;border-radius:50%"></i>hottest</span>{legend}</p>
{graph_picture(hot, neighbours, edges)}</section>
<section style="display:flex;gap:2rem;flex-wrap:wrap"><div><h2>By source agent</h2>{bar_chart("by-agent", stats.by_agent)}</div>
<div><h2>By intent</h2>{bar_chart("by-intent", stats.by_intent)}</div></section>
<section><h2>Hottest memories</h2>{_table(stats.hottest[:top], cols)}</section>
<section><h2>Newest memories</h2>{_table(stats.newest, cols)}</section>
{_dead_section(memory, user_id)}
</body></html>
"""


def _dead_section(memory: Any, user_id: str | None, limit: int = 50) -> str:
    """The dead letters (events whose processing failed), newest errors shown; empty when none."""
    dead_fn = getattr(memory, "dead_letters", None)
    dead = [] if dead_fn is None else [d for d in dead_fn() if user_id is None or d.event.user_id == user_id]
    if not dead:
        return ""
    rows = "".join(f"<tr><td>{escape(d.event.id)}</td><td>{escape(d.event.user_id)}</td><td>{d.attempts}</td>"
                   f"<td>{escape(d.failed_at.isoformat())}</td><td>{escape(d.error[:300])}</td></tr>"
                   for d in dead[:limit])
    more = f"<p class=\"sub\">and {len(dead) - limit} more</p>" if len(dead) > limit else ""
    return (f'<section id="dead-letters"><h2>Dead letters ({len(dead)})</h2><p class="sub">events whose '
            "processing failed; <code>beeweave dead-letters retry</code> queues them again</p>"
            f"<table><tr><th>event</th><th>user</th><th>attempts</th><th>failed at</th><th>error</th></tr>"
            f"{rows}</table>{more}</section>")


def write_report(memory: Any, path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`render_report` to ``path`` (UTF-8) and return the path."""
    out = Path(path)
    out.write_text(render_report(memory, **kwargs), encoding="utf-8")
    return out
