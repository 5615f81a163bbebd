"""Importance the user states: "this is important", "remember that", "don't forget",
"这个很重要", "记住", "别忘了", "务必", "以后都"...

Rules cannot judge how much a piece of knowledge matters, but a user who says it matters has
judged it. The offline extractor reads the user's words (the question, not the answer: an
assistant's "Important:" is its style, not the user's judgment) for such a cue, in English
and in Chinese alike, and gives the memory importance "high": the tiers' promotion score
then keeps it long-term from the start (``lifecycle.tiers``).

A cue said in the negative ("not important", "不重要", "没那么重要", "不用记住") or asked
("is this important?", "重要吗？") states nothing. English cues are phrases matched as whole
words ("remember" alone is also "I remember when", so only its imperative forms count);
Chinese has no spaces, so its cues are substrings, and a negation is looked for in the few
characters before the cue within its clause.
"""

from __future__ import annotations

import re

from ..validation import IMPORTANCE_LEVELS

__all__ = ["ENGLISH_CUES", "CHINESE_CUES", "stated_importance"]

ENGLISH_CUES = (
    "this is important", "that is important", "it is important", "it's important", "that's important",
    "very important", "really important", "super important", "extremely important", "important:",
    "importantly", "remember this", "remember that", "please remember", "remember:", "don't forget",
    "do not forget", "never forget", "keep in mind", "bear in mind", "note that", "make a note", "take note",
    "for future reference", "from now on", "going forward",
)
CHINESE_CUES = (
    "重要", "记住", "牢记", "切记", "别忘", "不要忘", "不能忘", "千万别忘", "务必", "要记得", "请记得",
    "记得要", "下次记得", "以后都", "以后请", "从现在起", "从今以后", "今后都", "备忘",
    # Traditional characters: the same cues as Taiwan and Hong Kong users write them.
    "記住", "牢記", "切記", "別忘", "千萬別忘", "要記得", "請記得", "記得要", "下次記得", "以後都", "以後請",
    "從現在起", "從今以後", "備忘", "務必",
)
_ENGLISH = re.compile(r"(?<![\w'])(" + "|".join(re.escape(c) for c in ENGLISH_CUES) + r")(?![\w'])", re.I)
_CHINESE = re.compile("|".join(re.escape(c) for c in sorted(CHINESE_CUES, key=len, reverse=True)))
# An English negation among the three words before the cue ("not very important", "isn't that important").
_EN_NEGATION = re.compile(r"(?i)\b(not|no|never|isn't|aren't|wasn't|doesn't|don't|nothing|hardly)\b(\W+\w+){0,2}\W*$")
_ZH_NEGATION = "不没沒别別无無未甭"  # 不重要, 没那么重要, 别记住, 无需记住, 未必重要; 非 is left out: 非常重要
_ZH_WINDOW = 3
_CLAUSE_END = re.compile(r"[.!?;,:\n。！？；，：、]")
_ASKED = re.compile(r"^[^.!?\n。！？]*?(\?|？|吗|嗎)")  # the rest of the cue's sentence ends as a question


def _negated_english(before: str) -> bool:
    clause = _CLAUSE_END.split(before)[-1]
    return bool(_EN_NEGATION.search(clause))


def _negated_chinese(before: str) -> bool:
    clause = _CLAUSE_END.split(before)[-1]
    return any(ch in _ZH_NEGATION for ch in clause[-_ZH_WINDOW:])


def _asked(after: str) -> bool:
    return bool(_ASKED.match(after))


def stated_importance(text: str) -> float | None:
    """"high" (as a number in [0, 1]) when ``text`` says, unnegated and not asking, that what
    it holds matters; None when it says nothing about it."""
    if not text:
        return None
    for pattern, negated in ((_ENGLISH, _negated_english), (_CHINESE, _negated_chinese)):
        for m in pattern.finditer(text):
            if not negated(text[:m.start()]) and not _asked(text[m.end():]):
                return IMPORTANCE_LEVELS["high"]
    return None
