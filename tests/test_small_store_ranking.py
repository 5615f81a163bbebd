"""Small stores rank the memory that answers first (issue 42).

Every user starts with a small store, and a team's store starts with each member's first few
memories, often of the same kinds (an editor, an allergy, a staging port). There rank_bm25's
idf, ``log((N - df + .5) / (df + .5))``, is 0 for a term in half the memories and negative
above, and its floor (``epsilon`` times the mean idf) is negative too when most terms are
common (a LangGraph item's JSON repeats its keys in every memory): a memory holding the
question's words then scored below one holding none of them, and where that left the two
retrievers' z-scores tied, the ids ordered the hits. Lucene's idf is positive for every df
(``beeweave_core/index/bm25.py``), and equal fused totals fall back to the dense retriever's
score (``beeweave_core/fusion.py``).

The stores use the hashing embedder (``beeweave:hashing-64``): no model, and its vectors
know nothing of meaning, so the ranking rests on the lexical side as much as on the vectors.
The filler memories are a team's ordinary facts, English and Chinese, the same list for
every question; each store adds the answer to the first n - 1 of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.fusion import FusionMode, fuse, fuse_scores

# A team's store: who prefers what, who works how, in English and in Chinese.
TEAM = [
    ("alice", "Alice prefers answers in Chinese."),
    ("bob", "Bob's staging database listens on port 5432."),
    ("carol", "Carol prefers answers in English."),
    ("bob", "Bob is allergic to shellfish."),
    ("alice", "Alice 喜欢喝乌龙茶。"),
    ("dave", "Dave's staging server uses port 8080."),
    ("carol", "Carol 对猫毛过敏。"),
    ("bob", "Bob 喜欢喝咖啡。"),
    ("dave", "Dave uses emacs as his editor."),
    ("alice", "Alice lives in Lyon."),
    ("carol", "Carol's team deploys to production on Tuesdays."),
    ("bob", "Bob 每周五在家办公。"),
    ("dave", "Dave prefers short answers."),
    ("alice", "Alice's manager is Erin."),
    ("carol", "Carol 的猫叫 Tofu。"),
    ("bob", "Bob uses VS Code as his editor."),
    ("dave", "Dave 住在上海。"),
    ("alice", "Alice takes the train to work."),
    ("carol", "Carol's staging cluster runs on Kubernetes."),
    ("bob", "Bob lives in Berlin."),
    ("dave", "Dave 对花粉过敏。"),
    ("alice", "Alice is learning Japanese."),
    ("carol", "Carol 每周三在家办公。"),
    ("bob", "Bob's manager is Erin."),
    ("dave", "Dave drinks green tea in the morning."),
    ("alice", "Alice's favourite programming language is Rust."),
    ("carol", "Carol takes the bus to work."),
    ("bob", "Bob 正在学西班牙语。"),
    ("dave", "Dave's laptop runs macOS."),
    ("alice", "Alice 的生日是三月三日。"),
    ("carol", "Carol uses vim as her editor."),
    ("bob", "Bob prefers answers with code examples."),
    ("dave", "Dave 喜欢跑步。"),
    ("alice", "Alice's laptop runs Ubuntu 24.04."),
    ("carol", "Carol is vegetarian."),
    ("bob", "Bob's favourite programming language is Go."),
    ("dave", "Dave's manager is Frank."),
    ("alice", "Alice 周末喜欢爬山。"),
    ("carol", "Carol 坐地铁上班。"),
    ("bob", "Bob drinks espresso after lunch."),
    ("dave", "Dave is allergic to penicillin."),
    ("alice", "Alice reads science fiction before bed."),
    ("carol", "Carol's birthday is on June 9."),
    ("bob", "Bob 的经理是 Erin。"),
    ("dave", "Dave 每周一在家办公。"),
    ("alice", "Alice speaks French and English."),
    ("carol", "Carol runs the design review on Thursdays."),
    ("bob", "Bob takes the tram to work."),
    ("dave", "Dave's team deploys to staging every night."),
]

# Alice's questions and the memory of hers that answers each.
QUESTIONS = [
    ("which port does staging use", "Alice's staging database listens on port 5433."),
    ("What is Alice allergic to?", "Alice is allergic to peanuts."),
    ("which editor does Alice use", "Alice uses vim as her editor."),
    ("Alice 对什么过敏？", "Alice 对花生过敏。"),
    ("Alice 哪天在家办公？", "Alice 每周一在家办公。"),
    ("测试环境的数据库用哪个端口？", "测试环境的数据库监听 5433 端口。"),
]

SIZES = (3, 10, 50)
FACES = ("BeeWeave.search", "BeeWeaveStore.search")


@contextmanager
def searcher(face: str, memories: list[tuple[str, str]]) -> Iterator:
    """A store of ``memories`` (user, text), added in order, and a function that returns the
    texts of one user's best hits for a question, through ``face``."""
    memory = BeeWeave(embedder="beeweave:hashing-64")
    try:
        if face == "BeeWeave.search":
            for user, text in memories:
                memory.add(text, user_id=user)

            def search(user: str, question: str) -> list[str]:
                return [h.chunk.raw_content for h in memory.search(question, user_id=user, k=3)]
        else:
            pytest.importorskip("langgraph")
            from beeweave_langchain import BeeWeaveStore

            store = BeeWeaveStore(memory)  # indexes the whole value, as JSON: {"text": ...}
            for i, (user, text) in enumerate(memories):
                store.put(("memories", user), f"m{i}", {"text": text})

            def search(user: str, question: str) -> list[str]:
                return [it.value["text"] for it in store.search(("memories", user), query=question, limit=3)]
        yield search
    finally:
        memory.close()


def test_the_team_store_is_general() -> None:
    """Guards the fixture: no filler answers a question, and the answers are Alice's alone."""
    texts = [t for _, t in TEAM]
    assert len(texts) == len(set(texts)) >= max(SIZES) - 1
    assert not {a for _, a in QUESTIONS} & set(texts)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("question", "answer"), QUESTIONS)
def test_the_answer_ranks_first(face: str, size: int, question: str, answer: str) -> None:
    with searcher(face, [("alice", answer), *TEAM[: size - 1]]) as search:
        hits = search("alice", question)
    assert hits and hits[0] == answer, (size, question, hits)


# Three memories of a team's first days: Alice's answer, a colleague's memory of the same kind
# (their editor, their allergy, their day at home) and another of Alice's. The colleague's
# puts the question's words in two of the three memories.
FIRST_DAYS = [
    ("which editor does Alice use", "Alice uses vim as her editor.",
     ("carol", "Carol uses vim as her editor."), ("alice", "Alice lives in Lyon.")),
    ("What is Alice allergic to?", "Alice is allergic to peanuts.",
     ("bob", "Bob is allergic to shellfish."), ("alice", "Alice lives in Lyon.")),
    ("which port does staging use", "Alice's staging database listens on port 5433.",
     ("bob", "Bob's staging database listens on port 5432."), ("alice", "Alice's manager is Erin.")),
    ("Alice 哪天在家办公？", "Alice 每周一在家办公。",
     ("dave", "Dave 每周一在家办公。"), ("alice", "Alice takes the train to work.")),
    ("Alice 的猫叫什么？", "Alice 的猫叫 Miso。",
     ("carol", "Carol 的猫叫 Tofu。"), ("alice", "Alice speaks French and English.")),
]


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(("question", "answer", "colleague", "other"), FIRST_DAYS)
def test_a_colleagues_memory_of_the_same_kind_does_not_bury_the_answer(
        face: str, question: str, answer: str, colleague: tuple[str, str], other: tuple[str, str]) -> None:
    for memories in ([("alice", answer), colleague, other], [other, colleague, ("alice", answer)]):
        with searcher(face, memories) as search:
            hits = search("alice", question)
        assert hits and hits[0] == answer, (question, hits)


# -- fusion: equal totals fall back to the dense retriever ------------------------------------
def test_two_candidates_ranked_oppositely_tie_and_the_vector_breaks_the_tie() -> None:
    """Two candidates that BM25 and the vectors rank oppositely have z-scores +1 and -1 in each
    list: their totals are equal (up to rounding, which must not decide), and the better
    vector score comes first, whatever the ids and their order."""
    rng = np.random.default_rng(42)
    for _ in range(300):
        lex = np.sort(rng.random(2))  # the second candidate is BM25's
        vec = np.sort(rng.random(2))[::-1].copy()  # the first is the vectors'
        for ids in (["a", "b"], ["b", "a"], ["z9", "a1"]):
            for mode in (FusionMode.ZSCORE, FusionMode.WEIGHTED):
                got = fuse_scores(ids, {"lexical": lex, "vector": vec}, mode=mode)
                assert [c for c, _, _ in got] == [ids[0], ids[1]], (lex, vec, mode)
                assert got[0][1] == got[1][1]  # reported as the one total they are
                ranked = {name: sorted(zip(ids, s.tolist()), key=lambda kv: (-kv[1], kv[0]))
                          for name, s in (("lexical", lex), ("vector", vec))}
                assert [(c, t) for c, t, _ in fuse(ranked, mode=mode)] == [(c, t) for c, t, _ in got]


def test_the_vector_breaks_ties_whatever_the_order_of_the_lists() -> None:
    ids = ["x", "y", "z"]
    lex, vec = np.array([1.0, 3.0, 0.0]), np.array([0.9, 0.2, 0.0])  # x and y swap ranks: a tie
    for scores in ({"lexical": lex, "vector": vec}, {"vector": vec, "lexical": lex}):
        got = fuse_scores(ids, scores, mode=FusionMode.RRF)
        assert got[0][1] == got[1][1]
        assert [c for c, _, _ in got] == ["x", "y", "z"]


def test_totals_that_differ_are_not_taken_for_ties() -> None:
    ids = ["a", "b", "c"]
    got = fuse_scores(ids, {"lexical": np.array([1.0, 0.0, 0.5]), "vector": np.array([0.0, 0.3, 0.1])})
    totals = [t for _, t, _ in got]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 3
    assert [c for c, _, _ in got] == ["a", "b", "c"]  # a's total is higher, by 0.04: not a tie
