"""Paraphrases that share no word with their memory, for the relevance curve's semantic side.

Short everyday memories a user tells an assistant, in English and Chinese, questions asking
for them in other words (no term in common with the memory, some across the two languages),
and unrelated questions. Written for BeeWeave from general knowledge, not taken from any data
set. ``abstention.py --fit`` reads the semantic curve's slope from these (the development
set); the held-out set the default gate is tested on is another one
(``tests/test_paraphrase_gate.py``).

Usage: python benchmarks/paraphrases.py (the default search on one store of these memories)
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEMORIES = [
    "My sister Anna lives in Toronto.", "I drive a blue Honda Civic.", "I work as a nurse at the city hospital.",
    "I'm vegetarian and never eat meat.", "My wife's birthday is on March 3rd.", "I jog five kilometers every morning.",
    "Our wedding anniversary dinner is booked at Luigi's.", "I have two kids, Tom and Lily.",
    "I can't stand horror movies.", "My flight to Berlin leaves Friday at 7am.",
    "我每天早上喝一杯黑咖啡。", "我在一家银行做会计。", "我的车是白色的特斯拉。", "我儿子在读小学三年级。",
    "我下个月要去日本旅行。", "我不吃辣。", "我老婆是小学老师。", "我每周打两次羽毛球。", "我最喜欢的歌手是周杰伦。",
    "我住在上海浦东。",
]
# (question, index of the memory that answers it)
PARAPHRASES = [
    ("Which city is my sibling based in?", 0), ("What car do I own?", 1), ("What's my job?", 2),
    ("Do I have any dietary restrictions?", 3), ("When was my spouse born?", 4), ("What exercise routine do I follow?", 5),
    ("Where are we celebrating being married?", 6), ("How many children do I have?", 7),
    ("Which film genre do I dislike?", 8), ("When does my plane depart for Germany?", 9),
    ("你平时早餐饮用什么？", 10), ("你从事什么工作？", 11), ("你开什么汽车？", 12), ("孩子现在念书念到哪一步了？", 13),
    ("最近有出国的计划吗？", 14), ("你能接受重口味的川菜吗？", 15), ("你妻子从事什么职业？", 16), ("你平时做什么运动？", 17),
    ("你偏爱哪位音乐人？", 18), ("你家在哪个城市？", 19),
    ("What do I do for a living?", 11), ("你有几个孩子？", 7), ("Which sport do I play?", 17), ("你姐姐住在哪里？", 0),
]
OFF_TOPIC = [
    "How many bones are in the human body?", "Who painted the Mona Lisa?", "What is the square root of 144?",
    "Explain how a refrigerator works.", "What's a good name for a goldfish?", "How long should I boil an egg?",
    "Which planet has rings?", "What language is spoken in Brazil?", "What is the capital of Canada?",
    "How do airplanes stay in the air?", "怎么修自行车的链条？", "长江有多长？", "如何冲泡绿茶？", "太阳为什么是热的？",
    "什么是区块链？", "北极熊生活在哪里？", "如何去除衣服上的油渍？", "推荐几首适合跑步听的歌。", "一斤等于多少克？",
    "电脑蓝屏了怎么办？",
]


def collect() -> list[dict[str, Any]]:
    """Each question's hits on one store of ``MEMORIES`` (the default model, no gate), with
    the features ``abstention.py`` fits on and whether each hit is the memory asked for."""
    from relevance_rows import K, evidence_rows

    from beeweave_core import BeeWeave

    rows = []
    with BeeWeave() as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        for query, want in [*PARAPHRASES, *((q, None) for q in OFF_TOPIC)]:
            hits = evidence_rows(memory, "u", query)[:K]
            for h in hits:
                h["right"] = want is not None and h["id"] == ids[want]
            rows.append({"query": query, "kind": "paraphrase" if want is not None else "unrelated", "hits": hits})
    return rows


def report(rows: list[dict[str, Any]], gate: float, key: str = "relevance") -> dict[str, float]:
    """Paraphrases answered (the right memory first, the search not silenced), paraphrases
    that put a wrong memory through the gate, unrelated questions silenced."""
    para = [r for r in rows if r["kind"] == "paraphrase"]
    off = [r for r in rows if r["kind"] == "unrelated"]

    def passes(r: dict[str, Any]) -> bool:
        return any(h[key] >= gate for h in r["hits"])

    return {"answered": sum(passes(r) and r["hits"][0]["right"] for r in para) / len(para),
            "wrong through": sum(passes(r) and not r["hits"][0]["right"] for r in para) / len(para),
            "unrelated silent": sum(not passes(r) for r in off) / len(off)}


if __name__ == "__main__":
    from beeweave_core.relevance import DEFAULT_ABSTAIN_BELOW

    print(report(collect(), DEFAULT_ABSTAIN_BELOW))
