"""Statements a user makes about themselves that can change: where they live, where they
work, their phone number, e-mail address and name.

Each is a :class:`FactStatement` (a subject slot and its value). The lifecycle keeps one
timeline per user and slot (:mod:`beeweave_core.lifecycle.timeline`): "I moved to Munich"
supersedes "I live in Berlin" from the time it was said. The rules here are small and
general, English and Chinese, and read only what the user said (the question side of an
exchange): a question ("Do I live in Berlin?", "我住在哪里？"), a negation ("I no longer live
in Berlin") or a past state ("I lived in Berlin") states nothing current, and the patterns
require the present or a move, so they do not match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = ["FactSlot", "FactStatement", "find_statements"]


class FactSlot(str, Enum):
    """The subjects the offline rules recognise (an LLM extractor may name others)."""

    RESIDENCE = "residence"
    EMPLOYER = "employer"
    PHONE = "phone"
    EMAIL = "email"
    NAME = "name"


@dataclass(frozen=True)
class FactStatement:
    """One statement about the user: ``key`` (a slot, e.g. "residence") has ``value``."""

    key: str
    value: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value}


_WORDS = r"[A-Za-z0-9][\w.'&+-]*"
# English: a value is a run of Capitalised words ("New York", "Acme Corp") or, in lower-case
# chat, up to four words before a clause ends.
_CAPS = r"(?P<caps>(?:the\s+)?[A-Z0-9][\w.'&+-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z0-9][\w.'&+-]*)*)"
_ANY = rf"(?P<any>{_WORDS}(?:\s+{_WORDS}){{0,3}})"
_VALUE = rf"(?:{_CAPS}|{_ANY})"
_NOW = r"(?:now |currently |actually |just |recently |finally |still )?"
_I = r"(?:^|(?<=[\s,;:(\"']))(?:I|i)"
_EN: list[tuple[FactSlot, re.Pattern[str]]] = [
    (FactSlot.RESIDENCE, re.compile(
        rf"{_I}(?:'m| am)? {_NOW}(?:live|living|reside|residing|based|staying) in {_VALUE}")),
    (FactSlot.RESIDENCE, re.compile(rf"{_I}(?:'ve| have)? {_NOW}(?:moved|relocated) to {_VALUE}")),
    (FactSlot.RESIDENCE, re.compile(rf"(?i:\bmy home is) in {_VALUE}")),
    (FactSlot.EMPLOYER, re.compile(rf"{_I}(?:'m| am)? {_NOW}(?:work|working) (?:at|for) {_VALUE}")),
    (FactSlot.EMPLOYER, re.compile(rf"{_I}(?:'ve| have)? {_NOW}(?:joined|started (?:a new job |working )?at) {_VALUE}")),
    (FactSlot.EMPLOYER, re.compile(rf"(?i:\bmy (?:employer|company) is) {_VALUE}")),
    (FactSlot.PHONE, re.compile(r"(?i:\bmy (?:new )?(?:phone|mobile|cell)(?: ?phone)?(?: number)? is )(?P<raw>[^,;\n]+)")),
    (FactSlot.EMAIL, re.compile(r"(?i:\bmy (?:new )?e-?mail(?: address)? is )(?P<raw>[^,;\s]+)")),
    (FactSlot.NAME, re.compile(rf"(?i:\bmy name is|\bcall me) {_VALUE}")),
]
# A lower-case value ends where a clause or a time phrase begins ("berlin since may").
_EN_STOP = re.compile(r"(?i)\s+(?:and|but|because|since|for|from|with|now|today|yesterday|last|this|next|ago|"
                      r"anymore|again|too|as|so|where|which|who|when|in|on|at|to|of)\b.*$")
# A lower-case value that is a place or time in general, not a name ("I work at night", "I live
# in a flat"): a leading determiner, or one of these words alone.
_EN_DETERMINERS = frozenset({"a", "an", "the", "my", "our", "his", "her", "their", "some", "this", "that", "these",
                             "those", "no", "any"})
_EN_NOT_VALUES = frozenset({"it", "there", "here", "home", "town", "city", "night", "nights", "weekend", "weekends",
                            "times", "moment", "present", "once", "peace", "fear", "hope"})

_CJK_VALUE = r"(?P<raw>[^，。！？；,.!?;：:\s]{1,20})"
_ZH_NOW = r"(?:现在|目前|已经|刚|刚刚|最近|终于|还)?"
_ZH: list[tuple[FactSlot, re.Pattern[str]]] = [
    (FactSlot.RESIDENCE, re.compile(rf"我{_ZH_NOW}(?:住在|居住在|定居在|生活在){_CJK_VALUE}")),
    (FactSlot.RESIDENCE, re.compile(rf"我{_ZH_NOW}(?:.{{0,4}})?(?:搬到了|搬到|搬去了|搬去|搬家到了|搬家到){_CJK_VALUE}")),
    (FactSlot.EMPLOYER, re.compile(rf"我{_ZH_NOW}(?:入职了|入职|加入了|加入){_CJK_VALUE}")),
    (FactSlot.EMPLOYER, re.compile(rf"我{_ZH_NOW}在(?P<raw>[^，。！？；,.!?;\s]{{1,20}}?)(?:上班|任职)")),
    (FactSlot.PHONE, re.compile(r"我的(?:新)?(?:手机号码|手机号|电话号码|电话|手机)(?:是|为)(?P<raw>[^，。！？；,!?;\n]+)")),
    (FactSlot.EMAIL, re.compile(r"我的(?:新)?(?:邮箱|电子邮箱|电子邮件|邮件)(?:地址)?(?:是|为)(?P<raw>[^，。！？；,!?;\s]+)")),
    (FactSlot.NAME, re.compile(r"我(?:的名字)?叫(?P<raw>[^，。！？；,.!?;\s]{1,12})")),
    (FactSlot.NAME, re.compile(r"我的名字是(?P<raw>[^，。！？；,.!?;\s]{1,12})")),
]
# Sentence-final particles and time words that follow a Chinese value ("上海了", "北京这边").
_ZH_TAIL = re.compile(r"(?:了|啦|呢|吧|啊|呀|哦|这边|那边|那里|这里|工作|生活|居住|去|来)+$")
_ZH_QUESTION = re.compile(r"[哪啥谁吗么]|什么|多少")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n")  # not the dot inside "bob@example.com"


def _english_value(m: re.Match[str]) -> str | None:
    if m.groupdict().get("raw") is not None:
        return m.group("raw").strip().rstrip("。.")
    caps = m.group("caps")
    if caps:
        return caps.strip().rstrip(".'")
    value = _EN_STOP.sub("", m.group("any")).strip().rstrip(".")
    words = value.lower().split()
    if not words or words[0] in _EN_DETERMINERS or value.lower() in _EN_NOT_VALUES:
        return None
    return value


def _chinese_value(m: re.Match[str]) -> str | None:
    value = _ZH_TAIL.sub("", m.group("raw").strip())
    return value if value and not _ZH_QUESTION.search(value) else None


def find_statements(text: str) -> list[FactStatement]:
    """The statements ``text`` makes about its speaker, one per slot, in the order said; of two
    statements of one slot the later stands ("I lived... I live in Berlin. Now I moved to Munich")."""
    found: dict[str, tuple[int, FactStatement]] = {}
    offset = 0
    for sentence in _SENTENCE_END.split(text or ""):
        start, offset = offset, offset + len(sentence) + 1
        s = sentence.strip()
        if not s or s.endswith(("?", "？")):
            continue  # a question asks, it does not state
        for rules, value_of in ((_EN, _english_value), (_ZH, _chinese_value)):
            for slot, pattern in rules:
                for m in pattern.finditer(s):
                    value = value_of(m)
                    if value and (slot.value not in found or found[slot.value][0] < start + m.start()):
                        found[slot.value] = (start + m.start(), FactStatement(slot.value, value))
    return [st for _, st in sorted(found.values(), key=lambda pair: pair[0])]
