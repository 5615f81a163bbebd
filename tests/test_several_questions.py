"""A query that asks several questions gets each question's answers in turn (``take_turns``)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from beeweave_core.engine.search import take_turns
from beeweave_core.records import KnowledgeChunk, SearchHit


def _hit(cid: str, score: float) -> SearchHit:
    return SearchHit(KnowledgeChunk(raw_content=cid, user_id="u", id=cid), score, {})


def test_the_other_question_is_not_crowded_out(memory) -> None:
    # The first question's second-best memory scores below the rare subject's memories of the
    # second question: merged by score alone it falls out of the top 4.
    memory.add("Dana mentioned she turned thirty-six last spring.", user_id="u")
    memory.add("Dana likes hiking.", user_id="u")
    for fact in ("starts at nine", "is in Oslo", "has 300 guests", "lasts two days", "serves vegan food",
                 "needs badges"):
        memory.add(f"The Zephyrus quarterly kickoff {fact}.", user_id="u")
    query = "How old is Dana? And what about the Zephyrus quarterly kickoff?"
    hits = memory.search(query, user_id="u", k=4, abstain_below=0)
    contents = [h.chunk.content for h in hits]
    assert "Dana mentioned she turned thirty-six last spring." in contents
    assert sum("Zephyrus" in c for c in contents) == 2
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_each_questions_best_comes_first() -> None:
    a = [_hit("a1", 9.0), _hit("a2", 8.0), _hit("a3", 7.0)]
    b = [_hit("b1", 2.0), _hit("b2", 1.0)]
    assert [h.id for h in take_turns([a, b], 4)] == ["a1", "b1", "a2", "b2"]
    # a memory both questions find keeps its best place and its best score
    both = take_turns([a, [_hit("a3", 20.0), _hit("b1", 1.0)]], 3)
    assert [h.id for h in both] == ["a3", "a1", "a2"]
    assert both[0].score == 20.0


def _reference(answers: list[list[SearchHit]], k: int) -> list[str]:
    """Round by round: every question's i-th hit (best score first) before any (i+1)-th."""
    out: list[str] = []
    for i in range(max(map(len, answers), default=0)):
        for h in sorted((hs[i] for hs in answers if i < len(hs)), key=lambda h: (-h.score, h.id)):
            if h.id not in out:
                out.append(h.id)
    return out[:k]


@given(st.lists(st.lists(st.integers(0, 12), max_size=8, unique=True), min_size=1, max_size=4),
       st.integers(1, 10), st.integers(0, 10**6))
def test_matches_the_round_by_round_reference(ids: list[list[int]], k: int, seed: int) -> None:
    rnd = random.Random(seed)
    # each question's hits sorted by its own score; one memory's score is the same everywhere
    # it is found, as in search (a memory's fused score differs by question only in ties)
    score = {i: rnd.choice([1.0, 2.0, 3.0, 4.0]) for i in range(13)}
    answers = [sorted((_hit(f"m{i}", score[i]) for i in q), key=lambda h: (-h.score, h.id)) for q in ids]
    got = take_turns(answers, k)
    assert [h.id for h in got] == _reference(answers, k)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
