"""Relevance is read on each embedding model's own curve: the default model's (fitted for
its cosine scale, with the query's background), MiniLM's, and for a model nobody fitted,
MiniLM's as a reading with no gate of its own. The tuned gate silences off-topic questions."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave
from beeweave_core.embedders import DEFAULT_MODEL_NAME, MINILM_MODEL_NAME
from beeweave_core.relevance import (
    BACKGROUND,
    DEFAULT_ABSTAIN_BELOW,
    E5_CALIBRATION,
    MINILM_CALIBRATION,
    UNCALIBRATED,
    Evidence,
    calibration_for,
    relevance,
)

MEMORIES = ["I am allergic to peanuts.", "Staging listens on port 5433.", "我住在杭州西湖区。"]
OFF_TOPIC = ["How far is the Moon?", "What is the boiling point of water?", "Recommend a good sci-fi novel.",
             "今天的汇率是多少？"]


def test_each_model_has_its_curve_and_an_unknown_one_no_gate() -> None:
    assert calibration_for(DEFAULT_MODEL_NAME) is E5_CALIBRATION
    assert E5_CALIBRATION.abstain_below == DEFAULT_ABSTAIN_BELOW
    assert calibration_for(MINILM_MODEL_NAME) is MINILM_CALIBRATION
    assert calibration_for("beeweave:hashing-64") is UNCALIBRATED and UNCALIBRATED.abstain_below is None
    # the same evidence means other things on two models' cosine scales
    ev = Evidence(cosine=0.8, background=0.78)
    assert relevance(ev, calibration=E5_CALIBRATION) < 0.1 < relevance(ev, calibration=MINILM_CALIBRATION)
    # on the default model's curve a memory well above the query's background counts for more
    assert relevance(Evidence(0.9, background=0.75)) > relevance(Evidence(0.9, background=0.85))


@pytest.mark.model
def test_the_tuned_gate_silences_off_topic_questions_and_keeps_on_topic_ones() -> None:
    with BeeWeave() as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t in MEMORIES], show_progress=False)
        for q in OFF_TOPIC:
            assert memory.search(q, user_id="u")  # no gate by default
            assert memory.search(q, user_id="u", abstain_below=DEFAULT_ABSTAIN_BELOW) == [], q
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
        (other,) = memory.search("How far is the Moon?", user_id="u")
        assert other.relevance is not None and other.relevance < 0.1
        assert hit.score == pytest.approx(other.score)  # the fused score of a one-memory store says nothing
