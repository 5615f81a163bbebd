"""A query term no memory in scope holds weighs, in the lexical evidence, as the heaviest
matched term would score were it as rare as a term can be (``relevance.lexical_evidence``):
a name most turns of a dialogue hold is not half the evidence for a question about something
the store never mentions, while a rare matched term leaves the evidence as it was."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.filters import build_filter
from beeweave_core.query import prepare_query
from beeweave_core.relevance import lexical_evidence
from beeweave_core.store.exchange import TermEvidence

DIALOGUE = ["Jon: Oof, sorry to hear that. What's up?", "Jon: I started a dance class last week.",
            "Gina: How is the studio going?", "Jon: The studio is almost ready.",
            "Jon: We painted the walls blue.", "Gina: That sounds lovely.",
            "Jon: My sister brought a kiwi tart.", "Jon: The opening is on Saturday.",
            "Jon: I will invite the neighbours.", "Gina: Count me in!"]


@pytest.fixture
def dialogue():
    m = BeeWeave(embedder=HashingEmbedder(64))
    m.add_many([{"content": t, "user_id": "u"} for t in DIALOGUE], show_progress=False)
    yield m
    m.close()


def _lexical(m: BeeWeave, query: str) -> tuple[dict[str, str], dict[str, float], dict[str, float], float]:
    """(id by text, each memory's lexical evidence, the query terms' idf, the rare idf)."""
    shared = m.parts.shared
    ids = {c.content: c.id for c in m.get_all(user_id="u").items}
    terms = prepare_query(query, shared.tokenizer).terms
    lex = lexical_evidence(shared.backend, terms, build_filter(None, user_id="u"), list(ids.values()))
    idf, rare = shared.backend.term_idf(list(terms))
    return ids, lex, idf, rare


def test_a_common_matched_term_does_not_make_half_the_evidence(dialogue) -> None:
    ids, lex, idf, rare = _lexical(dialogue, "What is Jon allergic to?")
    assert "allergic" not in idf and idf["jon"] < rare / 4  # the name: most turns hold it
    # As the name alone once read: its best against itself and an absent term of the same
    # weight, 0.5. Now the absent term weighs as a term one memory holds.
    assert lex[ids["Jon: Oof, sorry to hear that. What's up?"]] < 0.2
    assert max(lex.values()) < 0.2


def test_a_rare_matched_term_leaves_the_evidence_as_it_was(dialogue) -> None:
    ids, lex, idf, rare = _lexical(dialogue, "Is the kiwi allergic?")
    assert idf["kiwi"] == pytest.approx(rare)  # one memory holds it
    assert lex[ids["Jon: My sister brought a kiwi tart."]] == pytest.approx(0.5)


def test_the_absent_weight_is_the_matched_terms_best_rescaled_to_the_rare_idf() -> None:
    found = TermEvidence(best={"jon": 0.4, "dance": 1.2}, lexical={"a": 0.4, "b": 1.6},
                         idf={"jon": 0.2, "dance": 1.5}, rare=2.0)
    got = lexical_evidence(None, {"jon": 1, "dance": 1, "allergic": 1}, build_filter(None), ["a", "b"],  # type: ignore[arg-type]
                           found=found)
    absent = max(0.4 * 2.0 / 0.2, 1.2 * 2.0 / 1.5)  # the name's 4.0: as if one memory held it
    assert got == pytest.approx({"a": 0.4 / (1.6 + absent), "b": 1.6 / (1.6 + absent)})
    # every term rare: the absent one weighs as the heaviest best, as before
    rare = TermEvidence(best={"jon": 0.4, "dance": 1.2}, lexical={"a": 0.4}, idf={"jon": 2.0, "dance": 2.0}, rare=2.0)
    got = lexical_evidence(None, {"jon": 1, "dance": 1, "allergic": 1}, build_filter(None), ["a"],  # type: ignore[arg-type]
                           found=rare)
    assert got == pytest.approx({"a": 0.4 / (1.6 + 1.2)})
