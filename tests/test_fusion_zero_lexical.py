"""RRF credits a retriever's rank only to what it matched, and ties never fall to random ids.

Regression: a term in exactly half the store has BM25 idf 0, so every BM25 score is 0; RRF still
gave every candidate credit for a lexical rank decided by its (random uuid) id, so an unrelated
memory could come first and the order changed from one build to the next.
"""

from __future__ import annotations

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.fusion import FusionMode, fuse, fuse_scores

TEXTS = ["I'm allergic to peanuts.", "Peanuts are banned at school.", "I live in Lyon.", "My car is a blue Renault."]
PEANUTS = set(TEXTS[:2])


def _order() -> list[str]:
    m = BeeWeave(embedder="beeweave:hashing-64")
    try:
        for t in TEXTS:
            m.add(t, user_id="u")
        return [h.chunk.raw_content for h in m.search("peanuts", user_id="u", k=4, fusion="rrf")]
    finally:
        m.close()


def test_rrf_with_an_all_zero_bm25_list_ranks_the_matches_first_every_build() -> None:
    orders = [_order() for _ in range(8)]
    for got in orders:
        assert set(got[:2]) == PEANUTS, got
    assert len({tuple(o[:2]) for o in orders}) == 1, orders


@pytest.mark.parametrize("ids", [["a", "b", "c", "d"], ["d", "c", "b", "a"], ["z9", "a1", "m5", "b2"]])
def test_a_list_that_matched_nothing_adds_nothing_and_ties_do_not_depend_on_ids(ids) -> None:
    lexical = np.zeros(4)
    vector = np.array([0.5, 0.2, 0.0, -0.1])  # only the first two match
    got = fuse_scores(ids, {"lexical": lexical, "vector": vector}, mode=FusionMode.RRF)
    assert [c for c, _, _ in got[:2]] == ids[:2]
    assert [t for _, t, _ in got[2:]] == [0.0, 0.0]  # no credit from either list
    assert [c for c, _, _ in got[2:]] == ids[2:]  # ordered by the vector score, not the id


def test_equal_positive_scores_share_a_rank_and_the_other_list_breaks_the_tie() -> None:
    ids = ["x", "a"]
    lexical = np.array([2.0, 2.0])  # tied
    vector = np.array([0.9, 0.1])
    for perm in ([0, 1], [1, 0]):
        pid = [ids[i] for i in perm]
        got = fuse_scores(pid, {"lexical": lexical[perm], "vector": vector[perm]}, mode=FusionMode.RRF)
        assert [c for c, _, _ in got] == ["x", "a"]
    # Both tied lexical matches get rank 1's credit; the fused totals differ only by the vector.
    got = fuse_scores(ids, {"lexical": lexical, "vector": np.array([0.5, 0.5])}, mode=FusionMode.RRF)
    assert got[0][1] == got[1][1]
    assert [c for c, _, _ in got] == ["a", "x"]  # all else equal: the id


@pytest.mark.parametrize("mode", list(FusionMode))
def test_every_mode_matches_the_ranked_list_fusion_on_the_zero_case(mode) -> None:
    ids = ["p1", "p2", "u1", "u2"]
    lexical, vector = np.zeros(4), np.array([0.15, 0.26, 0.0, 0.0])
    ranked = {name: sorted(zip(ids, s.tolist()), key=lambda kv: (-kv[1], kv[0]))
              for name, s in (("lexical", lexical), ("vector", vector))}
    got = fuse_scores(ids, {"lexical": lexical, "vector": vector}, mode=mode)
    assert got == fuse(ranked, mode=mode)
    assert [c for c, _, _ in got[:2]] == ["p2", "p1"]
