"""The default gate on questions that share no word with their memory (issue 43): a held-out
set, written for this test from general knowledge and not used in fitting anything (the
development set the semantic curve's slope was read from is ``benchmarks/paraphrases.py``).

A new user's everyday memories in English and Chinese, questions asking for them in other
words (some in the other language), and unrelated questions. Searched as a user would, with no
option: a paraphrase should get its memory first, an unrelated question nothing. The model
(multilingual-e5-small) does not tell every paraphrase from a stranger, so the test holds
the shares measured when the curve was fitted, not every question (benchmarks/RESULTS.md,
"The gate on by default")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beeweave_core import BeeWeave

pytestmark = pytest.mark.model

MEMORIES = [
    "My dentist appointment is on Tuesday at 3pm.", "I'm learning to play the violin.",
    "My dog Max is a golden retriever.", "I prefer tea over coffee.", "My mother is a retired teacher.",
    "I moved to Seattle last year.", "I'm allergic to shellfish.",
    "我女朋友叫小雨。", "我每天骑电动车上班。", "我的生日是十月五号。", "我最近在学做蛋糕。", "我爸爸今年六十岁了。",
]
PARAPHRASES = [
    ("When is my next check-up for my teeth?", 0), ("Which instrument am I practising?", 1),
    ("What breed is my pet?", 2), ("Which hot drink do I like more?", 3), ("What did mom do for work?", 4),
    ("Which city did I relocate to recently?", 5), ("Is there any seafood I must avoid?", 6),
    ("你的另一半怎么称呼？", 7), ("你平时怎么通勤？", 8), ("你哪天出生的？", 9), ("你在练习什么烘焙？", 10),
    ("你父亲多大年纪？", 11),
    ("How do you get to the office?", 8), ("你养的狗是什么品种？", 2), ("你妈妈以前做什么工作？", 4),
]
UNRELATED = [
    "How many legs does a spider have?", "What is the freezing point of mercury?", "Who invented the telephone?",
    "How do I convert Celsius to Fahrenheit?", "What is the largest ocean?", "Why is the sky blue?",
    "珠穆朗玛峰有多高？", "怎么煮米饭？", "地球绕太阳一圈要多久？", "什么是人工智能？", "如何缓解头痛？", "唐朝的首都在哪里？",
]


@pytest.fixture(scope="module")
def memory() -> Iterator[tuple[BeeWeave, list[str]]]:
    with BeeWeave() as m:
        yield m, m.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)


def test_the_questions_share_no_word_with_their_memories(memory: tuple[BeeWeave, list[str]]) -> None:
    m, _ = memory
    tokenize = m.parts.search.shared.tokenizer.tokenize
    for question, i in PARAPHRASES:
        assert not set(tokenize(question)) & set(tokenize(MEMORIES[i])), question


def test_paraphrases_get_their_memory_and_unrelated_questions_nothing(memory: tuple[BeeWeave, list[str]]) -> None:
    m, ids = memory
    found = [m.search(q, user_id="u") for q, _ in PARAPHRASES]
    answered = [bool(hits) and hits[0].id == ids[i] for hits, (_, i) in zip(found, PARAPHRASES, strict=True)]
    silent = [not m.search(q, user_id="u") for q in UNRELATED]
    # the model alone ranks most paraphrases' memories first (what the gate can at best keep)
    ranked = [m.search(q, user_id="u", abstain_below=0)[0].id == ids[i] for q, i in PARAPHRASES]
    assert sum(ranked) / len(ranked) >= 0.75, ranked
    assert sum(answered) / len(answered) >= 0.5, list(zip(PARAPHRASES, answered, strict=True))
    assert sum(silent) / len(silent) >= 0.75, list(zip(UNRELATED, silent, strict=True))
    # questions in both languages are among those answered
    assert any(a for (q, _), a in zip(PARAPHRASES, answered, strict=True) if q.isascii())
    assert any(a for (q, _), a in zip(PARAPHRASES[:12], answered, strict=True) if not q.isascii())
