"""Facts that change, over REST: a search returns the current home first and marks the old
one superseded (``superseded`` on the hit, ``invalid_at`` on the memory), and ``as_of`` answers
with the value valid then. English and Chinese."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fact_faces import CASES, T0, T1
from tests.service.service_support import ACME_KEY


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rest_search_puts_the_current_value_first_and_as_of_the_old(acme, live, lang: str) -> None:
    said_old, said_new, question, old, new = CASES[lang]
    user = f"mover-{lang}"
    acme.ingest({"user_id": user, "query": said_old, "response": "OK.", "timestamp": T0.isoformat()})
    acme.ingest({"user_id": user, "query": said_new, "response": "OK.", "timestamp": T1.isoformat()})
    assert acme.flush(60)

    hits = acme.search(question, user_id=user, abstain_below=0)
    assert new in hits[0].chunk.raw_content and not hits[0].superseded
    before = next(h for h in hits if old in h.chunk.raw_content)
    assert before.superseded and before.chunk.invalid_at == T1 and hits.index(before) > 0

    then = acme.search(question, user_id=user, abstain_below=0, as_of=T1 - timedelta(days=1))
    assert old in then[0].chunk.raw_content and not then[0].superseded
    assert not any(new in h.chunk.raw_content for h in then)

    with live.http(ACME_KEY) as http:
        raw = http.post("/api/v1/search", json={"query": question, "user_id": user, "abstain_below": 0}).json()
        epoch = http.post("/api/v1/search", json={"query": question, "user_id": user, "abstain_below": 0,
                                                  "as_of": (T1 - timedelta(days=1)).timestamp()}).json()
    assert [h["superseded"] for h in raw["hits"][:2]] == [False, True]
    assert raw["hits"][1]["chunk"]["invalid_at"] == T1.isoformat()
    assert raw["hits"][0]["chunk"]["valid_from"] == T1.isoformat()
    assert [h["chunk"]["id"] for h in epoch["hits"]] == [h.id for h in then]
