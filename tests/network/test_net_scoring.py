"""The final score: relevance times the weight, confidence and (opt-in) recency factors."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest

from beeweave_core import ScoringConfig
from tests.support import sentence

PLAIN = ScoringConfig(use_weight=False, use_confidence=False)
QUERIES = ("python memory search", "coffee morning meeting", "deploy the kubernetes cluster", "travel budget")


def _fill(m, n=50, seed=11):
    rnd = random.Random(seed)
    m.add_many([dict(content=sentence(rnd), user_id="u", chunk_id=f"m{i:02d}") for i in range(n)])


def _ranked(m, q, k=10):
    return [(h.id, h.score) for h in m.search(q, user_id="u", k=k)]


def test_without_feedback_the_final_ranking_is_plain_relevance(make):
    default, plain = make(), make(scoring=PLAIN)
    _fill(default)
    _fill(plain)
    for q in QUERIES:
        assert _ranked(default, q) == _ranked(plain, q)


@pytest.mark.parametrize("weight", [3.0, 0.5, 7.0])
def test_a_memorys_weight_multiplies_its_score_by_log1p_w_over_log2(make, weight):
    m = make()
    _fill(m)
    before = dict(_ranked(m, "python memory search", k=50))
    target = sorted(before, key=before.get)[len(before) // 2]  # a middling hit
    m.update(target, weight=weight)
    after = dict(_ranked(m, "python memory search", k=50))
    assert after[target] == pytest.approx(before[target] * math.log1p(weight) / math.log(2), rel=1e-9)
    assert {i: s for i, s in after.items() if i != target} == pytest.approx(
        {i: s for i, s in before.items() if i != target}, rel=1e-12)


def test_raising_the_weight_lifts_a_memory_above_its_neighbours(make):
    m = make()
    _fill(m)
    hits = _ranked(m, "coffee morning meeting")
    second, first = hits[1], hits[0]
    assert second[1] * 2 > first[1]  # doubling is enough to overtake
    m.update(second[0], weight=3.0)  # log(4) / log(2) = 2
    assert _ranked(m, "coffee morning meeting")[0][0] == second[0]


def test_confidence_lowers_a_memory(make):
    m = make()
    _fill(m)
    hits = dict(_ranked(m, "deploy the kubernetes cluster", k=50))
    top = max(hits, key=hits.get)
    m.update(top, confidence=0.25)
    after = dict(_ranked(m, "deploy the kubernetes cluster", k=50))
    assert after[top] == pytest.approx(hits[top] * 0.25, rel=1e-9)
    assert max(after, key=after.get) != top


def test_recency_is_off_by_default_only_going_unused_sinks_a_memory(make, clock):
    m, flat = make(), make(scoring=ScoringConfig(unused_decay=1.0))
    for store in (m, flat):
        store.add("the quarterly budget report", user_id="u", chunk_id="a-old")
    clock.advance(days=30)
    for store in (m, flat):
        store.add("the quarterly budget report", user_id="u", chunk_id="b-new")
    hits = _ranked(flat, "budget report")
    assert [i for i, _ in hits] == ["a-old", "b-new"] and hits[0][1] == hits[1][1]
    # By default the memory unused for 30 days has sunk: weight 0.5 + 0.5 * 0.98 ** 30.
    sunk = dict(_ranked(m, "budget report"))
    factor = math.log1p(0.5 + 0.5 * 0.98**30) / math.log(2)
    assert sunk == pytest.approx({"b-new": hits[1][1], "a-old": hits[0][1] * factor}, rel=1e-9)


def test_with_a_half_life_older_memories_sink_by_half_per_half_life(make, clock):
    recent, plain = make(scoring=ScoringConfig(recency_half_life=timedelta(days=1))), make()
    for m in (recent, plain):
        m.add("the quarterly budget report", user_id="u", chunk_id="a-old")
    clock.advance(days=2)
    for m in (recent, plain):
        m.add("the quarterly budget report", user_id="u", chunk_id="b-new")
    clock.advance(days=1)
    base = dict(_ranked(plain, "budget report"))
    hits = _ranked(recent, "budget report")
    assert [i for i, _ in hits] == ["b-new", "a-old"]
    assert dict(hits) == pytest.approx({"b-new": base["b-new"] * 0.5, "a-old": base["a-old"] * 0.125}, rel=1e-9)


def test_rank_fields_give_the_same_factor_as_the_record(make, clock):
    from beeweave_core.scoring import RankFields, score_factor

    m = make()
    _fill(m, n=8)
    now = clock.now
    m.update("m01", weight=4.0, reinforced_at=now - timedelta(days=3))
    m.update("m02", weight=0.3, metadata={"stale": True}, confidence=0.25)
    m.update("m03", pinned=True, weight=2.0, expires_at=now - timedelta(hours=1))
    m.update("m04", expires_at=now - timedelta(seconds=1), timestamp=now - timedelta(days=40))
    configs = [ScoringConfig(), PLAIN, ScoringConfig(recency_half_life=timedelta(days=7), decay=0.5)]
    for c in m.get_many([f"m{i:02d}" for i in range(8)]):
        fields = m.backend.rank_fields([c.id])[c.id]
        assert fields == RankFields.of(c)
        for cfg in configs:
            assert score_factor(fields, now, cfg) == score_factor(c, now, cfg)


def test_a_search_ranks_its_pool_then_reads_only_the_records_it_returns(make):
    m = make()
    _fill(m)
    k = 5
    pool = [i for i, _ in _ranked(m, "python memory search", k=2 * k)]
    lifted = pool[-1]  # within the fused pool, below the cut by relevance alone
    m.update(lifted, weight=50.0)
    read: list[list[str]] = []
    get = m.backend.get
    m.backend.get = lambda ids: read.append(list(ids)) or get(ids)  # type: ignore[method-assign]
    hits = m.search("python memory search", user_id="u", k=k)
    assert lifted in [h.id for h in hits]
    assert read == [[h.id for h in hits]]
    read.clear()
    m.search("python memory search", user_id="u", k=k, mmr=0.5)  # diversity needs the whole pool
    assert len(read) == 1 and len(read[0]) > k
