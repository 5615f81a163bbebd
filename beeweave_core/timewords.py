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

from .tokenizer import WIDTH_FOLD

__all__ = ["TimeRange", "TimeQuery", "resolve_time", "find_time", "time_bound", "DATED_LAG"]


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


_MONTHS = {name: i for i, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")], start=1) for name in names}
_EN_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
# A memory of a day is written on that day or after it ("yesterday I had dinner with..."), so a
# question naming a date also reads the days that follow (the engine passes this to find_time);
# a week covers the usual delay of a retelling. A filter's date (since="May 3, 2023") is exact.
DATED_LAG = timedelta(days=7)
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
    # Dates by the calendar ("on May 3, 2023", "3 June 2023", "in August 2023", "2023-05-03",
    # "2023年5月3日", "5月3号"): a day, month or year (see _dated; a query's lag: find_time).
    (rf"\b(?:on\s+)?({_EN_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:(?:,\s*|\s+)(\d{{4}}))?\b", "mdy"),
    (rf"\b(?:on\s+)?(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_EN_MONTH})\.?(?:(?:,\s*|\s+)(\d{{4}}))?\b", "dmy"),
    (rf"\b(?:in|during)\s+({_EN_MONTH}),?\s+(\d{{4}})\b", "my"),
    (rf"\b({_EN_MONTH}),?\s+(\d{{4}})\b", "my"),
    (r"\b(?:in|during)\s+((?:19|20)\d{2})\b", "y"),
    (r"\b(?:on\s+)?((?:19|20)\d{2})-(\d{1,2})-(\d{1,2})\b", "iso"),
    (r"(?:((?:19|20)\d{2})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]", "zh_ymd"),
    (r"((?:19|20)\d{2})\s*年\s*(\d{1,2})\s*月(?:份)?", "zh_ym"),
    (r"((?:19|20)\d{2})\s*年(?!\s*\d)", "y"),
    # A month without a year ("in March", "3月份", "三月里"): the latest such month up to now.
    # Capitalised in English ("in may" reads as a verb as often as a month); in Chinese only
    # with 份, or 里/的时候 after it, or alone before a particle, never 个月 ("three months").
    (rf"\b(?:in|during)\s+({_EN_MONTH})\b(?!\.?\s*\d)", "m"),
    (r"(?<![个\d零一二两三四五六七八九十年])(1[0-2]|[1-9]|十[一二]|十|[一二三四五六七八九])\s*月(?:份|里|的时候)", "zh_m"),
]]


def _dated(kind: str, g: tuple[str | None, ...], now: datetime) -> tuple[datetime, datetime] | None:
    """The range of a calendar date: the day (or month, or year) it names, in the clock's time
    zone (a query's lag after it is added by find_time). Without a year, the latest such date
    up to now (only the past is understood)."""
    try:
        if kind in ("mdy", "dmy"):
            month, day = (str(g[0]), g[1]) if kind == "mdy" else (str(g[1]), g[0])
            if g[2] is None and not month[0].isupper():
                return None  # "I may 3 things": a lowercase month name without a year is a word
            y, m, d = (int(g[2]) if g[2] else None), _MONTHS[month.lower()], int(str(day))
        elif kind in ("iso", "zh_ymd"):
            y, m, d = (int(g[0]) if g[0] else None), int(str(g[1])), int(str(g[2]))
        elif kind == "my":
            y, m, d = int(str(g[1])), _MONTHS[str(g[0]).lower()], None
        elif kind == "zh_ym":
            y, m, d = int(str(g[0])), int(str(g[1])), None
        elif kind == "m":
            if not str(g[0])[0].isupper():
                return None
            y, m, d = None, _MONTHS[str(g[0]).lower()], None
        elif kind == "zh_m":
            number = _zh_number(str(g[0]))
            if number is None or not 1 <= number <= 12:
                return None
            y, m, d = None, number, None
        else:  # "y"
            y, m, d = int(str(g[0])), None, None
        year = now.year if y is None else y
        start = _day(now).replace(year=year, month=m or 1, day=d or 1)
        if y is None and start > now:
            start = start.replace(year=year - 1)
    except (ValueError, KeyError):  # 31 June, month 13
        return None
    if d is not None:
        end = start + timedelta(days=1)
    elif m is not None:
        end = _month(start, -1)
    else:
        end = start.replace(year=start.year + 1)
    return start, end


_DATED = ("mdy", "dmy", "my", "y", "iso", "zh_ymd", "zh_ym", "m", "zh_m")
_BEFORE = re.compile(r"\b(?:before|prior\s+to|until|till|by)\s+$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|since)\s+$", re.IGNORECASE)
_ZH_BEFORE = re.compile(r"^\s*(?:之前|以前|前)")
_ZH_AFTER = re.compile(r"^\s*(?:之后|以后|以来|后)")


def _open_ended(text: str, span: tuple[datetime, datetime], start: int, end: int,
                now: datetime, lag: timedelta) -> tuple[tuple[datetime, datetime], int, int]:
    """"before May 3" / "5月3日之前": everything up to that date (and the date itself: what is
    told on it may be about the days before); "since May 3" / "5月3日以后": from it to now.
    A date alone is its day (month, year) and ``lag`` after it."""
    before, after = _BEFORE.search(text[:start]), _AFTER.search(text[:start])
    zh_before, zh_after = _ZH_BEFORE.match(text[end:]), _ZH_AFTER.match(text[end:])
    if before or zh_before:
        found = span[0].replace(year=1970, month=1, day=1), span[1]
    elif after or zh_after:
        found = span[0], max(now + timedelta(microseconds=1), span[1])
    else:
        return (span[0], span[1] + lag), start, end
    if before or after:
        start = (before or after).start()  # type: ignore[union-attr]
    else:
        end += (zh_before or zh_after).end()  # type: ignore[union-attr]
    return found, start, end


_FROM = re.compile(r"\b(?:between|from)\s+$|从\s*$", re.IGNORECASE)
_TO = re.compile(r"\s*(?:\band\b|\bto\b|\buntil\b|\bthrough\b|-|–|到|至)\s*", re.IGNORECASE)


def _in_year(when: datetime, year: int) -> datetime | None:
    try:
        return when.replace(year=year)
    except ValueError:  # 29 February
        return None


def _has_year(kind: str, g: tuple[str | None, ...]) -> bool:
    return not ((kind in ("mdy", "dmy") and g[2] is None) or (kind == "zh_ymd" and g[0] is None)
                or kind in ("m", "zh_m"))


def _between(text: str, m: re.Match[str], first_kind: str, span: tuple[datetime, datetime],
             now: datetime) -> tuple[tuple[datetime, datetime], int, int] | None:
    """"between August 11 and August 15, 2023" / "from May 1 to May 3" / "从5月1日到5月3日": from
    the first date's start to the second's end; a first date without a year takes the second's."""
    lead = _FROM.search(text[: m.start()])
    link = _TO.match(text, m.end())
    if lead is None or link is None:
        return None
    for pattern, kind in _RULES:
        if kind not in _DATED:
            continue
        second = pattern.match(text, link.end())
        if second is None:
            continue
        last = _dated(kind, second.groups(), now)
        if last is None:
            return None
        first: datetime | None = span[0]
        end: datetime | None = last[1]
        if not _has_year(first_kind, m.groups()) and _has_year(kind, second.groups()):
            first = _in_year(span[0], last[0].year)
        elif _has_year(first_kind, m.groups()) and not _has_year(kind, second.groups()):
            moved = _in_year(last[0], span[0].year)
            year = span[0].year + (moved is None or moved < span[0])  # "Dec 30, 2023 to Jan 2"
            end = _in_year(last[1], year + (last[1].year - last[0].year))
        if first is None or end is None or first >= end:
            return None
        return (first, end), lead.start(), second.end()
    return None


def _resolve(match: re.Match[str], kind: str, now: datetime) -> tuple[datetime, datetime] | None:
    if kind in _DATED:
        return _dated(kind, match.groups(), now)
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


# Full-width forms and the traditional characters of time words, folded one character for one
# (so a phrase's position in the folded text is its position in the text): ２０２３年５月３日,
# 上週 and 過去兩週 read as 2023年5月3日, 上周 and 过去两周.
_FOLD = WIDTH_FOLD | str.maketrans(
    "週過兩個後禮時間點鐘號來這幾於", "周过两个后礼时间点钟号来这几于")


def find_time(text: str, now: datetime, *, dated_lag: timedelta = timedelta(0)) -> TimeQuery | None:
    """The first time phrase in ``text`` (earliest in the text), resolved, and the text
    without it; None when the text names no time. ``dated_lag`` widens a calendar date's
    range by that much after it (a query's date: see DATED_LAG); a filter's date is exact.
    Full-width digits and traditional characters are read as their plain forms."""
    _check_now(now)
    original, text = text, text.translate(_FOLD)
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
    start, end = m.start(), m.end()
    if kind in _DATED:
        between = _between(text, m, kind, span, now)
        if between is not None:
            (first, last), start, end = between
            span = first, last + dated_lag
        else:
            span, start, end = _open_ended(text, span, start, end, now, dated_lag)
    text = original  # the positions hold: the fold is one character for one
    rest = (text[:start] + " " + text[end:]).strip()
    rest = re.sub(r"\s{2,}", " ", rest)
    # 上周讨论的备份问题 -> 讨论的备份问题: a leading particle left by the phrase goes too.
    rest = re.sub(r"^[的里内中,，]\s*", "", rest)
    return TimeQuery(TimeRange(text[start:end], span[0], span[1]), rest)


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
