"""Use (praise, going unused) orders only memories of comparable relevance: it reorders hits
on the same side of the store's gate and never lifts one past a hit of the other side; blame
and the other penalties still sink a memory whatever its relevance (issue 44)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import beeweave_core.engine.search as search_module
from beeweave_core import BeeWeave, HashingEmbedder, SearchConfig
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.scoring import ScoringConfig, rank_factors, score_factor, use_order
from tests.lifecycle.lifecycle_support import Clock
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

FACTS = ["The billing API listens on port 8443 behind the gateway.",
         "Database backups go to the cold-storage bucket in Frankfurt.",
         "Access logs are kept for 180 days, then deleted.",
         "The postmortem template is in the wiki under Templates.",
         "Nightly jobs are scheduled in UTC, never local time.",
         "Paging alerts go to the ops pager channel.",
         "Uploads are limited to 50 megabytes per file."]
TEMPLATE = 3  # the answer to QUESTION
QUESTION = "Where is the postmortem template?"
GATE = 0.3  # the store's gate: the hashing embedder has no tuned one


def _store(clock: Clock, gate: float | None = GATE, url: str | None = None) -> BeeWeave:
    kw: dict[str, Any] = dict(embedder=HashingEmbedder(256), clock=clock,
                              config=SearchConfig(abstain_below=gate) if gate is not None else None,
                              lifecycle=LifecycleConfig(access_flush_interval=0.0))
    if url is not None:  # PostgreSQL answers a search in one round trip (``Candidates``)
        return BeeWeave.from_url(url, tenant=new_tenant("use"), **kw)
    return BeeWeave(**kw)


@pytest.fixture(params=["memory", "postgres"])
def url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_url") if request.param == "postgres" else None


def _ids(m: BeeWeave, query: str, k: int = 7) -> list[str]:
    return [h.id for h in m.search(query, user_id="u", k=k, abstain_below=0)]


def test_use_order_sorts_each_run_of_one_side_and_crosses_no_boundary() -> None:
    # plain order: two relevant hits, three below the gate, one relevant again
    lifted = [0.5, 0.9, 3.0, 0.1, 2.0, 0.7]
    relevant = [True, True, False, False, False, True]
    assert use_order(lifted, relevant) == [1, 0, 2, 4, 3, 5]
    assert use_order([1.0, 1.0, 2.0], [True] * 3) == [2, 0, 1]  # stable within a run
    assert use_order([], []) == []


def test_rank_factors_split_the_old_factor_into_lift_and_penalty(clock: Clock) -> None:
    m = _store(clock, gate=None)
    a, b, c = (m.add(t, user_id="u") for t in FACTS[:3])
    m.feedback([a], "up")
    m.feedback([b], "down")
    clock.advance(days=3)
    cfg = ScoringConfig()
    lift, penalty = rank_factors(m.get(a), clock.now, cfg)
    assert lift > 1 and penalty == 1.0  # praise is a lift
    lift, penalty = rank_factors(m.get(b), clock.now, cfg)
    assert lift < 1 and penalty < 1  # blame is a penalty; going unused, a lift below 1
    assert rank_factors(m.get(c), clock.now, cfg) == (pytest.approx(lift), 1.0)  # unused alike
    for cid in (a, b, c):
        lift, penalty = rank_factors(m.get(cid), clock.now, cfg)
        assert lift * penalty == pytest.approx(score_factor(m.get(cid), clock.now, cfg))
    m.close()


def test_a_praised_weak_memory_does_not_outrank_the_answer(clock: Clock, url: str | None) -> None:
    m = _store(clock, url=url)
    ids = [m.add(t, user_id="u") for t in FACTS]
    assert _ids(m, QUESTION)[0] == ids[TEMPLATE]
    for i, cid in enumerate(ids):
        if i != TEMPLATE:
            for _ in range(20):
                m.feedback([cid], "up")  # the most praise a memory can hold (max_weight)
    clock.advance(days=3)  # and the answer has gone unused a while
    hits = m.search(QUESTION, user_id="u", k=7, abstain_below=0)
    assert hits[0].id == ids[TEMPLATE]
    assert hits[0].relevance is not None and hits[0].relevance >= GATE > max(h.relevance or 0 for h in hits[1:])
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))  # scores stay sorted
    m.close()


def test_praise_still_breaks_a_near_tie(clock: Clock, url: str | None) -> None:
    m = _store(clock, url=url)
    a = m.add("The daily standup is at 9:30 in room B.", user_id="u")
    b = m.add("The daily standup is at 9:30 in room B, every weekday.", user_id="u")
    for t in FACTS:
        m.add(t, user_id="u")
    first = _ids(m, "When is the daily standup?", k=2)
    assert sorted(first) == sorted([a, b])
    hits = m.search("When is the daily standup?", user_id="u", k=2, abstain_below=0)
    assert all(h.relevance is not None and h.relevance >= GATE for h in hits)  # both answer it
    loser = first[1]
    m.feedback([loser], "used")  # one use is enough between equals
    assert _ids(m, "When is the daily standup?", k=2) == [loser, first[0]]
    m.close()


def test_a_memory_voted_down_still_sinks_below_weaker_ones(clock: Clock, url: str | None) -> None:
    m = _store(clock, url=url)
    ids = [m.add(t, user_id="u") for t in FACTS]
    m.feedback([ids[TEMPLATE]], "down")
    m.feedback([ids[TEMPLATE]], "down")
    order = _ids(m, QUESTION)
    assert order[-1] == ids[TEMPLATE]  # blame is a penalty, not a lift: it crosses the gate
    m.close()


def test_only_a_search_that_use_would_reorder_reads_the_pool(clock: Clock) -> None:
    m = _store(clock)
    ids = [m.add(t, user_id="u") for t in FACTS]
    read: list[list[str]] = []
    get = m.backend.get
    m.backend.get = lambda wanted: read.append(list(wanted)) or get(wanted)  # type: ignore[method-assign]
    hits = _ids(m, QUESTION, k=2)
    assert read == [hits]  # nothing to reorder: the records returned, no more
    read.clear()
    for _ in range(20):
        m.feedback([ids[0]], "up")
    read.clear()
    hits = _ids(m, QUESTION, k=2)
    assert hits[0] == ids[TEMPLATE] and ids[0] in hits  # lifted into the top 2, not above the answer
    assert len(read) == 1 and len(read[0]) > 2  # the pool's records, once: their relevance
    m.close()


def test_without_a_gate_use_orders_every_hit_as_before(clock: Clock) -> None:
    m = _store(clock, gate=None)  # a model nobody fitted: every hit counts as a use
    ids = [m.add(t, user_id="u") for t in FACTS]
    for i, cid in enumerate(ids):
        if i != TEMPLATE:
            for _ in range(20):
                m.feedback([cid], "up")
    assert _ids(m, QUESTION)[0] != ids[TEMPLATE]
    m.close()


WORDS = ("deploy server backup port api log template wiki cache redis billing gateway upload file "
         "pager alert metrics grafana vpn dns runner branch export link freeze release staging").split()


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_returns_what_ordering_by_relevance_returns(clock: Clock, seed: int, url: str | None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """When use reorders nothing a search returns, the search skips reading the pool's
    relevance; forcing that reading must give the same hits, order and scores."""
    rng = random.Random(seed)
    m = _store(clock, url=url)
    ids = [m.add(" ".join(rng.sample(WORDS, rng.randint(3, 8))), user_id="u") for _ in range(40)]
    for _ in range(60):
        m.feedback([rng.choice(ids)], rng.choice(["used", "used", "up", "down"]))
        clock.advance(hours=rng.randint(1, 48))
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(25)]
    calls: list[bool] = []  # per forced search: would it have taken the fast path?

    def slow(plain: list[str], lifted: list[str]) -> bool:
        calls.append(plain == lifted)
        return True

    for q in queries:
        for k in (1, 3, 5):
            fast = [(h.id, h.score) for h in m.search(q, user_id="u", k=k, abstain_below=0)]
            with monkeypatch.context() as patch:
                patch.setattr(search_module, "_use_reorders", slow)
                forced = [(h.id, h.score) for h in m.search(q, user_id="u", k=k, abstain_below=0)]
            assert [i for i, _ in fast] == [i for i, _ in forced], (q, k)
            assert [s for _, s in fast] == pytest.approx([s for _, s in forced]), (q, k)
    taken = sum(calls)
    assert 0 < taken < len(calls)  # both paths were taken, the fast one compared
    m.close()
