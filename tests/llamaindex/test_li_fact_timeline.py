"""Facts that change, through the LlamaIndex retriever: the current home first, the old one's
node marked ``superseded``, and ``as_of`` answering with the value valid then."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_llamaindex import BeeWeaveRetriever
from tests.fact_faces import CASES, T0, T1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_retriever_marks_the_superseded_value_and_answers_as_of(lang: str) -> None:
    said_old, said_new, question, old, new = CASES[lang]
    with BeeWeave(embedder=HashingEmbedder(32), clock=lambda: T1 + timedelta(days=1)) as m:
        m.ingest({"user_id": "alice", "query": said_old, "response": "OK.", "timestamp": T0.isoformat()})
        m.ingest({"user_id": "alice", "query": said_new, "response": "OK.", "timestamp": T1.isoformat()})
        assert m.flush(30)
        now = BeeWeaveRetriever(m, user_id="alice", abstain_below=0).retrieve(question)
        then = BeeWeaveRetriever(m, user_id="alice", abstain_below=0, as_of=T1 - timedelta(days=1)).retrieve(question)
    assert new in now[0].node.get_content() and now[0].node.metadata["superseded"] is False
    stale = next(n for n in now if old in n.node.get_content())
    assert stale.node.metadata["superseded"] is True and stale.node.metadata["invalid_at"] == T1.isoformat()
    assert old in then[0].node.get_content() and not any(new in n.node.get_content() for n in then)
