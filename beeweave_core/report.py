"""``beeweave report``: the console's dashboard as one self-contained HTML file.

The file is the dashboard page of the web console (:mod:`beeweave_core.console`) with its
data, stylesheet and chart script inlined: the same cards, growth chart, latency chart,
source agents and intents, hottest and newest memories and hot recurring questions, drawn
by the same code, so the report and the console read alike. It needs no server and loads
nothing (its Content-Security-Policy forbids any request), so it opens offline and can be
mailed around. The memory graph is in the console (``/ui/graph``), where it can be explored.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from .stats import StatsRecorder, compute_stats

__all__ = ["render_report", "write_report"]

_SCRIPTS = ("common.js", "charts.js", "dashboard.js")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def render_report(memory: Any, *, user_id: str | None = None, top: int = 8,
                  recorder: StatsRecorder | None = None, title: str | None = None, lang: str = "en") -> str:
    """The report as one HTML string: the statistics of ``user_id`` (or the whole store),
    ``top`` hottest and newest memories, labels in ``lang`` ("en" or "zh")."""
    from .console.i18n import strings
    from .console.render import STATIC, render_page, script_json

    t = strings(lang)
    stats = compute_stats(memory, user_id=user_id, top=top, recorder=recorder)
    hot_fn = getattr(memory, "hot_patterns", None)
    patterns = [] if hot_fn is None else [_plain(vars(p)) for p in hot_fn(user_id=user_id)]
    data = {"stats": stats.to_dict(), "patterns": patterns}
    generated = stats.generated_at[:19].replace("T", " ") + " UTC" + (f" · {t['user']}: {user_id}" if user_id else "")
    return render_page("report", lang if lang in ("en", "zh") else "en", title=title or f"{t['title']}: {t['dashboard']}",
                       generated=generated, data_json=script_json(data),
                       css=(STATIC / "console.css").read_text(encoding="utf-8"),
                       scripts=[(STATIC / name).read_text(encoding="utf-8") for name in _SCRIPTS])


def write_report(memory: Any, path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`render_report` to ``path`` (UTF-8) and return the path."""
    out = Path(path)
    out.write_text(render_report(memory, **kwargs), encoding="utf-8")
    return out

