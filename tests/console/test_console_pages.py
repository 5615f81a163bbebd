"""The console's pages and the routes it added, without a browser: what is served, in which
language, with which policy; that it needs nothing from elsewhere; that every label the
pages use exists in both languages; ``GET /api/v1/me`` and the list's ``type`` filter."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from beeweave_core.console.i18n import MESSAGES, pick_language
from beeweave_core.server import ServerConfig
from tests.console.console_support import ADMIN_KEY, ALICE_KEY, KEYS
from tests.service.service_support import EMBEDDER, LiveServer, start_server

CONSOLE = Path(__file__).resolve().parents[2] / "beeweave_core" / "console"
PAGES = ["/ui/login", "/ui/memories", "/ui/memory/abc", "/ui/review", "/ui/dashboard", "/ui/graph"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = start_server(ServerConfig(tmp_path_factory.mktemp("pages"), KEYS, embedder=EMBEDDER))
    yield srv
    srv.stop()


@pytest.mark.slow
def test_every_page_is_served_with_a_policy_that_allows_only_this_server(live: LiveServer) -> None:
    with live.http() as h:
        assert h.get("/ui", follow_redirects=False).headers["location"] == "/ui/memories"
        for path in PAGES:
            r = h.get(path)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
            csp = r.headers["content-security-policy"]
            assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
            for ref in re.findall(r'(?:src|href)="([^"]+)"', r.text):
                assert ref.startswith(("/ui/", "#", "data:")), f"{path} refers to {ref} outside the console"
                if ref.startswith("/ui/static/"):
                    assert h.get(ref).status_code == 200, ref
        assert h.get("/ui/static/nothing.js").status_code == 404


def test_the_console_names_nothing_on_another_host() -> None:
    for f in sorted(CONSOLE.rglob("*")):
        if f.suffix in (".html", ".js", ".css", ".py"):
            urls = set(re.findall(r"https?://[^\s\"'`)]+", f.read_text()))
            assert urls <= {"http://www.w3.org/2000/svg"}, f"{f.name}: {urls}"  # the SVG namespace is a name


def test_every_label_the_pages_use_exists_in_both_languages() -> None:
    used: set[str] = set()
    for f in CONSOLE.rglob("*.html"):
        used |= set(re.findall(r"\bt\.(\w+)", f.read_text()))
    for f in CONSOLE.rglob("*.js"):
        used |= set(re.findall(r"\bT\.(\w+)", f.read_text()))
    assert used and "search" in used
    for lang, strings in MESSAGES.items():
        assert used - set(strings) == set(), lang
    assert set(MESSAGES["en"]) == set(MESSAGES["zh"])
    assert all(MESSAGES["en"][k] != MESSAGES["zh"][k] for k in ("memories", "search", "approve_selected"))


def test_the_language_follows_the_query_then_the_cookie_then_the_browser(live: LiveServer) -> None:
    assert pick_language(None, None, "zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert pick_language(None, None, "de-DE,en;q=0.5") == "en"
    assert pick_language("en", "zh", "zh-CN") == "en" and pick_language(None, "zh", "en") == "zh"
    assert pick_language("xx", None, None) == "en"
    with live.http() as h:
        r = h.get("/ui/memories", params={"lang": "zh"})
        assert '<html lang="zh-Hans">' in r.text and "记忆" in r.text and r.cookies.get("bw_lang") == "zh"
        assert '<html lang="zh-Hans">' in h.get("/ui/review").text  # the cookie remembers the choice
        assert '<html lang="en">' in h.get("/ui/review", params={"lang": "en"}).text


def test_a_memory_id_in_the_page_address_is_escaped(live: LiveServer) -> None:
    with live.http() as h:
        r = h.get('/ui/memory/"><script>alert(1)<%2Fscript>')
        assert "<script>alert(1)" not in r.text


def test_a_memory_id_holding_a_slash_is_the_id_the_page_asks_for(live: LiveServer) -> None:
    # The page kept "%2F" escaped while it decoded the rest, so its script asked the API for
    # another id and showed "No such memory" (found by a service trial).
    with live.http() as h:
        r = h.get("/ui/memory/team%2Fa%20b")
        assert 'data-memory-id="team/a b"' in r.text


def test_me_says_what_the_key_may_do(live: LiveServer) -> None:
    with live.http(ADMIN_KEY) as h:
        assert h.get("/api/v1/me").json() == {"tenant": "acme", "users": None, "admin": True}
    with live.http(ALICE_KEY) as h:
        assert h.get("/api/v1/me").json() == {"tenant": "acme", "users": ["alice"], "admin": False}
    with live.http() as h:
        assert h.get("/api/v1/me").status_code == 401
    with live.http("no-such-key-here") as h:
        assert h.get("/api/v1/me").status_code == 403


def test_the_memory_list_filters_by_content_type(live: LiveServer) -> None:
    with live.http(ADMIN_KEY) as h:
        text = h.post("/api/v1/memories", json={"content": "plain words", "user_id": "carol"}).json()["id"]
        h.post("/api/v1/ingest", json={"user_id": "carol", "query": "how do I print the directory?",
                                       "response": "```python\nimport os\nprint(os.getcwd())\n```"})
        assert h.post("/api/v1/flush", params={"timeout": 20}).json()["drained"]

        def listed(**params: object) -> dict[str, str]:
            found = h.get("/api/v1/memories", params={"user_id": "carol", **params}).json()["memories"]
            return {m["id"]: (m["processed_content"] or {}).get("type", "text") for m in found}

        everything = listed()
        assert text in everything and "code" in everything.values()  # the filter has both kinds to tell apart
        assert listed(type="code") == {k: v for k, v in everything.items() if v == "code"}
        assert text in listed(type="text") and "code" not in listed(type="text").values()
        assert listed(type=["text", "code", "data"]) == everything
        assert h.get("/api/v1/memories", params={"type": "poem"}).status_code == 400
