"""The browser tests skip, with a reason naming the Debian package, on a machine without
Chromium or without a CJK font (issue 46: the Chinese rendering test failed there instead)."""

from __future__ import annotations

import pytest

from tests.console import console_support
from tests.console.console_support import cjk_font_missing, need_chromium, need_cjk_font


def test_a_cjk_font_listed_by_fontconfig_is_enough() -> None:
    assert cjk_font_missing(lambda: "Noto Sans CJK SC,Noto Sans CJK SC Regular\n") is None


def test_no_cjk_font_names_fonts_noto_cjk() -> None:
    reason = cjk_font_missing(lambda: "")
    assert reason is not None and "fonts-noto-cjk" in reason and "fc-list :lang=zh" in reason


def test_no_fc_list_names_fontconfig() -> None:
    reason = cjk_font_missing(lambda: None)
    assert reason is not None and "fontconfig" in reason and "fonts-noto-cjk" in reason


def test_need_cjk_font_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console_support, "_fc_list_zh", lambda: "")
    with pytest.raises(pytest.skip.Exception, match="fonts-noto-cjk"):
        need_cjk_font()


def test_need_chromium_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console_support, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        need_chromium()
