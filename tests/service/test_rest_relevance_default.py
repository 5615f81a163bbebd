"""REST search with the default model and no options (issue 43): the request's
``abstain_below`` is absent by default, so the server applies the store's own "nothing
relevant" gate (here the model's tuned gate as the stores' default: an off-topic question gets no hit, through the HTTP API and through a
``BeeWeaveClient``, which is what the faces use against a server), and each hit carries its
calibrated ``relevance`` beside the fused ``score``. ``abstain_below=0`` turns the gate off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from beeweave_core import BeeWeave
from beeweave_core.server import ServerConfig
from tests.relevance_faces import FACTS, GATED, OFF_TOPIC, ON_TOPIC
from tests.service.service_support import ACME_KEY, LiveServer, start_server

pytestmark = [pytest.mark.model, pytest.mark.slow]



@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    gated = {"config": GATED}  # the default model, its tuned gate
    srv = start_server(ServerConfig(tmp_path_factory.mktemp("relevance"), {ACME_KEY: "acme"}, memory_kwargs=gated))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with live.http(ACME_KEY) as h:
        for text in FACTS:
            assert h.post("/api/v1/memories", json={"content": text, "user_id": "alice"}).status_code == 201
        h.post("/api/v1/memories", json={"content": "I am allergic to peanuts.", "user_id": "solo"})
        yield h


def hits(http: httpx.Client, query: str, user: str = "alice", **more: Any) -> list[dict[str, Any]]:
    r = http.post("/api/v1/search", json={"query": query, "user_id": user, "k": 5, **more})
    assert r.status_code == 200, r.text
    return r.json()["hits"]


def test_the_request_leaves_the_gate_to_the_store(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()["components"]["schemas"]["SearchIn"]["properties"]["abstain_below"]
    assert spec.get("default") is None  # absent or null: the engine's default gate


def test_search_gates_by_default_and_carries_relevance(http: httpx.Client) -> None:
    for question in OFF_TOPIC:
        assert hits(http, question) == []
    found = hits(http, ON_TOPIC)
    assert found[0]["chunk"]["raw_content"] == FACTS[0]
    with BeeWeave() as local:  # the same memories in a local store of the same model
        for text in FACTS:
            local.add(text, user_id="alice")
        expected = local.search(ON_TOPIC, user_id="alice", k=5)[0].relevance
    assert found[0]["relevance"] == pytest.approx(expected, abs=1e-4) and found[0]["relevance"] > 0.5
    ungated = hits(http, OFF_TOPIC[0], abstain_below=0)
    assert len(ungated) == 2 and all(h["relevance"] < 0.3 for h in ungated)


def test_a_one_memory_store_gives_a_match_a_high_relevance(http: httpx.Client) -> None:
    [match] = hits(http, "Am I allergic to peanuts?", user="solo")
    assert match["relevance"] > 0.5 and match["score"] == pytest.approx(0.5)  # the fused score says nothing
    assert hits(http, "How far is the Moon?", user="solo") == []
    [far] = hits(http, "How far is the Moon?", user="solo", abstain_below=0)
    assert far["relevance"] < 0.3


def test_a_client_of_the_server_gets_the_gate_too(live: LiveServer, http: httpx.Client) -> None:
    with live.client(ACME_KEY) as client:
        assert client.search(OFF_TOPIC[1], user_id="alice") == []
        [top, *_] = client.search(ON_TOPIC, user_id="alice")
        assert top.chunk.raw_content == FACTS[0] and top.relevance is not None and top.relevance > 0.5
        assert len(client.search(OFF_TOPIC[1], user_id="alice", abstain_below=0)) == 2
