"""BeeWeaveRetriever: options reach BeeWeave.search, hits come back as JSON-friendly Documents."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from beeweave_core import ExpandOptions
from beeweave_langchain import BeeWeaveRetriever


@pytest.fixture
def store(memory):
    memory.add_many([
        {"content": "The staging database listens on port 5433.", "user_id": "alice", "session_id": "s1",
         "agent_id": "ops", "tags": ["db"], "metadata": {"source": "runbook"}},
        {"content": "The staging database is backed up nightly.", "user_id": "alice", "session_id": "s2",
         "tags": ["db", "backup"]},
        {"content": "Staging deploys need a green build.", "user_id": "alice", "session_id": "s1"},
        {"content": "Bob's staging database password rotates weekly.", "user_id": "bob"},
    ])
    return memory


def contents(docs) -> set[str]:
    return {d.page_content for d in docs}


def test_k_as_field_and_per_call(store) -> None:
    r = BeeWeaveRetriever(memory=store, user_id="alice", k=1)
    assert len(r.invoke("staging database")) == 1
    assert len(r.invoke("staging database", k=3)) == 3
    assert r.invoke("staging database", k=0) == []


def test_user_session_agent_and_filter_scopes(store) -> None:
    q = "staging database"
    assert not any("Bob" in c for c in contents(BeeWeaveRetriever(memory=store, user_id="alice", k=10).invoke(q)))
    assert contents(BeeWeaveRetriever(memory=store, user_id="alice", session_id="s2").invoke(q)) == {
        "The staging database is backed up nightly."}
    assert contents(BeeWeaveRetriever(memory=store, user_id="alice", agent_id="ops").invoke(q)) == {
        "The staging database listens on port 5433."}
    tagged = BeeWeaveRetriever(memory=store, user_id="alice", filters={"tags": ["backup"]}).invoke(q)
    assert contents(tagged) == {"The staging database is backed up nightly."}


def test_document_metadata_points_back_at_the_memory(store) -> None:
    [doc] = BeeWeaveRetriever(memory=store, user_id="alice", k=1).invoke("port of the staging database")
    md = doc.metadata
    chunk = store.get(md["id"])
    assert doc.id == chunk.id and doc.page_content == chunk.raw_content
    assert (md["user_id"], md["session_id"], md["agent_id"], md["tags"]) == ("alice", "s1", "ops", ["db"])
    assert md["metadata"] == {"source": "runbook"}
    assert set(md["sources"]) == {"lexical", "vector"} and md["score"] > 0
    assert md["relationships"] == [r.to_dict() for r in chunk.relationships]
    json.dumps(md)  # JSON-friendly all the way down


def test_expansion_brings_linked_memories_with_their_edge(store) -> None:
    docs = BeeWeaveRetriever(memory=store, user_id="alice", k=1, expand=ExpandOptions(hops=1, limit=2)).invoke(
        "port of the staging database")
    expanded = [d for d in docs if "graph" in d.metadata["sources"]]
    assert expanded and all(d.metadata["sources"]["graph"]["via"] for d in expanded)


@pytest.mark.asyncio
async def test_async_path_runs_the_engine_off_the_event_loop(store) -> None:
    loop_thread = threading.get_ident()
    seen = []
    search = store.search

    def spy(*args, **kwargs):
        seen.append(threading.get_ident())
        return search(*args, **kwargs)

    store.search = spy
    r = BeeWeaveRetriever(memory=store, user_id="alice", k=2)
    docs, more = await asyncio.gather(r.ainvoke("staging database"), r.ainvoke("staging deploys", k=1))
    assert len(docs) == 2 and len(more) == 1
    assert seen and loop_thread not in seen


def test_engine_errors_reach_the_caller(store) -> None:
    from beeweave_core import InvalidInputError

    with pytest.raises(InvalidInputError):
        BeeWeaveRetriever(memory=store, user_id="alice", mmr=2.0).invoke("staging")
