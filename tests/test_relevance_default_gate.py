"""Relevance is read on each embedding model's own curve: the default model's (fitted for
its cosine scale, with the query's background), MiniLM's, and for a model nobody fitted,
MiniLM's as a reading with no gate of its own. The tuned gate is every search's default: it
silences off-topic questions, ``abstain_below=0`` or ``min_relevance=0`` turns it off, a model
nobody fitted has none, and only the hits that reach it count as uses of their memories."""

from __future__ import annotations

import numpy as np
import pytest

from beeweave_core import BeeWeave, SearchConfig
from beeweave_core.embedders import DEFAULT_MODEL_NAME, MINILM_MODEL_NAME
from beeweave_core.relevance import (
    BACKGROUND,
    DEFAULT_ABSTAIN_BELOW,
    E5_CALIBRATION,
    MINILM_CALIBRATION,
    QUESTIONS,
    UNCALIBRATED,
    Evidence,
    calibration_for,
    counts_as_use,
    default_gate,
    lead,
    leads,
    memory_lead,
    relevance,
    semantic_leads,
)
from beeweave_core.stats import compute_stats

pytestmark = pytest.mark.slow

MEMORIES = ["I am allergic to peanuts.", "Staging listens on port 5433.", "我住在杭州西湖区。"]
OFF_TOPIC = ["How far is the Moon?", "What is the boiling point of water?", "Recommend a good sci-fi novel.",
             "今天的汇率是多少？"]


def test_each_model_has_its_curve_and_an_unknown_one_no_gate() -> None:
    assert calibration_for(DEFAULT_MODEL_NAME) is E5_CALIBRATION
    assert E5_CALIBRATION.abstain_below == DEFAULT_ABSTAIN_BELOW
    assert calibration_for(MINILM_MODEL_NAME) is MINILM_CALIBRATION
    assert calibration_for("beeweave:hashing-64") is UNCALIBRATED and UNCALIBRATED.abstain_below is None
    # the same evidence means other things on two models' cosine scales
    ev = Evidence(cosine=0.8, background=0.78, lead=-0.02)  # a memory that does not stand out
    assert relevance(ev, calibration=E5_CALIBRATION) < 0.1 < relevance(ev, calibration=MINILM_CALIBRATION)
    # on the default model's curve a memory well above the query's background counts for more
    assert relevance(Evidence(0.9, background=0.75)) > relevance(Evidence(0.9, background=0.85))


@pytest.mark.model
def test_the_tuned_gate_silences_off_topic_questions_and_keeps_on_topic_ones() -> None:
    with BeeWeave() as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        for q in OFF_TOPIC:
            assert memory.search(q, user_id="u") == [], q  # the default model's gate, by default
            assert memory.search(q, user_id="u", abstain_below=DEFAULT_ABSTAIN_BELOW) == [], q
            assert len(memory.search(q, user_id="u", abstain_below=0)) == 3  # 0: no gate, the closest anyway
            assert len(memory.search(q, user_id="u", min_relevance=0)) == 3  # no threshold at all
        hits = memory.search("what am I allergic to", user_id="u", abstain_below=DEFAULT_ABSTAIN_BELOW)
        assert hits[0].id == ids[0] and hits[0].relevance is not None and hits[0].relevance > DEFAULT_ABSTAIN_BELOW
        assert memory.search("你住在杭州吗？", user_id="u", abstain_below=DEFAULT_ABSTAIN_BELOW)[0].id == ids[2]
        # the background is the query's mean cosine with everyday statements: between -1 and 1, below a match
        qvec = memory.parts.search.embed_query("what am I allergic to")
        assert -1.0 < BACKGROUND.cosine(memory.embedder, qvec) < hits[0].sources["vector"].score


@pytest.mark.model
def test_a_one_memory_store_tells_a_matching_question_from_an_unrelated_one() -> None:
    with BeeWeave() as memory:
        memory.add("Staging listens on port 5433.", user_id="u")
        (hit,) = memory.search("which port does staging use", user_id="u")
        assert hit.relevance is not None and hit.relevance > 0.5
        assert memory.search("How far is the Moon?", user_id="u") == []
        (other,) = memory.search("How far is the Moon?", user_id="u", abstain_below=0)
        # low, as the faces' tests read it: a lone memory's lead is read against the everyday statements only
        assert other.relevance is not None and other.relevance < 0.3
        assert hit.score == pytest.approx(other.score)  # the fused score of a one-memory store says nothing


def test_the_lead_is_read_against_the_next_closest_texts_and_lifts_relevance() -> None:
    # the five highest of the other memories' and the everyday statements' cosines
    assert lead(0.90, [0.85, 0.84], [0.80, 0.83, 0.70, 0.60]) == pytest.approx(0.90 - (0.85 + 0.84 + 0.83 + 0.80 + 0.70) / 5)
    assert lead(0.9, [], []) == 0.0
    # each hit's own cosine is taken out of the candidates' top once; a hit below the top is read against it
    top = [0.90, 0.88, 0.80, 0.79, 0.78, 0.77]
    first, second = leads([0.90, 0.88], top, [])
    assert first == pytest.approx(0.90 - (0.88 + 0.80 + 0.79 + 0.78 + 0.77) / 5)
    assert second == pytest.approx(0.88 - (0.90 + 0.80 + 0.79 + 0.78 + 0.77) / 5)
    assert leads([0.5], top, []) == [pytest.approx(0.5 - sum(top[:5]) / 5)]  # not among the top
    # relevance is the higher of the word-leaning curve and the lead's: the same cosine and
    # background, no shared word, and a memory that stands out passes the gate where one that
    # does not stays below it
    alike = Evidence(cosine=0.86, background=0.77, lead=0.0)
    standing_out = alike._replace(lead=0.04)
    assert relevance(alike) < DEFAULT_ABSTAIN_BELOW < relevance(standing_out)
    assert relevance(standing_out, calibration=MINILM_CALIBRATION) == relevance(alike, calibration=MINILM_CALIBRATION)


def test_the_default_gate_is_the_configured_one_else_the_models() -> None:
    assert default_gate(None, DEFAULT_MODEL_NAME) == DEFAULT_ABSTAIN_BELOW
    assert default_gate(0.7, DEFAULT_MODEL_NAME) == 0.7 and default_gate(0.0, DEFAULT_MODEL_NAME) == 0.0
    assert default_gate(None, "beeweave:hashing-64") is None
    assert counts_as_use(0.5, 0.4) and not counts_as_use(0.3, 0.4) and not counts_as_use(None, 0.4)
    assert counts_as_use(0.01, None) and counts_as_use(0.01, 0.0)  # no gate: every hit is a use


def test_a_model_nobody_fitted_has_no_default_gate() -> None:
    with BeeWeave(embedder="beeweave:hashing-64") as memory:
        memory.add("I am allergic to peanuts.", user_id="u")
        hits = memory.search("How far is the Moon?", user_id="u")
        assert len(hits) == 1 and hits[0].relevance is not None and hits[0].relevance < 0.3  # low, not silenced


@pytest.mark.model
def test_only_hits_that_reach_the_gate_count_as_uses() -> None:
    with BeeWeave() as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        for q in OFF_TOPIC:
            assert len(memory.search(q, user_id="u", abstain_below=0)) == 3  # returned, not used
        hits = memory.search("what am I allergic to", user_id="u", k=3)
        assert len(hits) == 3 and hits[0].id == ids[0]  # the relevant one with the closest others beside it
        memory.flush()
        assert [memory.get(i).access_count for i in ids] == [1, 0, 0]
        assert [m.id for m in compute_stats(memory).hottest] == [ids[0]]  # "hottest" counts uses only
    # a store whose gate is off counts every hit it returns
    with BeeWeave(config=SearchConfig(abstain_below=0)) as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        assert len(memory.search(OFF_TOPIC[0], user_id="u")) == 3
        memory.flush()
        assert [memory.get(i).access_count for i in ids] == [1, 1, 1]


@pytest.mark.model
def test_the_cli_search_finds_nothing_off_topic_by_default(tmp_path, capsys, monkeypatch) -> None:
    from beeweave_core.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--store", "m.db", "memory", "add", "I am allergic to peanuts.", "--user-id", "u"]) == 0
    capsys.readouterr()
    assert main(["--store", "m.db", "search", "How far is the Moon?", "--user-id", "u"]) == 0
    assert "no memories found" in capsys.readouterr().out
    assert main(["--store", "m.db", "search", "How far is the Moon?", "--user-id", "u", "--abstain-below", "0"]) == 0
    assert "peanuts" in capsys.readouterr().out
    assert main(["--store", "m.db", "search", "What am I allergic to?", "--user-id", "u"]) == 0
    assert "peanuts" in capsys.readouterr().out


class _Embedder:
    """Two-dimensional stand-in: every everyday statement and question along the second axis."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.0, 1.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [0.0, 1.0]


class _Vectors:
    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors, self.asked = vectors, []

    def get_vectors(self, ids):
        self.asked.append(list(ids))
        return {i: np.asarray(self.vectors[i], dtype=np.float32) for i in ids}


def test_the_lead_is_at_most_how_far_the_memory_stands_above_its_closeness_to_any_question() -> None:
    query = np.asarray([0.8, 0.6], dtype=np.float32)
    # "a" stands out from the statements (cosine 0.6 with each) and is far from everyday questions;
    # "b" has the same cosine with the question but is as close to every everyday question
    backend = _Vectors({"a": [1.0, 0.0], "b": [0.6, 0.8]})
    embedder = _Embedder()
    background = BACKGROUND.cosines(embedder, query).tolist()
    a, b = semantic_leads(backend, embedder, ["a", "b"], [0.9, 0.9], [0.9, 0.9], query, background=background)
    assert a == pytest.approx(0.9 - (0.9 + 0.6 * 4) / 5)  # the question's side: the statements and the other hit
    # b's own side: its cosine with the question (0.96) less its cosine with every everyday question (0.8)
    assert memory_lead(np.asarray([0.6, 0.8]), query, QUESTIONS.vectors(embedder)) == pytest.approx(0.96 - 0.8)
    assert b == pytest.approx(0.96 - 0.8) and b < a and backend.asked == [["a", "b"]]
    # a hit whose question side cannot change its relevance is not read
    backend.asked.clear()
    semantic_leads(backend, embedder, ["a", "b"], [0.9, 0.9], [0.9, 0.9], query, lambda cid, _: cid == "a",
                   background=background)
    assert backend.asked == [["a"]]


def test_the_gate_puts_what_it_judged_relevant_first() -> None:
    """Past the gate, the hits that reach it lead (each side as ranked, scores kept sorted):
    the ranking's session context can lift a neighbour of the answer above it."""
    from beeweave_core.records import KnowledgeChunk, SearchHit
    from beeweave_core.relevance import gated

    def hit(cid: str, score: float, rel: float) -> SearchHit:
        return SearchHit(KnowledgeChunk(raw_content=cid, user_id="u", id=cid), score, {}, relevance=rel)

    hits = [hit("neighbour", 0.9, 0.05), hit("answer", 0.8, 0.9), hit("other", 0.7, 0.1), hit("also", 0.6, 0.5)]
    out = gated(hits, 0.4)
    assert [h.id for h in out] == ["answer", "also", "neighbour", "other"]
    assert [h.score for h in out] == [0.8, 0.6, 0.6, 0.6]
    assert [h.relevance for h in out] == [0.9, 0.5, 0.05, 0.1]
    assert gated(hits, 0.95) == []
    assert gated(hits, 0) == hits and gated(hits, None) == hits
