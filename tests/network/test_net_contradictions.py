"""Memories recorded as contradicting each other come together in search results."""

from __future__ import annotations

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.engine.search_config import SearchConfig


def _store(**kw):
    return BeeWeave(embedder=HashingEmbedder(128), **kw)


def test_a_hits_rival_comes_right_after_it_with_its_confidence_and_source():
    with _store() as m:
        a = m.add("The deploy window is Friday evening", user_id="u", confidence=0.9, metadata={"source": "ops-wiki"})
        b = m.add("Never deploy on Fridays, we moved releases to Tuesday", user_id="u", confidence=0.6,
                  metadata={"source": "slack"})
        m.add("Lunch is at noon", user_id="u")
        m.relate(b, a, "contradicts", note="the team changed the release day")
        plain = m.search("deploy window Friday evening", user_id="u", k=1)
        assert [h.id for h in plain] == [a, b]  # k=1 asked, the rival came with it
        rival = plain[1]
        assert rival.sources["contradicts"].from_id == a and rival.sources["contradicts"].via == "contradicts"
        assert (rival.chunk.confidence, rival.chunk.metadata["source"]) == (0.6, "slack")
        assert rival.score == plain[0].score


def test_only_recorded_contradictions_and_only_in_scope():
    with _store() as m:
        a = m.add("The deploy window is Friday evening", user_id="u", confidence=0.9)
        b = m.add("Releases moved to Tuesday", user_id="u", confidence=0.6, metadata={"source": "slack"})
        c = m.add("Releases moved to Tuesday morning", user_id="u", tags=["hidden"])
        assert [h.id for h in m.search("deploy window Friday evening", user_id="u", k=1)] == [a]
        m.relate(a, b, "contradicts")
        m.relate(c, a, "contradicts")
        hits = m.search("deploy window Friday evening", user_id="u", k=1)
        assert [h.id for h in hits[:1]] == [a] and {h.id for h in hits[1:]} == {b, c}
        rival = next(h for h in hits if h.id == b)
        assert (rival.chunk.confidence, rival.chunk.metadata["source"]) == (0.6, "slack")
        scoped = m.search("deploy window Friday evening", user_id="u", k=1, filters={"ids": [a, b]})
        assert [h.id for h in scoped] == [a, b]
        assert [h.id for h in m.search("deploy window Friday evening", user_id="other", k=1)] == []


def test_a_rival_already_found_moves_next_to_it_and_the_option_turns_it_off():
    with _store() as m:
        a = m.add("deploy window Friday evening", user_id="u")
        m.add("deploy window Friday", user_id="u")
        b = m.add("deploy window is Tuesday not Friday", user_id="u")
        m.relate(b, a, "contradicts")
        hits = m.search("deploy window Friday evening", user_id="u", k=3)
        ids = [h.id for h in hits]
        assert len(ids) == 3 and ids.index(b) == ids.index(a) + 1
        assert all(x.score >= y.score for x, y in zip(hits, hits[1:]))
    with _store(config=SearchConfig(contradictions=False)) as m:
        a = m.add("deploy window Friday evening", user_id="u")
        b = m.add("releases are on Tuesday", user_id="u")
        m.relate(a, b, "contradicts")
        assert [h.id for h in m.search("deploy window Friday evening", user_id="u", k=1)] == [a]
