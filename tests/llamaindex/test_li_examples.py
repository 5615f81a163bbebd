"""The LlamaIndex examples run offline, end to end (with the instant hashing embedder)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from beeweave_core import HashingEmbedder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_query_engine_over_memories(capsys) -> None:
    response = example("llamaindex_query_engine").main(HashingEmbedder(64))
    sources = [n.node.get_content() for n in response.source_nodes]
    assert "Alice is allergic to peanuts." in sources
    assert all(s.startswith("Alice") for s in sources)  # bob's memories never come in
    assert all({"health", "food"} & set(n.node.metadata["tags"]) for n in response.source_nodes)
    assert "Alice is allergic to peanuts." in str(response)  # MockLLM echoes the prompt it was given
    assert "found by" in capsys.readouterr().out


def test_document_index_postprocessed_by_beeweave() -> None:
    response = example("llamaindex_document_postprocess").main(HashingEmbedder(64))
    documents = [n for n in response.source_nodes if "sources" not in n.node.metadata]
    memories = [n for n in response.source_nodes if "sources" in n.node.metadata]
    assert len(documents) == 2  # top_n
    assert any("blue-green pipeline" in n.node.get_content() for n in documents)
    assert memories and all("graph" in n.node.metadata["sources"] for n in memories)
    assert any(n.node.get_content().endswith("from Alice.") for n in memories)


def test_agent_with_beeweave_long_term_memory(capsys) -> None:
    allergy, tea = example("llamaindex_agent_memory").main(HashingEmbedder(64))
    assert "allergic to peanuts" in allergy
    assert "oolong tea" in tea
    assert "BeeWeave now holds" in capsys.readouterr().out


def test_function_agent_with_beeweave_memory_recalls_on_friday(capsys) -> None:
    peanuts, deploy = example("llamaindex_function_agent_memory").main(HashingEmbedder(64))
    assert "allergic to peanuts" in peanuts and "Tuesdays" in deploy
    assert "Q: When does my team deploy?" in capsys.readouterr().out
