"""Time in words: phrases resolve against the engine clock, in filters and in queries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import InvalidInputError
from beeweave_core.timewords import find_time, resolve_time
from tests.lifecycle.lifecycle_support import Clock

# A Wednesday afternoon: this week began on Monday the 10th.
NOW = datetime(2025, 3, 12, 15, 30, tzinfo=timezone.utc)


def day(d: int, month: int = 3, year: int = 2025) -> datetime:
    return datetime(year, month, d, tzinfo=timezone.utc)


@pytest.mark.parametrize("phrase, start, end", [
    ("today", day(12), day(13)), ("今天", day(12), day(13)),
    ("yesterday", day(11), day(12)), ("昨天", day(11), day(12)),
    ("the day before yesterday", day(10), day(11)), ("前天", day(10), day(11)),
    ("this week", day(10), day(17)), ("本周", day(10), day(17)), ("这周", day(10), day(17)),
    ("last week", day(3), day(10)), ("上周", day(3), day(10)), ("上个星期", day(3), day(10)),
    ("this month", day(1), day(1, 4)), ("本月", day(1), day(1, 4)),
    ("last month", day(1, 2), day(1)), ("上个月", day(1, 2), day(1)), ("上月", day(1, 2), day(1)),
    ("last year", day(1, 1, 2024), day(1, 1)), ("去年", day(1, 1, 2024), day(1, 1)),
    ("last 3 days", day(10), day(13)), ("past three days", day(10), day(13)),
    ("最近三天", day(10), day(13)), ("最近3天", day(10), day(13)), ("近两周", day(27, 2), day(13)),
    ("最近十二天", day(1), day(13)), ("last 2 months", day(1, 2), day(13)),
    ("3 days ago", day(9), day(10)), ("三天前", day(9), day(10)),
])
def test_phrases_resolve_to_calendar_ranges(phrase, start, end):
    r = resolve_time(phrase, NOW)
    assert r is not None and (r.start, r.end) == (start, end)
    assert r.until < r.end <= r.until + timedelta(milliseconds=1)


def test_month_arithmetic_crosses_the_year():
    jan = datetime(2025, 1, 20, 9, tzinfo=timezone.utc)
    assert (resolve_time("last month", jan).start, resolve_time("last month", jan).end) == (day(1, 12, 2024), day(1, 1))
    assert resolve_time("this month", datetime(2024, 12, 5, tzinfo=timezone.utc)).end == day(1, 1)


def test_the_clock_time_zone_is_kept():
    tz = timezone(timedelta(hours=8))
    r = resolve_time("昨天", datetime(2025, 3, 12, 1, tzinfo=tz))
    assert r.start == datetime(2025, 3, 11, tzinfo=tz)


@pytest.mark.parametrize("text", ["weekly report", "the backup", "todays", "上周讨论的备份问题", "last"])
def test_non_phrases_are_not_time(text):
    assert resolve_time(text, NOW) is None


def test_a_phrase_in_a_query_is_taken_out():
    q = find_time("上周讨论的备份问题", NOW)
    assert q.range.phrase == "上周" and q.text == "讨论的备份问题"
    q = find_time("what did we decide about backups last week?", NOW)
    assert (q.range.start, q.text) == (day(3), "what did we decide about backups ?")
    assert find_time("backup retention policy", NOW) is None


def test_now_must_be_aware():
    with pytest.raises(TypeError):
        resolve_time("today", datetime(2025, 1, 1))


@pytest.fixture
def clock():
    return Clock(NOW)


@pytest.fixture
def mem(clock):
    m = BeeWeave(embedder=HashingEmbedder(128), clock=clock)
    yield m
    m.close()


def test_filters_take_time_words_against_the_engine_clock(mem):
    old = mem.add("old note", user_id="u", timestamp=day(1))
    recent = mem.add("recent note", user_id="u", timestamp=day(11, 3) + timedelta(hours=9))
    assert mem.count(user_id="u", filters={"since": "yesterday"}) == 1
    assert {h.id for h in mem.search("note", user_id="u", filters={"since": "last week"})} == {recent}
    assert {h.id for h in mem.search("note", user_id="u", filters={"until": "上周"})} == {old}
    with pytest.raises(InvalidInputError, match="time phrase"):
        mem.search("note", user_id="u", filters={"since": "sometime"})


def test_last_weeks_backup_memory_is_found_and_not_an_older_one(mem):
    older = mem.add("讨论了数据库备份问题：每天凌晨全量备份", user_id="u", timestamp=day(3, 2))
    last_week = mem.add("讨论了备份问题：改成增量备份，保留三十天", user_id="u", timestamp=day(5))
    mem.add("讨论了前端样式问题", user_id="u", timestamp=day(6))
    hits = mem.search("上周讨论的备份问题", user_id="u", k=5)
    assert hits[0].id == last_week and older not in {h.id for h in hits}
    assert all(h.time_range is not None and h.time_range.phrase == "上周" for h in hits)
    assert (hits[0].time_range.start, hits[0].time_range.end) == (day(3), day(10))
    old_en = mem.add("We discussed the database backup problem: full backups nightly", user_id="e", timestamp=day(3, 2))
    new_en = mem.add("We discussed the backup problem again: incremental backups", user_id="e", timestamp=day(5))
    english = mem.search("the backup problem we discussed last week", user_id="e", k=5)
    assert [h.id for h in english] == [new_en] and old_en != new_en


def test_a_phrase_with_nothing_in_its_range_searches_the_query_as_written(mem):
    # A conversation dated long ago: "yesterday" was the speaker's, not the clock's.
    a = mem.add("we adopted a cat yesterday", user_id="u", timestamp=day(1, 5, 2023))
    hits = mem.search("what did we adopt yesterday", user_id="u")
    assert [h.id for h in hits] == [a] and hits[0].time_range is None


def test_time_words_can_be_turned_off(clock):
    from beeweave_core.engine.config import SearchConfig

    with BeeWeave(embedder=HashingEmbedder(128), clock=clock, config=SearchConfig(time_words=False)) as m:
        old = m.add("backup plan", user_id="u", timestamp=day(1, 1))
        hits = m.search("backup plan last week", user_id="u")
        assert [h.id for h in hits] == [old] and hits[0].time_range is None
