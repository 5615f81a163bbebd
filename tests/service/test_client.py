"""``BeeWeaveClient``: the engine's methods, types and errors over HTTP; the adapters accept it."""

from __future__ import annotations

import httpx
import pytest

from beeweave_core import (
    BeeWeave,
    DuplicateIdError,
    EmptyContentError,
    HashingEmbedder,
    InvalidInputError,
    KnowledgeChunk,
    NotFoundError,
    SearchHit,
    StoreUnavailableError,
    UnknownFilterError,
)
from beeweave_core.client import AuthenticationError, BeeWeaveClient, ServerError
from beeweave_core.ingest import KnowledgeEvent, QueueFullError, ToolCall
from beeweave_core.ingest.errors import InvalidEventError
from tests.service.service_support import ACME_KEY, event, free_port


@pytest.fixture(scope="module")
def seeded(acme):
    acme.ingest(KnowledgeEvent(user_id="alice", query="Which port does the api listen on?",
                               response="The api listens on port 8443 behind the proxy.", session_id="c1",
                               id="cl-port", intermediate_steps=[ToolCall("grep", {"pattern": "port"}, "8443")]))
    acme.ingest(event("alice", "Who owns the billing service?", "Team Falcon owns the billing service.",
                      session_id="c1", id="cl-owner"))
    assert acme.flush(20)


def test_search_returns_engine_types(acme, seeded):
    hits = acme.search("api port", user_id="alice", k=2)
    assert hits and all(isinstance(h, SearchHit) and isinstance(h.chunk, KnowledgeChunk) for h in hits)
    top = hits[0]
    assert top.id == "cl-port@alice:0" and top.chunk.user_id == "alice" and top.chunk.session_id == "c1"
    assert top.chunk.status.value == "active" and top.chunk.timestamp.tzinfo is not None
    # Only retrievers that matched are listed (in a store this small BM25's idf may be 0).
    assert top.sources and all(s.rank >= 1 and s.score > 0 for s in top.sources.values())
    assert isinstance(top.score, float) and 0.0 <= top.relevance <= 1.0  # the relevance travels too
    again = SearchHit(top.chunk, top.score, top.sources, top.loosened, top.time_range, top.relevance).to_dict()
    assert again == top.to_dict()


def test_relate_returns_a_relationship_as_the_engine_does(acme, seeded):
    from beeweave_core.records import Relationship

    edge = acme.relate("cl-port@alice:0", "cl-owner@alice:0", "related", weight=0.5, note="same service map")
    assert edge == Relationship("cl-port@alice:0", "cl-owner@alice:0", "related", 0.5)
    assert edge in acme.relationships("cl-port@alice:0", types=["related"], direction="out")


def test_the_gate_travels_to_the_server(acme, seeded):
    hits = acme.search("api port", user_id="alice", k=2)
    best = max(h.relevance for h in hits)
    assert [h.id for h in acme.search("api port", user_id="alice", k=2, abstain_below=best)] == [h.id for h in hits]
    assert acme.search("api port", user_id="alice", k=2, abstain_below=min(1.0, best + 1e-6)) == []
    with pytest.raises(InvalidInputError):
        acme.search("api port", user_id="alice", abstain_below=1.5)


def test_same_errors_as_the_engine(acme, seeded):
    local = BeeWeave(embedder=HashingEmbedder(64))
    try:
        for call in (lambda m: m.search("x", filters={"colour": "red"}),):
            with pytest.raises(UnknownFilterError):
                call(local)
            with pytest.raises(UnknownFilterError):
                call(acme)
        for bad, err in (({"user_id": "alice"}, EmptyContentError),
                         ({"user_id": "alice", "query": "q", "colour": 1}, InvalidEventError),
                         ({"user_id": "", "query": "q"}, InvalidEventError)):
            with pytest.raises(err):
                local.ingest(bad)
            with pytest.raises(err):
                acme.ingest(bad)
        with pytest.raises(NotFoundError):
            acme.feedback(["missing"], "up")
        with pytest.raises(InvalidInputError):
            acme.feedback(["cl-port@alice:0"], "love")
        with pytest.raises(InvalidInputError, match="in-process"):
            acme.search("port", rerank=object())
        with pytest.raises(InvalidInputError, match="ExpandOptions"):
            acme.search("port", expand={"hops": 1})
        with pytest.raises(InvalidInputError, match="surrogate"):
            acme.ingest(event("alice", "q", "\ud800"))
    finally:
        local.close()


def test_auth_and_unreachable_server(live):
    with BeeWeaveClient(live.url) as anon, pytest.raises(AuthenticationError, match="401"):
        anon.search("x")
    with BeeWeaveClient(live.url, "bad-key-0000") as wrong, pytest.raises(AuthenticationError, match="403"):
        wrong.stats()
    with BeeWeaveClient(f"http://127.0.0.1:{free_port()}", ACME_KEY, timeout=2) as gone:
        with pytest.raises(StoreUnavailableError, match="cannot reach"):
            gone.search("x")
    with pytest.raises(InvalidInputError):
        BeeWeaveClient("ftp://example.org", ACME_KEY)


@pytest.mark.parametrize("status,body,err", [
    (409, {"error": "DuplicateIdError", "detail": "a chunk with id 'x' already exists"}, DuplicateIdError),
    (503, {"error": "QueueFullError", "detail": "full"}, QueueFullError),
    (503, None, StoreUnavailableError),
    (500, {"error": "InternalError", "detail": "boom"}, ServerError),
    (502, None, ServerError),
    (418, {"error": "Teapot", "detail": "short and stout"}, InvalidInputError),
])
def test_error_mapping(status, body, err):
    transport = httpx.MockTransport(lambda req: httpx.Response(status, json=body) if body else httpx.Response(status))
    with BeeWeaveClient("http://bee.test", "any-key-000", transport=transport) as c, pytest.raises(err):
        c.stats()


def test_langchain_retriever_and_memory_on_a_server(acme, seeded):
    from beeweave_langchain import BeeWeaveMemory, BeeWeaveRetriever

    # The server's hashing embedder is not the model the relevance gate was fitted on: off.
    docs = BeeWeaveRetriever(memory=acme, user_id="alice", k=1, abstain_below=None).invoke("billing owner")
    assert [d.metadata["id"] for d in docs] == ["cl-owner@alice:0"]
    mem = BeeWeaveMemory(memory=acme, user_id="henry", session_id="lc", abstain_below=None)
    mem.save_context({"input": "My favourite colour is teal."}, {"output": "Noted: teal."})
    assert acme.flush(20)
    found = mem.load_memory_variables({"input": "what is my favourite colour"})
    assert "teal" in found["history"]


def test_llamaindex_retriever_on_a_server(acme, seeded):
    from beeweave_llamaindex import BeeWeaveRetriever

    nodes = BeeWeaveRetriever(acme, user_id="alice", similarity_top_k=1).retrieve("which port")
    assert [n.node.node_id for n in nodes] == ["cl-port@alice:0"]


def test_flush_trace_and_review_types(acme, seeded):
    assert acme.flush(5) is True
    assert [c.id for c in acme.trace("c1")][:2] == ["cl-port@alice:0", "cl-owner@alice:0"]
    assert acme.review(user_id="nobody") == []
    assert acme.health()["status"] == "ok" and "/api/v1/search" in acme.openapi()["paths"]


def test_one_review_flow_over_http(acme):
    """GET /review and POST /review/decide: the engine's one review flow; the old routes still answer."""
    held = acme.add("the vpn gateway moved to 10.2.0.1 last night", user_id="rev", status="pending")
    stale = acme.add("the staging database lives on db-old.internal", user_id="rev")
    for _ in range(3):
        acme.feedback(stale, "down")
    items = acme.review(user_id="rev")
    assert [(i.chunk_id, i.reasons) for i in items] == [(held, ("pending",)), (stale, ("stale",))]
    assert items[0].chunk is not None and items[0].chunk.status.value == "pending"
    assert [i.chunk_id for i in acme.review(user_id="rev", reasons="pending")] == [held]
    assert [i.chunk_id for i in acme.review(user_id="rev", reasons=["stale", "expired"])] == [stale]
    with pytest.raises(InvalidInputError, match="is pending"):
        acme.decide([stale, held], "archive")
    with pytest.warns(DeprecationWarning, match="review_queue"):
        assert [i.chunk_id for i in acme.review_queue(user_id="rev")] == [stale]  # nothing was changed
    assert acme.decide([held, stale], "keep") == [held, stale]
    assert acme.review(user_id="rev") == []
    with pytest.warns(DeprecationWarning, match="pending"):
        assert acme.pending(user_id="rev") == []
