"""A search's arguments are validated once, into a ``SearchRequest`` that each stage reads
(issue 45, item 6): every bad argument is refused with an ``InvalidInputError`` naming it
before anything is read or recorded, the store's defaults are resolved there, and the
request is frozen."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder, SearchConfig
from beeweave_core.engine.search_request import SearchRequest, build_search_request
from beeweave_core.errors import InvalidInputError
from beeweave_core.fusion import FusionMode
from beeweave_core.network import ExpandOptions

ARGS = dict(user_id="u", k=5, filters=None, fusion=None, min_score=None, query_embedding=None, expand=None,
            rerank=None, mmr=None, loosen=False, min_relevance=None, abstain_below=None, scopes=None, as_of=None)

BAD = [
    ("query", {"query": 42}),
    ("k", {"k": -1}),
    ("k", {"k": True}),
    ("fusion", {"fusion": "average"}),
    ("filters", {"filters": ["tags"]}),
    ("scope", {"scopes": ["no such scope!"]}),
    ("as_of", {"as_of": "not a date"}),
    ("query_embedding", {"query_embedding": [1.0, 0.0]}),
    ("min_score", {"min_score": math.nan}),
    ("min_relevance", {"min_relevance": 1.5}),
    ("min_relevance", {"min_relevance": "0.5"}),
    ("abstain_below", {"abstain_below": -0.1}),
    ("abstain_below", {"abstain_below": True}),
    ("mmr", {"mmr": 2}),
    ("rerank", {"rerank": object()}),
    ("expand", {"expand": 3}),
    ("loosen", {"loosen": "yes"}),
]


@pytest.fixture
def memory():
    m = BeeWeave(embedder=HashingEmbedder(32))
    m.add("Staging listens on port 5433.", user_id="u", tags=["ops"])
    m.add("The offsite is at the Lakeside hotel.", user_id="u")
    m.flush()
    yield m
    m.close()


@pytest.mark.parametrize(("name", "bad"), BAD, ids=[f"{n}-{next(iter(b.values()))!r}" for n, b in BAD])
def test_each_bad_argument_is_refused_by_name_and_nothing_is_recorded(memory: BeeWeave, name: str, bad: dict) -> None:
    seen: list[object] = []
    memory.parts.shared.hooks.on_search.append(lambda hits, now: seen.append(hits))
    args = {**ARGS, **bad}
    query = args.pop("query", "which port does staging use")
    with pytest.raises(InvalidInputError, match=name):
        memory.search(query, **args)
    with pytest.raises(InvalidInputError, match=name):  # the builder alone says the same
        build_search_request(memory.parts.shared, memory.parts.search.scopes, query, **args)
    memory.flush()
    assert seen == []  # no search ran
    assert [c.access_count for c in memory.get_all(user_id="u").items] == [0, 0]
    assert memory.search("which port does staging use", **ARGS)  # the same search with good arguments runs


def test_the_request_resolves_the_stores_defaults(memory: BeeWeave) -> None:
    shared, reach = memory.parts.shared, memory.parts.search.scopes
    req = build_search_request(shared, reach, "port", **ARGS)
    assert req.mode is SearchConfig().fusion and req.k == 5 and req.query == "port"
    # a model nobody fitted has no gate; no floor unless the store sets one
    assert req.min_relevance is None and req.abstain_below is None
    assert req.at == req.now and req.flt.until is None
    # min_relevance=0 asks for every hit: the gate is off as well
    assert build_search_request(shared, reach, "port", **{**ARGS, "min_relevance": 0}).abstain_below == 0.0
    when = datetime(2025, 3, 1, tzinfo=timezone.utc)
    req = build_search_request(shared, reach, "port", **{**ARGS, "as_of": when.isoformat(), "fusion": "rrf",
                                                         "expand": True, "mmr": 1})
    assert req.at == when and req.flt.until == when and req.mode is FusionMode.RRF
    assert req.expand == ExpandOptions() and req.mmr == 1.0 and isinstance(req.mmr, float) and req.reorders
    # an until filter earlier than as_of stays
    early = (when - timedelta(days=3)).isoformat()
    req = build_search_request(shared, reach, "port", **{**ARGS, "as_of": when, "filters": {"until": early}})
    assert req.flt.until == when - timedelta(days=3)
    vec = np.ones(32)
    req = build_search_request(shared, reach, "port", **{**ARGS, "query_embedding": vec})
    assert req.query_vector is not None and np.linalg.norm(req.query_vector) == pytest.approx(1.0)


def test_the_store_config_gives_the_thresholds_when_the_caller_does_not() -> None:
    with BeeWeave(embedder=HashingEmbedder(32), config=SearchConfig(min_relevance=0.2, abstain_below=0.3)) as m:
        req = build_search_request(m.parts.shared, m.parts.search.scopes, "port", **ARGS)
        assert (req.min_relevance, req.abstain_below) == (0.2, 0.3)
        req = build_search_request(m.parts.shared, m.parts.search.scopes, "port",
                                   **{**ARGS, "min_relevance": 0.1, "abstain_below": 0})
        assert (req.min_relevance, req.abstain_below) == (0.1, 0.0)


def test_the_request_is_frozen(memory: BeeWeave) -> None:
    req = build_search_request(memory.parts.shared, memory.parts.search.scopes, "port", **ARGS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.k = 10  # type: ignore[misc]
    narrowed = dataclasses.replace(req, query="staging")
    assert narrowed.query == "staging" and req.query == "port" and narrowed.flt is req.flt


def test_a_run_request_finds_what_the_keyword_search_finds(memory: BeeWeave) -> None:
    search = memory.parts.search
    req = build_search_request(memory.parts.shared, search.scopes, "staging port", **ARGS)
    assert isinstance(req, SearchRequest)
    # (the scores' recency factor reads each search's own clock: the ids and relevance compare)
    assert [(h.id, h.relevance) for h in search.run(req)] == [(h.id, h.relevance) for h in
                                                              memory.search("staging port", **ARGS)]
    assert search.run(dataclasses.replace(req, k=0)) == []
    # the strict pass finds the tagged memory only; the loosened one adds the other, marked
    tagged = {**ARGS, "filters": {"tags_any": ["ops"]}, "abstain_below": 0}
    assert len(memory.search("staging port", **tagged)) == 1
    hits = memory.search("staging port", **{**tagged, "loosen": True})
    assert [h.loosened for h in hits] == [False, True]
