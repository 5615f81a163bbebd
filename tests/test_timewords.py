"""Time in words: phrases resolve against the engine clock, in filters and in queries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import InvalidInputError
from beeweave_core.timewords import DATED_LAG, find_time, resolve_time
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




@pytest.mark.parametrize("phrase, start, end", [
    ("May 3, 2023", day(3, 5, 2023), day(4, 5, 2023)), ("on May 3rd, 2023", day(3, 5, 2023), day(4, 5, 2023)),
    ("3 June, 2023", day(3, 6, 2023), day(4, 6, 2023)), ("the 1st of March, 2023", day(1, 3, 2023), day(2, 3, 2023)),
    ("December 1,2023", day(1, 12, 2023), day(2, 12, 2023)), ("on Sept 30 2024", day(30, 9, 2024), day(1, 10, 2024)),
    ("in August 2023", day(1, 8, 2023), day(1, 9, 2023)), ("Dec 2024", day(1, 12, 2024), day(1, 1)),
    ("in 2022", day(1, 1, 2022), day(1, 1, 2023)), ("2023-05-03", day(3, 5, 2023), day(4, 5, 2023)),
    ("2023年5月3日", day(3, 5, 2023), day(4, 5, 2023)), ("2023年05月03号", day(3, 5, 2023), day(4, 5, 2023)),
    ("2023年5月", day(1, 5, 2023), day(1, 6, 2023)),
    ("2022年", day(1, 1, 2022), day(1, 1, 2023)),
    # Without a year: the latest such day up to now (NOW is 12 March 2025).
    ("March 5", day(5), day(6)), ("5月3日", day(3, 5, 2024), day(4, 5, 2024)),
    ("on December 25", day(25, 12, 2024), day(26, 12, 2024)),
])
def test_calendar_dates_resolve_to_their_day(phrase, start, end):
    r = resolve_time(phrase, NOW)
    assert r is not None and (r.start, r.end) == (start, end), phrase
    # In a query the engine also reads the week after it (what is told of a day comes later).
    q = find_time(f"what happened {phrase}?", NOW, dated_lag=DATED_LAG)
    assert (q.range.start, q.range.end, q.text) == (start, end + DATED_LAG, "what happened ?")


def test_before_and_since_a_date_are_open_ranges():
    q = find_time("What did Maria do before April 10, 2023?", NOW)
    assert q.range.phrase == "before April 10, 2023" and q.text == "What did Maria do ?"
    assert q.range.start.year == 1970 and q.range.end == day(11, 4, 2023)
    q = find_time("what changed since May 3, 2023", NOW)
    assert (q.range.start, q.text) == (day(3, 5, 2023), "what changed") and q.range.end > NOW
    q = find_time("2023年5月3日之前的会议", NOW)
    assert (q.range.end, q.range.phrase, q.text) == (day(4, 5, 2023), "2023年5月3日之前", "会议")
    assert find_time("2023年5月以后的会议", NOW).range.start == day(1, 5, 2023)


@pytest.mark.parametrize("phrase, start, end", [
    ("between August 11 and August 15 2023", day(11, 8, 2023), day(16, 8, 2023)),
    ("from May 1 to May 3, 2023", day(1, 5, 2023), day(4, 5, 2023)),
    ("between 2023-05-01 and 2023-05-09", day(1, 5, 2023), day(10, 5, 2023)),
    ("从2023年5月1日到5月3日", day(1, 5, 2023), day(4, 5, 2023)),
    ("from June 2023 to August 2023", day(1, 6, 2023), day(1, 9, 2023)),
    ("from December 30, 2023 to January 2", day(30, 12, 2023), day(3, 1, 2024)),
])
def test_two_dates_make_one_range(phrase, start, end):
    r = resolve_time(phrase, NOW)
    assert r is not None and (r.start, r.end, r.phrase) == (start, end, phrase)
    q = find_time(f"where was John {phrase}?", NOW, dated_lag=DATED_LAG)
    assert (q.range.start, q.range.end, q.text) == (start, end + DATED_LAG, "where was John ?")


def test_a_range_through_29_february_takes_a_leap_year_or_is_no_range():
    leap = datetime(2024, 6, 1, tzinfo=timezone.utc)
    q = find_time("from December 30, 2023 to Feb 29", leap)
    assert (q.range.start, q.range.end) == (day(30, 12, 2023), day(1, 3, 2024))
    q = find_time("from Feb 29 to March 3, 2023", leap)  # no 29 February in 2023: the first date alone
    assert (q.range.start, q.range.end) == (day(29, 2, 2024), day(1, 3, 2024))


def test_a_range_that_ends_before_it_starts_is_only_its_first_date():
    q = find_time("from May 3 2023 to May 1 2023", NOW)
    assert (q.range.start, q.range.end) == (day(3, 5, 2023), day(4, 5, 2023))


@pytest.mark.parametrize("text", ["I may 3 things", "meet on February 30, 2023", "version 2023", "month 13 of 2023",
                                  "on 2023-13-01", "room 2023年13月"])
def test_words_and_impossible_dates_are_not_dates(text):
    assert resolve_time(text, NOW) is None
    assert find_time(text, NOW) is None


def test_a_dated_question_finds_the_memory_of_that_day_or_told_soon_after(mem):
    told_that_day = mem.add("We watched Inception at the cinema", user_id="d", timestamp=day(1, 5, 2022))
    told_next_day = mem.add("Yesterday we had dinner with Ana at the port", user_id="d", timestamp=day(4, 5, 2023))
    mem.add("We watched Dune at the cinema", user_id="d", timestamp=day(20, 6, 2022))
    mem.add("We had dinner with Bo at home", user_id="d", timestamp=day(1, 9, 2023))
    assert [h.id for h in mem.search("what movie did we watch on 1 May, 2022?", user_id="d", k=1)] == [told_that_day]
    hits = mem.search("who did we have dinner with on May 3, 2023?", user_id="d", k=1)
    assert [h.id for h in hits] == [told_next_day] and hits[0].time_range.phrase == "on May 3, 2023"


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
    # A date in a filter is that day exactly (no week after it, as a query's date has).
    assert mem.count(user_id="u", filters={"since": "March 11", "until": "March 11"}) == 1
    assert mem.count(user_id="u", filters={"until": "1 March, 2025"}) == 1
    assert mem.count(user_id="u", filters={"until": "March 10, 2025"}) == 1


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
    from beeweave_core.engine.search_config import SearchConfig

    with BeeWeave(embedder=HashingEmbedder(128), clock=clock, config=SearchConfig(time_words=False)) as m:
        old = m.add("backup plan", user_id="u", timestamp=day(1, 1))
        hits = m.search("backup plan last week", user_id="u")
        assert [h.id for h in hits] == [old] and hits[0].time_range is None


@pytest.mark.parametrize("query, plain", [
    ("上週討論的備份問題", "上周讨论的备份问题"),  # traditional characters (a user trial: not resolved)
    ("過去兩週的會議", "过去两周的会议"),
    ("２０２３年５月３日的会议", "2023年5月3日的会议"),  # full-width digits, as input methods type them
])
def test_traditional_and_full_width_time_words_read_as_their_plain_forms(query, plain):
    found, want = find_time(query, NOW), find_time(plain, NOW)
    assert found is not None and want is not None
    assert (found.range.start, found.range.end) == (want.range.start, want.range.end)
    assert query.startswith(found.range.phrase) and query.endswith(found.text)  # the query's own words


@pytest.mark.parametrize("query, start, end, rest", [
    ("What did I do in March?", day(1), day(1, 4), "What did I do ?"),  # this month: March 2025
    ("during January", day(1, 1), day(1, 2), ""),
    ("in December", day(1, 12, 2024), day(1, 1), ""),  # not yet this year: the last one
    ("三月份我去了哪里", day(1), day(1, 4), "我去了哪里"),
    ("我2月份买了什么", day(1, 2), day(1), "我 买了什么"),
    ("十二月里的会议", day(1, 12, 2024), day(1, 1), "会议"),
])
def test_a_month_without_a_year_is_the_latest_one(query, start, end, rest):
    found = find_time(query, NOW)
    assert found is not None and (found.range.start, found.range.end) == (start, end)
    assert found.text.strip() == rest


def test_what_is_not_a_month_without_a_year():
    assert find_time("what did we discuss in may", NOW) is None  # lowercase: as likely the verb
    assert find_time("13月份的账单", NOW) is None
    assert find_time("我过去三个月做了什么", NOW).range.phrase == "过去三个月"  # months, not March
    found = find_time("in March 2023", NOW)
    assert (found.range.start, found.range.end) == (day(1, 3, 2023), day(1, 4, 2023))
