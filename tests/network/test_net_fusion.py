"""Fusion over aligned score arrays (``fuse_scores``, the engine's path) against ``fuse`` over
the ranked lists they stand for: same ids, totals, order and sources, in every mode."""

from __future__ import annotations

import random

import numpy as np
import pytest

from beeweave_core.fusion import FusionMode, fuse, fuse_scores


def _ranked(ids: list[str], scores: np.ndarray) -> list[tuple[str, float]]:
    # As the retrievers return them: best first, ties by id.
    return sorted(zip(ids, scores.tolist()), key=lambda kv: (-kv[1], kv[0]))


@pytest.mark.parametrize("mode", list(FusionMode))
@pytest.mark.parametrize("seed", range(6))
def test_fuse_scores_equals_fusing_the_ranked_lists(mode: FusionMode, seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 5, 40, 95])
    ids = rnd.sample([f"{rnd.randrange(50)}:D{i}:{rnd.randrange(9)}" for i in range(200)], n)
    lexical = np.array([rnd.choice([0.0, 0.0, 1.5, rnd.uniform(0, 12)]) for _ in ids])  # ties and zeros
    vector = np.array([rnd.choice([0.25, rnd.uniform(-0.2, 0.9)]) for _ in ids])
    if seed == 0:
        lexical[:] = 0.0  # no query term matched: a list with no spread
    weights = None if seed % 2 else {"lexical": 0.7, "vector": 1.3}
    limit = rnd.choice([None, 0, 3, 20])
    kw = dict(mode=mode, weights=weights, rrf_k=rnd.choice([60.0, 1.0]), limit=limit)
    expected = fuse({"lexical": _ranked(ids, lexical), "vector": _ranked(ids, vector)}, **kw)
    assert fuse_scores(ids, {"lexical": lexical, "vector": vector}, **kw) == expected


def test_no_candidates_fuse_to_nothing() -> None:
    empty = np.zeros(0)
    assert fuse_scores([], {"lexical": empty, "vector": empty}) == []
