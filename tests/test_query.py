"""Queries that are a conversation: the latest turns weigh more, markup goes, cost is bounded."""

from __future__ import annotations

import time

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.query import QueryLimits, prepare_query, split_turns, strip_markup
from beeweave_core.tokenizer import Tokenizer

TOK = Tokenizer()

DIALOGUE = """User: Hi! I went hiking last weekend.
Assistant: That sounds **great**. Where did you go?
User: Mount Tam, with my sister <b>Anna</b>. See [photos](https://example.com/p).
Assistant: Nice! Anything else on your mind?
User: What was the name of my dog again?"""


def test_split_turns_and_strip_markup() -> None:
    turns = split_turns(DIALOGUE)
    assert len(turns) == 5 and turns[-1] == "What was the name of my dog again?"
    assert split_turns("用户：我今天去了北京\n助手：好的\n用户：我昨天买了什么？") == ["我今天去了北京", "好的", "我昨天买了什么？"]
    assert [strip_markup(t).strip() for t in split_turns("<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\nhi<|im_end|>")] == ["hello there", "hi"]
    assert split_turns("At 10:30 we met.\nAt 11:00 we left.\nAt 12:00 lunch.") == []  # times are no speaker tags
    assert split_turns("Just a question about my dog?") == []
    clean = strip_markup("**Bold** <i>x</i> [link text](http://a.b/c) `code` # Title")
    assert "*" not in clean and "<" not in clean and "http" not in clean and "link text" in clean


def test_latest_turn_weighs_most() -> None:
    p = prepare_query(DIALOGUE, TOK)
    assert p.turns == 5
    assert p.terms["dog"] > p.terms["hike"] and p.terms["name"] > p.terms["sister"]
    assert "b" not in p.terms and "http" not in p.terms and "com" not in p.terms  # markup stripped
    assert p.text.endswith("What was the name of my dog again?")


def test_a_plain_question_is_unchanged() -> None:
    q = "What was the name of my dog again?"
    p = prepare_query(q, TOK)
    assert p.turns == 0 and p.text == q
    assert p.terms == {t: TOK(q).count(t) for t in TOK(q)}


def test_cost_is_bounded() -> None:
    limits = QueryLimits()
    turns = [f"{'User' if i % 2 else 'Assistant'}: message {i} about topic{i} and subject{i} with detail{i}"
             for i in range(400)]
    long = "\n".join(turns)  # ~25,000 characters
    start = time.perf_counter()
    p = prepare_query(long, TOK)
    assert time.perf_counter() - start < 1.0
    assert len(p.terms) <= limits.max_terms and len(p.text) <= limits.embed_chars
    assert "topic399" in p.terms and "topic0" not in p.terms  # the newest kept
    assert "detail399" in p.text


def test_search_with_a_dialogue_finds_what_the_last_turn_asks() -> None:
    with BeeWeave(embedder=HashingEmbedder(32)) as m:
        m.add("My dog is called Biscuit", user_id="u", chunk_id="dog")
        m.add("We hiked Mount Tam last weekend with Anna", user_id="u", chunk_id="hike")
        m.add("The weekend weather was great for hiking", user_id="u", chunk_id="weather")
        m.add("Anna is my sister and lives in Oakland", user_id="u", chunk_id="sister")
        for i in range(6):
            m.add(f"Shopping list item {i}: milk and eggs", user_id="u", chunk_id=f"shop{i}")
        assert m.search(DIALOGUE, user_id="u", k=1)[0].id == "dog"
