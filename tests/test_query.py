"""Queries that are a conversation: the latest turns weigh more, markup goes, cost is bounded."""

from __future__ import annotations

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.query import QueryLimits, prepare_query, split_questions, split_turns, strip_markup
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
    read: list[int] = []

    def counting(text: str) -> list[str]:
        read.append(len(text))
        return TOK(text)

    p = prepare_query(long, counting)
    assert sum(read) <= limits.lexical_chars  # the cost: only the latest characters are cut
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


def test_split_questions() -> None:
    assert split_questions("下属的电话是多少？另外，我喜欢的家电是哪个呢？") == ["下属的电话是多少？", "另外，我喜欢的家电是哪个呢？"]
    assert split_questions("Where is Anna? And what is my dog called? Thanks.") == [
        "Where is Anna?", "And what is my dog called? Thanks."]
    for one in ("What was the name of my dog again?", "no question at all", "Is it? " * 5, DIALOGUE,
                "Why? " + "x" * 500):
        assert split_questions(one) == [one]


def test_a_query_asking_two_things_finds_both() -> None:
    with BeeWeave(embedder=HashingEmbedder(32)) as m:
        m.add("The air purifier is the appliance I like", user_id="u", chunk_id="purifier")
        for i in range(5):  # the first question's terms are more and rarer: they take the top k
            m.add(f"My cousin Anna's work phone number was {i}0{i} once", user_id="u", chunk_id=f"phone{i}")
        for i in range(30):
            m.add(f"Shopping list item {i}: milk and eggs", user_id="u", chunk_id=f"shop{i}")
        whole = "What is my cousin Anna's work phone number, and which appliance do I like"
        assert "purifier" not in [h.id for h in m.search(whole, user_id="u", k=3)]  # what the split fixes
        two = "What is my cousin Anna's work phone number? And which appliance do I like?"
        got = [h.id for h in m.search(two, user_id="u", k=3)]
        assert "purifier" in got and any(g.startswith("phone") for g in got)  # each question has its best
