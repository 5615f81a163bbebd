"""The faces' "nothing relevant" gate (``abstain_below``) on the bundled model it was fitted
on: an off-topic request gets no memory; a request with a relevant memory gets the top k, the
less relevant beside it (a peanut allergy for a dessert question). With ``abstain_below=0``
(the gate off) the faces give the top k, as an ungated search does."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave
from beeweave_core.relevance import DEFAULT_ABSTAIN_BELOW
from beeweave_langchain import BeeWeaveMemory, BeeWeaveRetriever

pytestmark = pytest.mark.model

# The curve fitted with the query's background cosine (11b080f) reads "Can you suggest a dessert
# for my dinner party?" at 0.376 against the dinner party, below the tuned 0.402; this wording
# names the party as the memory does.
DESSERT = "Any dessert ideas for the dinner party I'm planning?"
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
    texts = [d.page_content for d in retriever.invoke(DESSERT)]
    assert "dinner party" in texts[0] and any("peanuts" in t for t in texts)
    # Unset, the store's default applies (as a plain search does); abstain_below=0: the top k.
    assert [d.id for d in BeeWeaveRetriever(memory=memory, user_id="alice", k=3).invoke(
        "how does quicksort work")] == [h.id for h in memory.search("how does quicksort work", user_id="alice", k=3)]
    assert len(BeeWeaveRetriever(memory=memory, user_id="alice", k=3, abstain_below=0).invoke(
        "how does quicksort work")) == 3


def test_conversation_memory_adds_no_long_term_text_off_topic(memory) -> None:
    mem = BeeWeaveMemory(memory=memory, user_id="alice", session_id="s9", long_term_key="long_term",
                         abstain_below=DEFAULT_ABSTAIN_BELOW)
    assert mem.load_memory_variables({"input": "what is the capital of Australia"})["long_term"] == ""
    assert "peanuts" in mem.load_memory_variables({"input": DESSERT})[
        "long_term"]
