"""Plain-text rendering of ``beeweave stats`` (the JSON of ``MemoryStats.to_dict()``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["print_stats", "format_stats"]


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def _bars(counts: Mapping[str, int], width: int = 30) -> list[str]:
    if not counts:
        return ["  (none)"]
    top = max(counts.values()) or 1
    name_w = min(max(len(k) for k in counts), 28)
    return [f"  {k[:name_w]:<{name_w}} {'#' * max(1, round(v / top * width)) if v else '':<{width}} {v}"
            for k, v in counts.items()]


def _memories(items: list[Mapping[str, Any]]) -> list[str]:
    if not items:
        return ["  (none)"]
    return [f"  {m['heat']:>5}  {m['id'][:34]:<34} [{m['user_id']}] {m['text'][:60]}" for m in items]


def format_stats(s: Mapping[str, Any]) -> str:
    lat = s["latency"]
    share = s["used_share"]
    scope = f" of user {s['user_id']!r}" if s.get("user_id") else ""
    lines = [f"{s['total']} memories{scope} ({', '.join(f'{k} {v}' for k, v in s['by_status'].items() if v) or 'empty'})",
             "",
             f"searches recorded: {s['searches']} (with hits: {s['searches_with_hits']}; "
             f"returned something later used: {s['searches_used']}"
             + ("" if share is None else f" = {share:.0%}") + ")",
             f"search latency: p50 {_ms(lat['p50'])}, p95 {_ms(lat['p95'])}, p99 {_ms(lat['p99'])} "
             f"(n={lat['count']})" + (f"; the model's first load, apart: {_ms(s['model_load_ms'])} "
                                      f"(x{s['model_loads']})" if s.get("model_loads") else ""),
             "", "by source agent:", *_bars(s["by_agent"]),
             "", "by intent:", *_bars(s["by_intent"]),
             "", "growth (memories added per day):",
             *_bars({g["day"]: g["added"] for g in s["growth"][-14:]}),
             "", "hottest (heat = accesses + up - down):", *_memories(s["hottest"]),
             "", "newest:", *_memories(s["newest"])]
    return "\n".join(lines)


def print_stats(s: Mapping[str, Any]) -> None:
    print(format_stats(s))
