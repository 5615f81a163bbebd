"""Rendering the console's templates (no web framework here: ``beeweave report`` uses it too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from .i18n import LANGUAGES, strings

__all__ = ["render_page", "script_json", "STATIC"]

_HERE = Path(__file__).parent
STATIC = _HERE / "static"
_env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=select_autoescape(["html"]))


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no "</script>" or "<!--" can end or bend it."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace("\u2028", "\\u2028") \
        .replace("\u2029", "\\u2029")


def render_page(page: str, lang: str, **extra: Any) -> str:
    t = strings(lang)
    return _env.get_template(f"{page}.html").render(t=t, lang=lang, languages=LANGUAGES, page=page,
                                                    strings_json=script_json(t), **extra)
