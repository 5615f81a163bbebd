"""One seeded server and one Chromium per module; a fresh tab (fresh sessionStorage) per test.

Chromium is per module, not per session, so that Playwright's sync API (which runs an event
loop of its own) is closed before the rest of the suite, with its asyncio tests, goes on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console.console_support import CHROMIUM, CHROMIUM_ARGS, Seeded, need_chromium, screenshot_dir, start_seeded


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    s = start_seeded(tmp_path_factory.mktemp("console-tenants"))
    yield s
    s.server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1200, "height": 900}, locale="en-US")
        context.set_default_timeout(15_000)
        yield context
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    browser.clear_cookies()
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    # 404 and 403 are expected where a test opens what its key may not see or signs in with a bad key;
    # missing static files are caught by test_console_pages.py.
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" and not re.search("status of 40[34]", m.text) else None)
    yield tab
    tab.close()
    assert not errors, f"the page reported errors: {errors}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory.mktemp("screenshots"))
