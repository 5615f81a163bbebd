"""The offline rules find what a user states about themselves, in English and Chinese, and
nothing in questions, negations or past states."""

from __future__ import annotations

import pytest

from beeweave_core.ingest.statements import FactStatement, find_statements


@pytest.mark.parametrize("text, key, value", [
    ("I live in Berlin.", "residence", "Berlin"),
    ("I moved to Munich last month", "residence", "Munich"),
    ("i live in berlin now", "residence", "berlin"),
    ("Hi, I'm living in New York these days", "residence", "New York"),
    ("I work at Acme Corp since May", "employer", "Acme Corp"),
    ("I have just moved to the Netherlands", "residence", "the Netherlands"),
    ("My phone number is +49 170 1234567", "phone", "+49 170 1234567"),
    ("my email is bob@example.com.", "email", "bob@example.com"),
    ("My name is Bob Smith", "name", "Bob Smith"),
    ("我住在北京", "residence", "北京"),
    ("我搬到了上海", "residence", "上海"),
    ("我上个月搬到上海了。", "residence", "上海"),
    ("我现在在腾讯上班", "employer", "腾讯"),
    ("我的手机号是13800138000", "phone", "13800138000"),
    ("我叫王伟", "name", "王伟"),
])
def test_a_statement_about_the_user_is_found(text: str, key: str, value: str) -> None:
    assert find_statements(text) == [FactStatement(key, value)]


@pytest.mark.parametrize("text", [
    "Do I live in Berlin?", "I no longer live in Berlin", "I lived in Berlin for years", "Where should I move to?",
    "我住在哪里？", "我不住在北京了", "你住在北京吗", "Berlin is a big city.",
    "I work at night", "I live in a small flat", "i work for the weekend",
])
def test_questions_negations_and_past_states_state_nothing(text: str) -> None:
    assert find_statements(text) == []


def test_one_statement_per_subject_the_later_standing() -> None:
    got = find_statements("I work at Acme and I live in Berlin. Later I moved to Munich.")
    assert got == [FactStatement("employer", "Acme"), FactStatement("residence", "Munich")]
