"""Statistics (beeweave_core.stats) and the HTML report (beeweave_core.report), in process."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.report import render_report, write_report
from beeweave_core.server.service import MemoryService
from beeweave_core.stats import SEARCHES, StatsRecorder, compute_stats

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _open(path, clock):
    return BeeWeave(path, embedder=HashingEmbedder(32), clock=clock,
                    lifecycle=LifecycleConfig(access_flush_interval=0.0))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def filled(tmp_path, clock):
    """Three days of memories from two agents, a used memory and a few timed searches."""
    m = _open(tmp_path / "m.db", clock)
    rows = []
    for day in range(3):
        for i in range(day + 1):
            rows.append({"content": f"deploy note {day}-{i}: the api runs on kubernetes cluster {i}",
                         "user_id": "alice" if i % 2 == 0 else "bob", "agent_id": "ops-bot" if i else "docs-bot",
                         "session_id": f"s{day}", "timestamp": T0 + timedelta(days=day, hours=i),
                         "intent": "information_query" if i else None, "tags": ["deploy"]})
    m.add_many(rows)
    yield m
    m.close()


def test_counts_growth_and_distributions(filled):
    s = compute_stats(filled)
    assert s.total == 6 and s.by_status["active"] == 6 and s.by_status["pending"] == 0
    assert s.growth == [("2025-03-01", 1, 1), ("2025-03-02", 2, 3), ("2025-03-03", 3, 6)]
    assert s.by_agent == {"ops-bot": 3, "docs-bot": 3}
    assert s.by_intent == {"(none)": 3, "information_query": 3}
    assert [m.timestamp[:10] for m in s.newest[:3]] == ["2025-03-03"] * 3
    assert compute_stats(filled, user_id="bob").total == 2
    assert s.latency.count == 0 and s.used_share is None


def test_latency_percentiles_and_used_share(filled, clock):
    rec = StatsRecorder(filled, batch=1000, interval=60)
    ms = [float(x) for x in range(1, 101)]
    hits = filled.search("kubernetes cluster", user_id="alice", k=2)
    for i, v in enumerate(ms):
        rec.record_search(v, hits if i < 10 else [], user_id="alice")
    clock.now += timedelta(minutes=5)
    filled.feedback([hits[0].id], "used")  # the recorder listens for it
    s = compute_stats(filled, recorder=rec)
    assert (s.latency.count, s.latency.p50, s.latency.p95, s.latency.p99) == (
        100, *(round(float(p), 3) for p in np.percentile(ms, [50, 95, 99])))
    assert s.searches == 100 and s.searches_with_hits == 10 and s.searches_used == 10
    assert s.used_share == 0.1
    assert [m.id for m in s.hottest][:1] == [hits[0].id] and s.hottest[0].used == 1
    # A search after the last "used" signal does not count as leading to use.
    clock.now += timedelta(minutes=5)
    rec.record_search(5.0, hits, user_id="alice")
    assert compute_stats(filled, recorder=rec).searches_used == 10
    rec.close()


def test_samples_persist_roll_and_are_forgotten_with_the_user(tmp_path, clock):
    path = tmp_path / "m.db"
    m = _open(path, clock)
    svc = MemoryService(m, recorder=StatsRecorder(m, capacity=50, batch=7))
    svc.memory.add("alice prefers tea in the morning", user_id="alice")
    svc.memory.add("bob prefers coffee", user_id="bob")
    for _ in range(60):
        svc.search("tea", user_id="alice")
    svc.search("coffee", user_id="bob")
    svc.close()  # writes what is pending
    m2 = _open(path, clock)
    try:
        s = compute_stats(m2)
        assert s.searches == 50  # the newest 50: a rolling sample
        assert compute_stats(m2, user_id="bob").searches == 1
        MemoryService(m2).forget_user("alice")
        assert compute_stats(m2, user_id="alice").searches == 0
        assert [v["user_id"] for _, v in m2.backend.kv_scan(SEARCHES)] == ["bob"]
    finally:
        m2.close()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _svgs(html: str) -> dict[str, ET.Element]:
    out = {}
    for block in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        el = ET.fromstring(block)  # each chart is well-formed XML
        out[el.get("id")] = el
    return out


def test_report_is_self_contained_with_its_charts(filled, tmp_path, clock):
    rec = StatsRecorder(filled)
    for q in ("kubernetes", "deploy note", "api cluster"):
        rec.search(q, user_id="alice", k=3)
    hot = filled.search("cluster 0", k=1)[0]
    filled.feedback([hot.id], "up")
    filled.add("<script>alert(1)</script> & the api runs on kubernetes cluster 0", user_id="alice",
               agent_id="<b>evil</b>", session_id="s0", timestamp=T0)
    out = write_report(filled, tmp_path / "r.html", recorder=rec, top=3)
    html = out.read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(html)
    tags = [t for t, _ in parser.tags]
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    svgs = _svgs(html)
    assert set(svgs) == {"latency-histogram", "growth-chart", "memory-graph", "by-agent", "by-intent"}
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in svgs["latency-histogram"].iter(ns + "rect") if r.get("class") == "bar"]
    assert sum(int(b.find(ns + "title").text.rsplit(": ", 1)[1]) for b in bars) == 3
    assert len([ln for ln in svgs["latency-histogram"].iter(ns + "line") if ln.get("class") == "mark"]) == 3
    growth_bars = [r for r in svgs["growth-chart"].iter(ns + "rect") if r.get("class") == "bar"]
    assert len(growth_bars) == 3 and svgs["growth-chart"].find(ns + "polyline") is not None
    nodes = [c for c in svgs["memory-graph"].iter(ns + "circle")]
    hot_nodes = [c for c in nodes if "hot" in c.get("class", "")]
    assert hot.id in {c.get("data-id") for c in hot_nodes} and len(nodes) > len(hot_nodes)
    edges = [ln for ln in svgs["memory-graph"].iter(ns + "line") if ln.get("class") == "edge"]
    assert edges and {e.get("data-type") for e in edges} <= {"semantic", "session", "entity", "tag", "merged_into"}
    shown = {c.get("data-id") for c in nodes}
    assert all(e.get("data-source") in shown and e.get("data-target") in shown for e in edges)
    rec.close()


def test_report_of_an_empty_store_still_renders():
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        html = render_report(m)
    svgs = _svgs(html)
    assert set(svgs) >= {"latency-histogram", "growth-chart", "memory-graph"}
    assert "no searches recorded yet" in html and "no memory has been used yet" in html
