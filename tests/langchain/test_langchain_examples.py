"""Every LangChain example runs offline (scripted model, hashing embedder) and shows what it claims."""

from __future__ import annotations

import importlib

import pytest

from beeweave_core import HashingEmbedder

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def offline(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the examples would otherwise call a real model


def run(name: str, **kwargs):
    return importlib.import_module(name).main(embedder=HashingEmbedder(64), **kwargs)


def test_agent_learns_in_one_session_and_recalls_in_the_next(tmp_path) -> None:
    out = run("langchain_agent_memory", path=tmp_path / "agent.db")
    assert any("5433" in text for text in out["recalled"]), out["recalled"]  # real retrieval, not the script
    assert out["used"], "the run's recalled memories were marked used and rated"
    assert out["errors"] == 0


def test_rag_chain_answers_with_the_retrieved_memories() -> None:
    out = run("langchain_rag")
    assert "on-call engineer" in out["context"][0].page_content
    assert out["context"][0].metadata["id"] and out["answer"]


def test_conversation_recalls_an_earlier_session() -> None:
    out = run("langchain_conversation")
    assert "allergic to peanuts" in out["long_term"]
    assert out["summary_session_1"].startswith("Hi, I'm Alice.")


@pytest.mark.model
def test_agent_example_with_the_default_model(tmp_path) -> None:
    out = importlib.import_module("langchain_agent_memory").main(path=tmp_path / "agent.db")
    assert any("5433" in text for text in out["recalled"]) and out["errors"] == 0


def test_store_and_middleware_recall_in_a_new_thread_sync_and_async() -> None:
    out = importlib.import_module("langchain_store_and_middleware").main(embedder=HashingEmbedder(64))
    for run in ("sync", "async"):
        assert "teal" in out[run]["recalled"], out[run]  # the middleware's system message
        assert any("teal" in t for t in out[run]["tool_found"]), out[run]  # runtime.store search
        assert out[run]["answer"] == "Your favourite colour is teal."
