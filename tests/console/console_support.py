"""Helpers of the console tests: a live server with a seeded tenant, and Debian's Chromium
driven by Playwright (never a browser Playwright downloads).

Tenant "acme" has an admin key and a key scoped to user "alice"; "bob" has a memory, a
pending memory and a dead letter that alice's key must never show.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from beeweave_core.ingest import Extraction, IngestConfig, OfflineExtractor
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, LiveServer, start_server

CHROMIUM = os.environ.get("BEEWEAVE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
ADMIN_KEY, ALICE_KEY, PAIR_KEY = "console-admin-0001", "console-alice-0001", "console-pair-0001"
KEYS = {ADMIN_KEY: "acme", ALICE_KEY: {"tenant": "acme", "users": ["alice"]},
        PAIR_KEY: {"tenant": "acme", "users": ["alice", "bob"]}}


class FlakyExtractor:
    """Fails on questions containing ``poison`` while ``broken`` is true (to make dead letters)."""

    def __init__(self) -> None:
        self.broken = True
        self.inner = OfflineExtractor()

    def extract(self, query: str, response: str, *, content: Any = None) -> Extraction:
        if self.broken and "poison" in query:
            raise RuntimeError("extractor crashed on this one")
        return self.inner.extract(query, response, content=content)


@dataclass
class Seeded:
    server: LiveServer
    extractor: FlakyExtractor
    ids: dict[str, str]


def need_chromium() -> None:
    if not (Path(CHROMIUM).exists() and shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (test extra)")


def cjk_font_missing(fc_list: Callable[[], str | None] | None = None) -> str | None:
    """Why a CJK font cannot be checked for, or is absent (None when fontconfig lists one for Chinese).

    ``fc_list`` returns the output of ``fc-list :lang=zh family`` (None: no fc-list); tests pass a fake."""
    out = (fc_list or _fc_list_zh)()
    if out is None:
        return "no fc-list to look for a CJK font (Debian: apt-get install fontconfig fonts-noto-cjk; .ci/run installs it)"
    if not out.strip():
        return "no CJK font for Chinese text (fc-list :lang=zh is empty; Debian: apt-get install fonts-noto-cjk; .ci/run installs it)"
    return None


def _fc_list_zh() -> str | None:
    exe = shutil.which("fc-list")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, ":lang=zh", "family"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def need_cjk_font() -> None:
    reason = cjk_font_missing()
    if reason:
        pytest.skip(reason)


def start_seeded(root: Path) -> Seeded:
    extractor = FlakyExtractor()
    srv = start_server(ServerConfig(root, KEYS, embedder=EMBEDDER,
                                    memory_kwargs={"ingest": IngestConfig(extractor=extractor)}))
    h = srv.http(ADMIN_KEY)

    def add(name: str, **body: Any) -> None:
        r = h.post("/api/v1/memories", json=body)
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]

    ids: dict[str, str] = {}
    add("runbook", content="The deploy runbook: build, run the tests, ship to staging, then to production.",
        user_id="alice", agent_id="ops-bot", session_id="s1", tags=["ops", "deploy"])
    add("tea", content="Alice prefers green tea in the morning and no sugar.", user_id="alice",
        agent_id="chat-bot", session_id="s1", tags=["preference"])
    add("peanut", content="用户对花生过敏，点餐时不要推荐含花生的菜。", user_id="alice", agent_id="chat-bot",
        session_id="s2", tags=["健康", "preference"])
    add("code", content="def deploy(): run('make ship')", user_id="alice", agent_id="ops-bot", session_id="s1",
        tags=["deploy"])
    add("pending", content="Alice's staging server is called kestrel.", user_id="alice", status="pending",
        tags=["ops"])
    add("bob", content="Bob keeps the zebra deploy token in the vault.", user_id="bob", agent_id="ops-bot",
        session_id="s1", tags=["ops", "deploy"])
    add("bob_pending", content="Bob's zebra pending note about the deploy.", user_id="bob", status="pending")
    add("stale_keep", content="The office wifi password changes every month.", user_id="alice")
    add("stale_archive", content="The old build server was called heron.", user_id="alice")
    add("bob_stale", content="Bob's zebra stale note.", user_id="bob")
    for name in ("stale_keep", "stale_archive", "bob_stale"):  # repeated "down" flags a memory stale
        for _ in range(3):
            assert h.post("/api/v1/feedback", json={"chunk_ids": [ids[name]], "signal": "down"}).status_code == 200
    for user, q in (("alice", "poison question about the deploy"), ("bob", "zebra poison question from bob")):
        assert h.post("/api/v1/ingest", json={"id": f"dead-{user}", "user_id": user, "query": q,
                                              "response": "an answer"}).status_code == 202
    assert h.post("/api/v1/flush", params={"timeout": 20}).json()["drained"]
    for q in ("deploy runbook", "green tea", "花生", "deploy"):
        h.post("/api/v1/search", json={"query": q, "k": 5})
    h.close()
    return Seeded(srv, extractor, ids)


def screenshot_dir(fallback: Path) -> Path:
    """``BEEWEAVE_SCREENSHOTS`` (kept as CI artifacts) or the test's temporary directory."""
    path = Path(os.environ.get("BEEWEAVE_SCREENSHOTS") or fallback)
    path.mkdir(parents=True, exist_ok=True)
    return path
