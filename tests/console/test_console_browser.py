"""The web console in a real browser (Debian's Chromium driven by Playwright): the main flows
a person follows, done with the keyboard where a person could, checked against the REST API;
a user-scoped key sees nothing of another user in any view; every page is screenshotted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.console.browser_steps import is_nice_tick_series, overlapping, ready, shot, sign_in, text_boxes
from tests.console.console_support import ADMIN_KEY, ALICE_KEY, PAIR_KEY, Seeded, need_cjk_font

pytestmark = pytest.mark.slow

_UNLABELLED = """() => {
  const name = (e) => (e.labels && e.labels.length) || e.getAttribute('aria-label') || e.getAttribute('aria-labelledby');
  const controls = [...document.querySelectorAll('input, select, textarea')].filter((e) => e.type !== 'hidden' && !name(e));
  const buttons = [...document.querySelectorAll('button, a[href]')].filter((e) => !(e.textContent.trim() || e.getAttribute('aria-label')));
  const images = [...document.querySelectorAll('svg[role=img]')].filter((e) => !e.getAttribute('aria-label'));
  return [...controls, ...buttons, ...images].map((e) => e.outerHTML.slice(0, 120));
}"""


def tab_to(page: Any, selector: str, *, back: bool = False, limit: int = 60) -> None:
    """Press Tab (Shift+Tab) until the focus is on ``selector``: the control is reachable by keyboard."""
    for _ in range(limit):
        if page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Shift+Tab" if back else "Tab")
    raise AssertionError(f"{selector} cannot be reached with the keyboard")


def accessible(page: Any) -> None:
    assert page.evaluate(_UNLABELLED) == [], "controls without an accessible name"
    assert page.get_attribute("html", "lang") in ("en", "zh-Hans")


def chunk(seeded: Seeded, name: str) -> dict[str, Any]:
    with seeded.server.http(ADMIN_KEY) as h:
        r = h.get(f"/api/v1/memories/{seeded.ids[name]}")
        assert r.status_code == 200, r.text
        return r.json()


def test_sign_in_search_open_a_memory_edit_its_tags_and_pin_it_with_the_keyboard(seeded: Seeded, page: Any,
                                                                                 shots: Path) -> None:
    url = seeded.server.url
    page.goto(url + "/ui/memories")
    page.wait_for_url("**/ui/login*")  # no key yet: to the sign-in page
    accessible(page)
    shot(page, shots, "login")
    page.fill("#key", "not-a-key-at-all")
    page.keyboard.press("Enter")
    page.wait_for_selector("#login-error:has-text('not accepted')")
    sign_in(page, url, ADMIN_KEY)
    page.wait_for_selector("#results li[data-id]")
    accessible(page)
    shot(page, shots, "memories")

    tab_to(page, "#q")
    page.keyboard.type("deploy runbook")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=deploy+runbook*")
    first = page.locator("#results li[data-id]").first
    first.wait_for()
    assert first.get_attribute("data-id") == seeded.ids["runbook"]
    meta = first.locator(".meta").inner_text()
    assert "relevance" in meta and "matched by" in meta and ("lexical" in meta or "vector" in meta)
    shot(page, shots, "search")

    tab_to(page, f"#results li[data-id='{seeded.ids['runbook']}'] a")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/memory/{seeded.ids['runbook']}")
    page.wait_for_selector("#memory:not([hidden])")
    accessible(page)
    assert "production" in page.inner_text("#content")
    assert page.locator("#relationships tbody tr").count() >= 1

    tab_to(page, "#tags-edit")
    page.keyboard.press("Control+A")
    page.keyboard.type("ops, runbook, 部署")
    page.keyboard.press("Enter")
    page.wait_for_selector("#status:has-text('Saved')")
    assert chunk(seeded, "runbook")["tags"] == ["ops", "runbook", "部署"]
    assert "部署" in page.inner_text("#details")  # shown at once, from the server's answer

    tab_to(page, "#pin")
    assert page.get_attribute("#pin", "aria-pressed") == "false"
    page.keyboard.press("Space")
    page.wait_for_selector("#pin[aria-pressed=true]")
    assert chunk(seeded, "runbook")["pinned"] is True
    assert page.inner_text("#pin") == "Unpin"
    shot(page, shots, "memory")


def test_expiry_archive_and_delete_are_confirmed_and_reflected(seeded: Seeded, page: Any) -> None:
    url = seeded.server.url
    with seeded.server.http(ADMIN_KEY) as h:
        mid = h.post("/api/v1/memories", json={"content": "A note to throw away.", "user_id": "alice"}).json()["id"]
    sign_in(page, url, ADMIN_KEY, next_path=f"/ui/memory/{mid}")
    page.wait_for_selector("#memory:not([hidden])")
    page.fill("#expiry-edit", "2031-05-04T03:02:01")
    page.click("#expiry-form button[type=submit]")
    page.wait_for_selector("#details dd:has-text('2031-05-04 03:02:01 UTC')")
    with seeded.server.http(ADMIN_KEY) as h:
        assert h.get(f"/api/v1/memories/{mid}").json()["expires_at"].startswith("2031-05-04T03:02:01")
        page.click("#clear-expiry")
        page.wait_for_selector("#details dd:has-text('never')")
        assert h.get(f"/api/v1/memories/{mid}").json()["expires_at"] is None

        page.click("#archive")  # asks first; Escape cancels and changes nothing
        page.wait_for_selector("#confirm-dialog[open]")
        assert page.evaluate("document.activeElement.id") == "confirm-cancel"
        page.keyboard.press("Escape")
        page.wait_for_function("!document.getElementById('confirm-dialog').open")
        assert h.get(f"/api/v1/memories/{mid}").json()["status"] == "active"
        page.click("#archive")
        page.click("#confirm-ok")
        page.wait_for_selector("#status:has-text('Archived')")
        assert h.get(f"/api/v1/memories/{mid}").json()["status"] == "archived"

        tab_to(page, "#delete")
        page.keyboard.press("Enter")
        page.wait_for_selector("#confirm-dialog[open]")
        page.keyboard.press("Tab")  # from Cancel to Confirm
        page.keyboard.press("Enter")
        page.wait_for_selector("#status:has-text('Deleted')")
        assert h.get(f"/api/v1/memories/{mid}").status_code == 404


def test_approve_a_pending_memory_and_retry_a_dead_letter(seeded: Seeded, page: Any, shots: Path) -> None:
    url = seeded.server.url
    sign_in(page, url, ADMIN_KEY, next_path="/ui/review")
    pending = f"#pending li[data-id='{seeded.ids['pending']}']"
    page.wait_for_selector(pending)
    page.wait_for_selector("#dead li[data-id='dead-alice']")
    accessible(page)
    shot(page, shots, "review")

    tab_to(page, pending + " input[type=checkbox]")
    page.keyboard.press("Space")
    tab_to(page, "#approve", back=True)
    page.keyboard.press("Enter")
    page.wait_for_selector("#status:has-text('Approved: 1')")
    page.wait_for_selector(pending, state="detached")
    assert chunk(seeded, "pending")["status"] == "active"

    seeded.extractor.broken = False  # the cause is fixed: the retry succeeds
    page.check("#dead li[data-id='dead-alice'] input[type=checkbox]")
    page.click("#retry")
    page.wait_for_selector("#status:has-text('Queued again: 1')")
    page.wait_for_selector("#dead li[data-id='dead-alice']", state="detached")
    with seeded.server.http(ADMIN_KEY) as h:
        dead = [d["event"]["id"] for d in h.get("/api/v1/dead-letters").json()["dead_letters"]]
        assert dead == ["dead-bob"]  # only the one selected was retried
        found = h.post("/api/v1/search", json={"query": "poison question about the deploy", "k": 3,
                                               "user_id": "alice"}).json()["hits"]
        assert any("poison question" in hit["chunk"]["raw_content"] for hit in found)


def test_lifecycle_flags_are_kept_or_archived(seeded: Seeded, page: Any) -> None:
    url, ids = seeded.server.url, seeded.ids
    sign_in(page, url, ADMIN_KEY, next_path="/ui/review")
    keep, archive = (f"#flags li[data-id='{ids[n]}']" for n in ("stale_keep", "stale_archive"))
    page.wait_for_selector(keep)
    assert "stale" in page.inner_text(keep) and "wifi password" in page.inner_text(keep)
    page.click(keep + " button[data-decision=keep]")
    page.wait_for_selector(keep, state="detached")
    page.click(archive + " button[data-decision=archive]")
    page.click("#confirm-ok")
    page.wait_for_selector(archive, state="detached")
    with seeded.server.http(ADMIN_KEY) as h:
        flagged = {i["chunk_id"] for i in h.get("/api/v1/review").json()["items"]}
        assert ids["stale_keep"] not in flagged and ids["stale_archive"] not in flagged and ids["bob_stale"] in flagged
    assert chunk(seeded, "stale_keep")["status"] == "active" and chunk(seeded, "stale_archive")["status"] == "archived"


def test_the_memory_list_pages_forward_and_back(seeded: Seeded, page: Any) -> None:
    url = seeded.server.url
    with seeded.server.http(ADMIN_KEY) as h:
        for i in range(13):
            h.post("/api/v1/memories", json={"content": f"dave's note number {i}", "user_id": "dave",
                                             "timestamp": f"2025-01-{i + 1:02d}T08:00:00+00:00"})
    sign_in(page, url, ADMIN_KEY, next_path="/ui/memories?user=dave")
    texts = lambda: page.eval_on_selector_all("#results li[data-id] .text", "els => els.map(e => e.textContent)")  # noqa: E731
    page.wait_for_selector("#results li[data-id]")
    assert texts() == [f"dave's note number {i}" for i in range(10)] and page.is_hidden("#prev")
    page.click("#next")
    page.wait_for_url("**page=1*")
    page.wait_for_selector("#results li[data-id]")
    assert texts() == [f"dave's note number {i}" for i in range(10, 13)] and page.is_hidden("#next")
    page.click("#prev")
    page.wait_for_url("**page=0*")
    page.wait_for_selector("#results li[data-id]")
    assert texts()[0] == "dave's note number 0"
    page.goto(url + "/ui/memories?user=dave&q=note+number")  # search results page the same way
    page.wait_for_selector("#results li[data-id]")
    first = texts()
    assert len(first) == 10 and page.is_visible("#next")
    page.click("#next")
    page.wait_for_url("**page=1*")
    page.wait_for_selector("#results li[data-id]")
    assert len(texts()) == 3 and not set(texts()) & set(first)


def test_the_dashboard_counts_and_its_charts_read_correctly(seeded: Seeded, page: Any, shots: Path) -> None:
    url = seeded.server.url
    sign_in(page, url, ADMIN_KEY, next_path="/ui/dashboard")
    page.wait_for_selector("#growth svg")
    page.wait_for_selector("#latency svg")
    accessible(page)
    with seeded.server.http(ADMIN_KEY) as h:
        stats = h.get("/api/v1/stats").json()
    cards = page.inner_text("#cards")
    assert f"{stats['total']}\nMemories" in cards and "Ingest queue" in cards
    for chart in ("#growth", "#latency", "#by-agent", "#by-intent"):
        assert overlapping(text_boxes(page, chart)) == [], chart
    # Two years of data (dave's notes are from 2025): weekly bars that can be seen, every memory counted.
    bars = page.eval_on_selector_all("#growth rect[fill='#1d5fa8']:not([height='10'])",
                                     "els => els.map(e => [e.getBoundingClientRect().width, e.textContent])")
    plot = page.eval_on_selector("#growth svg", "e => e.getBoundingClientRect().width")
    assert 2 < len(bars) <= 120 and all(2 <= w < plot / 10 for w, _ in bars), bars
    assert sum(int(t.split("added ")[1].split(";")[0]) for _, t in bars) == sum(d["added"] for d in stats["growth"])
    assert "added per week" in page.inner_text("#growth")
    ticks = page.eval_on_selector_all("#growth .axis text[text-anchor=end]", "els => els.map(e => e.textContent)")
    assert is_nice_tick_series([float(t.replace(",", "")) for t in ticks]), ticks
    lat = page.eval_on_selector_all("#latency .axis text", "els => els.map(e => e.textContent)")
    assert is_nice_tick_series([float(t.replace(",", "")) for t in lat]), lat
    assert "ops-bot" in page.inner_text("#by-agent") and "None" not in page.inner_text("#by-agent")
    newest = page.inner_text("#newest")
    assert any(m["text"][:20] in newest for m in stats["newest"][:3])
    shot(page, shots, "dashboard")


def test_the_graph_pans_zooms_has_a_legend_and_opens_a_memory(seeded: Seeded, page: Any, shots: Path) -> None:
    url = seeded.server.url
    center = seeded.ids["tea"]
    sign_in(page, url, ADMIN_KEY, next_path=f"/ui/graph?id={center}")
    page.wait_for_selector("#graph svg .node")
    accessible(page)
    nodes = page.eval_on_selector_all("#graph .node", "els => els.map(e => e.dataset.id)")
    assert center in nodes and len(nodes) >= 3
    types = set(page.eval_on_selector_all("#graph path[data-type]", "els => els.map(e => e.dataset.type)"))
    legend = set(page.eval_on_selector_all("#legend li[data-type]", "els => els.map(e => e.dataset.type)"))
    assert types and types == legend
    assert overlapping(text_boxes(page, "#graph .labels")) == []
    shot(page, shots, "graph")

    before = page.get_attribute("#viewport", "transform")
    page.click("#zoom-in")
    zoomed = page.get_attribute("#viewport", "transform")
    assert zoomed != before and "scale(1.25)" in zoomed
    box = page.locator("#graph").bounding_box()
    page.mouse.move(box["x"] + 8, box["y"] + 8)
    page.mouse.down()
    page.mouse.move(box["x"] + 120, box["y"] + 60, steps=4)
    page.mouse.up()
    assert page.get_attribute("#viewport", "transform") != zoomed  # panned
    assert overlapping(text_boxes(page, "#graph .labels")) == []  # zoom scales labels with the layout

    other = next(n for n in nodes if n != center)
    tab_to(page, f"#graph .node[data-id='{other}']")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/ui/memory/{other}")


def test_the_console_speaks_chinese_and_renders_chinese_text(seeded: Seeded, page: Any, browser: Any,
                                                             shots: Path) -> None:
    need_cjk_font()  # the glyph check below needs a CJK font installed
    url = seeded.server.url
    sign_in(page, url, ADMIN_KEY, next_path=f"/ui/memory/{seeded.ids['peanut']}")
    page.wait_for_selector("#memory:not([hidden])")
    page.select_option("#lang", "zh")
    page.wait_for_url("**lang=zh*")
    page.wait_for_selector("#memory:not([hidden])")
    assert page.get_attribute("html", "lang") == "zh-Hans"
    assert page.inner_text("nav[aria-label='栏目']").split() == ["记忆", "审核", "仪表盘", "关系图"]
    assert page.inner_text("#tags-form button") == "保存标签"
    # The glyphs come from a CJK font, not from a fallback that draws boxes.
    cdp = browser.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#content"})["nodeId"]
    fonts = [f["familyName"] for f in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]
    assert any("CJK" in f or "Han" in f for f in fonts), fonts
    shot(page, shots, "memory-zh")
    for path, name in (("/ui/dashboard", "dashboard-zh"), ("/ui/review", "review-zh"),
                       (f"/ui/graph?id={seeded.ids['peanut']}", "graph-zh")):
        page.goto(url + path)
        page.wait_for_selector("#main")
        assert page.get_attribute("html", "lang") == "zh-Hans"  # the choice is remembered
        accessible(page)
        shot(page, shots, name)


def test_a_user_scoped_key_sees_nothing_of_another_user_in_any_view(seeded: Seeded, page: Any, shots: Path) -> None:
    url, ids = seeded.server.url, seeded.ids
    sign_in(page, url, ALICE_KEY)
    page.wait_for_selector("#results li[data-id]")

    def shows_no_bob() -> None:
        ready(page)
        body = page.inner_text("body")
        assert "zebra" not in body and not any(ids[n] in body for n in ("bob", "bob_pending", "bob_stale"))
        assert page.locator(f"[data-id='{ids['bob']}'], [data-id='dead-bob']").count() == 0

    shows_no_bob()
    assert "alice" in page.inner_text("#who")
    page.goto(url + "/ui/memories?q=zebra+deploy+token+vault")
    page.wait_for_selector("#results li")
    shows_no_bob()
    page.goto(url + "/ui/memories?q=&status=pending")
    page.wait_for_selector("#results li")
    shows_no_bob()
    page.goto(url + f"/ui/memory/{ids['bob']}")
    page.wait_for_selector("#status:has-text('No such memory')")
    shows_no_bob()
    page.goto(url + f"/ui/memory/{ids['runbook']}")  # same session and tags as bob's memory
    page.wait_for_selector("#relationships tbody tr")
    shows_no_bob()
    for path in ("/ui/review", "/ui/dashboard", f"/ui/graph?id={ids['runbook']}"):
        page.goto(url + path)
        shows_no_bob()
    page.wait_for_selector("#graph .node")
    shot(page, shots, "graph-alice")
    page.goto(url + f"/ui/graph?id={ids['bob']}")
    page.wait_for_selector("#graph p:has-text('No such memory')")
    shows_no_bob()
    with seeded.server.http(ADMIN_KEY) as h:  # the admin key does see bob's memory: the test can fail
        assert "zebra" in h.get(f"/api/v1/memories/{ids['bob']}").json()["raw_content"]


def test_a_key_of_two_users_picks_the_user_the_review_and_dashboard_show(seeded: Seeded, page: Any) -> None:
    url, ids = seeded.server.url, seeded.ids
    sign_in(page, url, PAIR_KEY, next_path="/ui/review")
    ready(page)
    assert page.is_visible("#scope") and page.eval_on_selector_all("#scope option", "els => els.map(e => e.value)") \
        == ["alice", "bob"]
    assert page.locator(f"#pending li[data-id='{ids['bob_pending']}']").count() == 0  # alice first
    page.select_option("#scope", "bob")
    page.wait_for_selector(f"#pending li[data-id='{ids['bob_pending']}']")
    assert "kestrel" not in page.inner_text("#pending")
    page.goto(url + "/ui/dashboard")
    ready(page)
    assert page.input_value("#scope") == "bob"  # the choice holds across pages
    with seeded.server.http(ADMIN_KEY) as h:
        bobs = h.get("/api/v1/stats", params={"user_id": "bob"}).json()["total"]
    assert page.inner_text("#cards").startswith(f"{bobs}\nMemories")


def test_axis_labels_read_as_their_ticks_whatever_the_step(seeded: Seeded, page: Any) -> None:
    """The dashboard's latency axis labelled a step of 2.5 "0, 3, 5, 8, 10" (labels rounded
    to whole numbers for every step of 1 or more), depending on the latencies measured. The
    chart code's ticks and labels, for maxima that give each kind of step."""
    sign_in(page, seeded.server.url, ADMIN_KEY, next_path="/ui/dashboard")
    page.wait_for_selector("#latency svg")
    got = page.evaluate("""() => [10, 1, 0.9, 37, 220, 0.03].map((max) => {
        const {ticks, step} = window.BWCharts.niceTicks(max, 4, false);
        return ticks.map((t) => window.BWCharts.fmt(t, step));
    })""")
    for labels in got:
        values = [float(t.replace(",", "")) for t in labels]
        assert is_nice_tick_series(values), labels
    assert got[0] == ["0.0", "2.5", "5.0", "7.5", "10.0"]
    assert got[3] == ["0", "10", "20", "30", "40"]
