"""Scopes through the LlamaIndex faces: a user-scoped retriever and memory find shared
knowledge (the tenant's, a granted project's) beside the user's own, never another user's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from beeweave_core import BeeWeave
from beeweave_llamaindex import BeeWeaveMemory, BeeWeaveMemoryBlock, BeeWeaveRetriever
from tests.scopes_faces import ALICE_FACT, BOB_FACT, PROJECT_FACT, TENANT_FACT, scoped_memory


@pytest.fixture
def memory() -> Iterator[BeeWeave]:
    with scoped_memory() as m:
        yield m


def texts(nodes) -> set[str]:
    return {n.node.get_content() for n in nodes}


def test_a_user_scoped_retriever_finds_shared_knowledge(memory) -> None:
    assert texts(BeeWeaveRetriever(memory, user_id="alice", similarity_top_k=10).retrieve("staging")) \
        == {TENANT_FACT, PROJECT_FACT, ALICE_FACT}
    assert texts(BeeWeaveRetriever(memory, user_id="bob", similarity_top_k=10).retrieve("staging")) \
        == {TENANT_FACT, BOB_FACT}
    assert texts(BeeWeaveRetriever(memory, user_id="bob", similarity_top_k=10,
                                   scopes=["project:atlas"]).retrieve("staging")) == {PROJECT_FACT}


def test_the_memory_adds_shared_knowledge_never_another_users(memory) -> None:
    mem = BeeWeaveMemory.from_client(memory, {"user_id": "bob"}, abstain_below=0, similarity_top_k=10)
    mem.put(ChatMessage(role=MessageRole.USER, content="staging refunds?"))
    system = "\n".join(m.content or "" for m in mem.get() if m.role == MessageRole.SYSTEM)
    assert TENANT_FACT in system and BOB_FACT in system and ALICE_FACT not in system
    mine = BeeWeaveMemory.from_client(memory, {"user_id": "bob"}, abstain_below=0, similarity_top_k=10,
                                      scopes=["user"])
    mine.put(ChatMessage(role=MessageRole.USER, content="staging refunds?"))
    system = "\n".join(m.content or "" for m in mine.get() if m.role == MessageRole.SYSTEM)
    assert BOB_FACT in system and TENANT_FACT not in system


def test_the_memory_block_reads_the_scopes_it_is_given(memory) -> None:
    asked = [ChatMessage(role=MessageRole.USER, content="staging")]
    block = BeeWeaveMemoryBlock(memory, user_id="bob", similarity_top_k=10, abstain_below=0)
    text = asyncio.run(block.aget(messages=asked))
    assert TENANT_FACT in text and BOB_FACT in text and ALICE_FACT not in text and PROJECT_FACT not in text
    block = BeeWeaveMemoryBlock(memory, user_id="bob", similarity_top_k=10, abstain_below=0, scopes=["project:atlas"])
    assert asyncio.run(block.aget(messages=asked)).strip() == "- " + PROJECT_FACT
