"""The faces' "nothing relevant" gate (``abstain_below``) on the bundled model it was fitted
on: an off-topic request gets no memory; a request with a relevant memory gets the top k, the
less relevant beside it (a peanut allergy for a dessert question). Without it (the default)
the faces give the top k, as a plain search does."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave
from beeweave_core.relevance import DEFAULT_ABSTAIN_BELOW
from beeweave_langchain import BeeWeaveMemory, BeeWeaveRetriever

pytestmark = pytest.mark.model

FACTS = ["Hi, I'm Alice. I'm allergic to peanuts.", "I live in Lyon.", "I'm planning a dinner party on Saturday."]


@pytest.fixture(scope="module")
def memory():
    with BeeWeave() as m:
        for text in FACTS:
            m.add(text, user_id="alice")
        yield m


def test_the_retriever_says_nothing_off_topic_and_everything_on_topic(memory) -> None:
    retriever = BeeWeaveRetriever(memory=memory, user_id="alice", k=3, abstain_below=DEFAULT_ABSTAIN_BELOW)
    assert retriever.invoke("how does quicksort work") == []
    texts = [d.page_content for d in retriever.invoke("Can you suggest a dessert for my dinner party?")]
    assert "dinner party" in texts[0] and any("peanuts" in t for t in texts)
    # No gate (the default): the same off-topic request gets the top k.
    assert len(BeeWeaveRetriever(memory=memory, user_id="alice", k=3).invoke("how does quicksort work")) == 3


def test_conversation_memory_adds_no_long_term_text_off_topic(memory) -> None:
    mem = BeeWeaveMemory(memory=memory, user_id="alice", session_id="s9", long_term_key="long_term",
                         abstain_below=DEFAULT_ABSTAIN_BELOW)
    assert mem.load_memory_variables({"input": "what is the capital of Australia"})["long_term"] == ""
    assert "peanuts" in mem.load_memory_variables({"input": "Can you suggest a dessert for my dinner party?"})[
        "long_term"]
