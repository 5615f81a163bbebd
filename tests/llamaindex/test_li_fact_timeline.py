"""Facts that change, through the LlamaIndex retriever: the current home first, the old one's
node marked ``superseded``, and ``as_of`` answering with the value valid then."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_llamaindex import BeeWeaveRetriever
from tests.fact_faces import CASES, T1, moved_memory


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_retriever_marks_the_superseded_value_and_answers_as_of(lang: str) -> None:
    _, _, question, old, new = CASES[lang]
    with moved_memory(lang) as m:
        now = BeeWeaveRetriever(m, user_id="alice", abstain_below=0).retrieve(question)
        then = BeeWeaveRetriever(m, user_id="alice", abstain_below=0, as_of=T1 - timedelta(days=1)).retrieve(question)
    assert new in now[0].node.get_content() and now[0].node.metadata["superseded"] is False
    stale = next(n for n in now if old in n.node.get_content())
    assert stale.node.metadata["superseded"] is True and stale.node.metadata["invalid_at"] == T1.isoformat()
    assert old in then[0].node.get_content() and not any(new in n.node.get_content() for n in then)
