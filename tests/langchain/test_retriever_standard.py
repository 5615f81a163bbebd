"""LangChain's standard retriever tests, against an in-memory store with the hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_langchain import BeeWeaveRetriever

FACTS = [
    "The staging database listens on port 5433.",
    "Alice prefers answers in Chinese.",
    "The deploy script lives in tools/deploy.sh.",
    "Bob is allergic to peanuts.",
    "The weekly report is due on Friday.",
    "Kubernetes cluster runs in eu-west-1.",
]

_store: dict[str, BeeWeave] = {}


@pytest.fixture(scope="module", autouse=True)
def _memory() -> Iterator[BeeWeave]:
    m = BeeWeave(embedder=HashingEmbedder(32))
    m.add_many([{"content": f, "user_id": "alice"} for f in FACTS])
    _store["memory"] = m
    yield m
    _store.clear()
    m.close()


class TestBeeWeaveRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BeeWeaveRetriever]:
        return BeeWeaveRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # The suite checks that k documents come back for its query; on the hashing embedder the
        # relevance floor (fitted for MiniLM) would leave some out, so it is off here.
        return {"memory": _store["memory"], "user_id": "alice", "min_relevance": None}

    @property
    def retriever_query_example(self) -> str:
        return "which port does the staging database use"

