"""Time in words, English and Chinese: "last week", "yesterday", "上周", "最近三天"...

A phrase resolves, against a given "now" (the engine's clock), to a :class:`TimeRange`
``[start, end)`` in the clock's time zone. Weeks start on Monday (ISO 8601). Only the
past is understood: a memory store holds what was said, not what will be.

Hand-written rather than a library: dateparser resolves a phrase to one instant (not a
range), carries hundreds of locale files and a regex dependency, and still does not read
最近三天 or 上个月; parsedatetime has no Chinese. The grammar here is small and closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["TimeRange", "TimeQuery", "resolve_time", "find_time", "time_bound"]


@dataclass(frozen=True)
class TimeRange:
    """A resolved time phrase: ``start`` inclusive, ``end`` exclusive, both aware."""

    phrase: str
    start: datetime
    end: datetime

    @property
    def until(self) -> datetime:
        """The inclusive upper bound the ``until`` filter takes."""
        return self.end - timedelta(microseconds=1)

    def to_dict(self) -> dict[str, Any]:
        return {"phrase": self.phrase, "start": self.start.isoformat(), "end": self.end.isoformat()}


@dataclass(frozen=True)
class TimeQuery:
    """A query split into its time phrase (resolved) and the rest of its text."""

    range: TimeRange
    text: str


_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "couple of": 2}
_ZH_DIGIT = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"hour": "hour", "hours": "hour", "day": "day", "days": "day", "week": "week", "weeks": "week",
          "month": "month", "months": "month", "year": "year", "years": "year",
          "小时": "hour", "个小时": "hour", "天": "day", "日": "day", "周": "week", "个星期": "week", "星期": "week",
          "个礼拜": "week", "礼拜": "week", "个月": "month", "月": "month", "年": "year"}


def _zh_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "几":
        return 3
    if "十" in text:  # 十, 十二, 二十, 二十三
        tens, _, ones = text.partition("十")
        t = _ZH_DIGIT.get(tens, 1) if tens else 1
        o = _ZH_DIGIT.get(ones, 0) if ones else 0
        return None if (tens and tens not in _ZH_DIGIT) or (ones and ones not in _ZH_DIGIT) else 10 * t + o
    return _ZH_DIGIT.get(text) if len(text) == 1 else None


def _number(text: str) -> int | None:
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    return _EN_NUM.get(text, _zh_number(text))


def _day(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def _month(now: datetime, back: int = 0) -> datetime:
    index = now.year * 12 + now.month - 1 - back
    return _day(now).replace(year=index // 12, month=index % 12 + 1, day=1)


def _fixed(name: str, now: datetime) -> tuple[datetime, datetime]:
    today = _day(now)
    week = today - timedelta(days=today.weekday())
    year = today.replace(month=1, day=1)
    return {
        "today": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "before_yesterday": (today - timedelta(days=2), today - timedelta(days=1)),
        "this_week": (week, week + timedelta(days=7)),
        "last_week": (week - timedelta(days=7), week),
        "this_month": (_month(now), _month(now, -1)),
        "last_month": (_month(now, 1), _month(now)),
        "this_year": (year, year.replace(year=year.year + 1)),
        "last_year": (year.replace(year=year.year - 1), year),
    }[name]


def _last(n: int, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """The last n units up to now; whole days for days and longer ("last 3 days" = today and
    the two days before it), so the range does not depend on the hour it is asked."""
    if unit == "hour":
        return now - timedelta(hours=n), now + timedelta(microseconds=1)
    end = _day(now) + timedelta(days=1)
    if unit == "month":
        return _month(now, n - 1) if n else end, end
    days = {"day": 1, "week": 7, "year": 365}[unit] * n
    return end - timedelta(days=days), end


def _ago(n: int, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """The one unit n units back ("3 days ago" = that calendar day)."""
    if unit == "hour":
        start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=n)
        return start, start + timedelta(hours=1)
    if unit == "month":
        return _month(now, n), _month(now, n - 1)
    if unit == "year":
        y = _day(now).replace(month=1, day=1)
        return y.replace(year=y.year - n), y.replace(year=y.year - n + 1)
    size = 7 if unit == "week" else 1
    day = _day(now) - timedelta(days=n * size)
    if unit == "week":
        day -= timedelta(days=day.weekday())
    return day, day + timedelta(days=size)


_EN_COUNT = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|couple of)"
_EN_UNIT = r"(hours?|days?|weeks?|months?|years?)"
_ZH_COUNT = r"(\d+|[零一二两三四五六七八九十几]+)"
_ZH_UNIT = r"(个小时|小时|天|日|个星期|星期|个礼拜|礼拜|周|个月|月|年)"

# (pattern, kind): kind is a fixed range name, or "last"/"ago" over (count, unit) groups.
# Longer phrases first: "the day before yesterday" before "yesterday", 上个月 before 上月.
_RULES: list[tuple[re.Pattern[str], str]] = [(re.compile(p, re.IGNORECASE), k) for p, k in [
    (r"\b(?:the\s+)?day\s+before\s+yesterday\b", "before_yesterday"),
    (r"\b(?:earlier\s+)?today\b", "today"),
    (r"\byesterday\b", "yesterday"),
    (r"\bthis\s+week\b", "this_week"),
    (r"\blast\s+week\b", "last_week"),
    (r"\bthis\s+month\b", "this_month"),
    (r"\blast\s+month\b", "last_month"),
    (r"\bthis\s+year\b", "this_year"),
    (r"\blast\s+year\b", "last_year"),
    (rf"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+{_EN_COUNT}\s+{_EN_UNIT}\b", "last"),
    (r"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+(day|week|month|year)\b", "last1"),
    (rf"\b{_EN_COUNT}\s+{_EN_UNIT}\s+ago\b", "ago"),
    (r"大前天", "before_before_yesterday"),
    (r"前天", "before_yesterday"),
    (r"今天|今日", "today"),
    (r"昨天|昨日", "yesterday"),
    (r"本周|这周|这个星期|这星期|本星期|这个礼拜|这礼拜", "this_week"),
    (r"上周|上个星期|上星期|上个礼拜|上礼拜", "last_week"),
    (r"本月|这个月", "this_month"),
    (r"上个月|上月", "last_month"),
    (r"今年", "this_year"),
    (r"去年", "last_year"),
    (rf"(?:最近|近|过去|前)的?{_ZH_COUNT}{_ZH_UNIT}(?:里|内|中|以来)?", "last"),
    (rf"{_ZH_COUNT}{_ZH_UNIT}(?:以前|之前|前)", "ago"),
    (r"最近一周|近一周", "last1zh"),
]]


def _resolve(match: re.Match[str], kind: str, now: datetime) -> tuple[datetime, datetime] | None:
    if kind == "before_before_yesterday":
        day = _day(now) - timedelta(days=3)
        return day, day + timedelta(days=1)
    if kind in ("last", "ago"):
        n = _number(match.group(1))
        unit = _UNITS.get(match.group(2).lower())
        if n is None or unit is None or n > 10_000:
            return None
        return (_last if kind == "last" else _ago)(n, unit, now)
    if kind == "last1":
        return _last(1, _UNITS[match.group(1).lower()], now)
    if kind == "last1zh":
        return _last(1, "week", now)
    return _fixed(kind, now)


def _check_now(now: datetime) -> None:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise TypeError("now must be an aware datetime")


def find_time(text: str, now: datetime) -> TimeQuery | None:
    """The first time phrase in ``text`` (earliest in the text), resolved, and the text
    without it; None when the text names no time."""
    _check_now(now)
    best: tuple[int, int, str, re.Match[str]] | None = None
    for pattern, kind in _RULES:
        m = pattern.search(text)
        if m is not None and (best is None or (m.start(), -(m.end() - m.start())) < (best[0], -best[1])):
            best = (m.start(), m.end() - m.start(), kind, m)
    if best is None:
        return None
    _, _, kind, m = best
    span = _resolve(m, kind, now)
    if span is None:
        return None
    rest = (text[: m.start()] + " " + text[m.end():]).strip()
    rest = re.sub(r"\s{2,}", " ", rest)
    # 上周讨论的备份问题 -> 讨论的备份问题: a leading particle left by the phrase goes too.
    rest = re.sub(r"^[的里内中,，]\s*", "", rest)
    return TimeQuery(TimeRange(m.group(0), span[0], span[1]), rest)


def resolve_time(phrase: str, now: datetime) -> TimeRange | None:
    """The range a whole phrase names ("last week", "上周", "最近三天"), or None."""
    if not isinstance(phrase, str):
        return None
    found = find_time(phrase.strip(), now)
    if found is None or found.text.strip(" ,，。.?？"):
        return None  # a phrase with more in it is not a time word
    return found.range


def time_bound(phrase: str, now: datetime, bound: str) -> datetime | None:
    """The ``since`` (start) or ``until`` (inclusive end) that a phrase means, or None."""
    found = resolve_time(phrase, now)
    if found is None:
        return None
    return found.start if bound == "since" else found.until
