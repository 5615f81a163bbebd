"""Steps the browser tests share: signing in, waiting for a page's data, screenshots, and
geometry checks (labels that overlap, tick values that are not nice)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

LOOK = Path("/tmp/beeweave-console-shots")  # a stable copy for a person to look at


def sign_in(page: Any, url: str, key: str, *, lang: str = "en", next_path: str = "") -> None:
    """Sign in with the keyboard only: type the key, press Enter."""
    target = f"{url}/ui/login?lang={lang}" + (f"&next={next_path}" if next_path else "")
    page.goto(target)
    page.keyboard.type(key)  # the key field has the focus
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{next_path or '/ui/memories'}*")


def ready(page: Any) -> None:
    """Wait until the page's script has drawn what it loaded (``<body data-ready>``)."""
    page.wait_for_selector("body[data-ready]", state="attached")


def shot(page: Any, shots: Path, name: str) -> Path:
    ready(page)
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    try:
        LOOK.mkdir(exist_ok=True)
        shutil.copy(path, LOOK / path.name)
    except OSError:
        pass
    return path


def text_boxes(page: Any, selector: str) -> list[dict[str, Any]]:
    """The on-screen boxes of the visible <text> elements under ``selector``."""
    return page.eval_on_selector_all(selector + " text", """els => els
        .filter(e => !e.classList.contains('halo') && e.getAttribute('visibility') !== 'hidden' && !e.closest('[visibility=hidden]') && e.textContent.trim())
        .map(e => { const r = e.getBoundingClientRect(); return {t: e.textContent, x: r.x, y: r.y, w: r.width, h: r.height}; })""")


def overlapping(boxes: list[dict[str, Any]], slack: float = 0.5) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if (a["x"] + slack < b["x"] + b["w"] and b["x"] + slack < a["x"] + a["w"]
                    and a["y"] + slack < b["y"] + b["h"] and b["y"] + slack < a["y"] + a["h"]):
                out.append((a["t"], b["t"]))
    return out


def is_nice_tick_series(values: list[float]) -> bool:
    """0, s, 2s, ... with s one of 1, 2, 2.5 or 5 times a power of ten."""
    if len(values) < 2 or values[0] != 0:
        return False
    step = values[1] - values[0]
    mag = 10 ** math.floor(math.log10(step))
    nice = any(math.isclose(step, m * mag) for m in (1, 2, 2.5, 5, 10))
    even = all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in zip(values, values[1:]))
    return nice and even
