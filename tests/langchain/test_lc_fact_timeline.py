"""Facts that change, through the LangChain retriever: the current home comes first and the
superseded one carries ``superseded``/``invalid_at`` in its document's metadata."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_langchain import BeeWeaveRetriever
from tests.fact_faces import CASES, T1, moved_memory


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_retriever_gives_the_current_home_first_and_marks_the_old(lang: str) -> None:
    _, _, question, old, new = CASES[lang]
    with moved_memory(lang) as m:
        docs = BeeWeaveRetriever(memory=m, user_id="alice", k=5, abstain_below=0).invoke(question)
    assert new in docs[0].page_content
    assert docs[0].metadata["superseded"] is False and docs[0].metadata["valid_from"] == T1.isoformat()
    stale = next(d for d in docs if old in d.page_content)
    assert stale.metadata["superseded"] is True and stale.metadata["invalid_at"] == T1.isoformat()
    assert stale.metadata["metadata"]["fact"]["superseded_by"] == docs[0].metadata["id"]


@pytest.mark.parametrize("as_text", [True, False], ids=["iso", "datetime"])
def test_the_retriever_searches_as_of_a_date(as_text: bool) -> None:
    with moved_memory("en") as m:
        then = T1 - timedelta(days=1)
        then = then.isoformat() if as_text else then  # type: ignore[assignment]
        docs = BeeWeaveRetriever(memory=m, user_id="alice", k=5, abstain_below=0, as_of=then).invoke("where do I live")
    assert "Berlin" in docs[0].page_content and docs[0].metadata["superseded"] is False
    assert not any("Munich" in d.page_content for d in docs)
