"""``beeweave report``: the console's dashboard in one file that opens offline, read in Chromium."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.report import render_report, write_report
from beeweave_core.stats import StatsRecorder, compute_stats
from tests.console.browser_steps import is_nice_tick_series, overlapping, shot, text_boxes

pytestmark = pytest.mark.slow

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
EVIL = "</script><script>alert(1)</script> & <!-- the api runs on kubernetes"


@pytest.fixture
def filled() -> Any:
    with BeeWeave(embedder=HashingEmbedder(32)) as m:
        for day in range(12):
            for i in range(day % 4 + 1):
                m.add(f"note {day}-{i} about the kubernetes cluster and deploys", user_id="alice",
                      agent_id=["ops-bot", "chat-bot", None][i % 3], timestamp=T0 + timedelta(days=day, hours=i))
        m.add(EVIL, user_id="alice", agent_id="<b>evil</b>", timestamp=T0)
        m.add("用户对花生过敏。", user_id="bob", agent_id="助手", timestamp=T0 + timedelta(days=3))
        rec = StatsRecorder(m)
        for q in ("kubernetes", "deploy note", "cluster", "花生"):
            rec.search(q, k=3)
        m.feedback([rec.search("cluster 3", k=1)[0].id], "up")
        yield m, rec
        rec.close()


def _embedded(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="bw-data">(.*?)</script>', html, flags=re.S)
    assert found
    return json.loads(found.group(1))


def test_the_report_embeds_the_dashboards_numbers_and_nothing_can_break_out(filled) -> None:
    m, rec = filled
    html = render_report(m, recorder=rec, top=5)
    data = _embedded(html)
    stats = compute_stats(m, top=5)
    assert data["stats"]["total"] == stats.total == 32 and data["stats"]["by_agent"] == stats.by_agent
    assert len(data["stats"]["newest"]) == 5 and data["stats"]["latency"]["count"] == stats.latency.count == 5
    assert EVIL not in html and "<script>alert(1)" not in html  # "<" is escaped inside the JSON
    evil = _embedded(render_report(m, recorder=rec, top=40))["stats"]["newest"]
    assert EVIL in [n["text"] for n in evil]  # the text is all there, as data
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "default-src 'none'" in html  # the file may load nothing
    assert set(_embedded(render_report(m, user_id="bob"))["stats"]["by_agent"]) == {"助手"}


def test_the_report_opens_offline_and_its_charts_read_correctly(filled, page: Any, shots: Path, tmp_path: Path) -> None:
    m, rec = filled
    out = write_report(m, tmp_path / "report.html", recorder=rec)
    page.goto(out.as_uri())
    page.wait_for_selector("#growth svg")
    page.wait_for_selector("#latency svg")
    assert "32\nMemories" in page.inner_text("#cards")
    for chart in ("#growth", "#latency", "#by-agent", "#by-intent"):
        assert overlapping(text_boxes(page, chart)) == [], chart
    days = page.eval_on_selector_all("#growth .axis text[text-anchor=middle]", "els => els.map(e => e.textContent)")
    assert days[0] == "2025-03-01" and 2 <= len(days) <= 12  # thinned to fit, never on top of each other
    ticks = page.eval_on_selector_all("#growth .axis text[text-anchor=end]", "els => els.map(e => e.textContent)")
    assert is_nice_tick_series([float(t) for t in ticks]), ticks
    assert "<b>evil</b>" in page.inner_text("#by-agent")  # shown as text, not markup
    assert page.locator("#by-agent b").count() == 0
    assert "None" not in page.inner_text("#by-agent")
    shot(page, shots, "report")
    zh = write_report(m, tmp_path / "report-zh.html", recorder=rec, lang="zh")
    page.goto(zh.as_uri())
    page.wait_for_selector("#growth svg")
    assert page.get_attribute("html", "lang") == "zh-Hans" and "记忆数" in page.inner_text("#cards")
    shot(page, shots, "report-zh")


def test_a_report_of_one_memory_on_one_day_is_sensible(page: Any, shots: Path, tmp_path: Path) -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        m.add("the only memory", user_id="alice", timestamp=T0)
        out = write_report(m, tmp_path / "one.html")
    page.goto(out.as_uri())
    page.wait_for_selector("#growth svg")
    bars = page.eval_on_selector_all("#growth rect[fill='#1d5fa8']:not([height='10'])",
                                     "els => els.map(e => e.getBoundingClientRect().width)")
    plot = page.eval_on_selector("#growth svg", "e => e.getBoundingClientRect().width")
    assert len(bars) == 1 and bars[0] < plot / 10  # one bar of normal width, not the whole plot
    ticks = page.eval_on_selector_all("#growth .axis text[text-anchor=end]", "els => els.map(e => e.textContent)")
    assert ticks == ["0", "1"]
    assert "No searches recorded yet" in page.inner_text("#latency")
    shot(page, shots, "report-one")


def test_an_empty_store_still_renders(page: Any, tmp_path: Path) -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        out = write_report(m, tmp_path / "empty.html")
    page.goto(out.as_uri())
    page.wait_for_selector("#cards li")
    assert "No data yet" in page.inner_text("#growth") and "No searches recorded yet" in page.inner_text("#latency")
