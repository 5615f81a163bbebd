"""The write policy on ``BeeWeave.add``/``add_many``: redaction and admission by default,
``trusted=True`` for imports of clean data; minimum confidence / importance per source."""

from __future__ import annotations

import pytest

from beeweave_core import ChunkStatus, InvalidInputError, KnowledgeChunk
from beeweave_core.ingest import AdmissionRules, Candidate, SourceRule
from beeweave_core.ingest.admission import admit
from beeweave_core.ingest.redact import Redactor

SECRET = "Call me at dana@example.com or 13812345678."


def test_add_redacts_by_default_and_says_so(make_memory) -> None:
    m = make_memory()
    c = m.get(m.add(SECRET, user_id="u", tags=["dana@example.com"], metadata={"note": "13812345678"}))
    assert c.raw_content == "Call me at [EMAIL] or [PHONE]." and c.content == c.raw_content
    assert c.tags == ["[EMAIL]"] and c.metadata["note"] == "[PHONE]"
    assert c.metadata["ingest"] == {"role": "manual", "redactions": {"email": 2, "phone": 2}}
    assert m.search("dana@example.com", user_id="u", k=5)[0].chunk.raw_content == c.raw_content


def test_a_clean_memory_is_stored_as_given(make_memory) -> None:
    m = make_memory()
    c = m.get(m.add("The user prefers green tea in the morning.", user_id="u", metadata={"a": 1}))
    assert c.metadata == {"a": 1} and c.status is ChunkStatus.ACTIVE


def test_trusted_imports_skip_the_policy(make_memory) -> None:
    m = make_memory()
    one = m.get(m.add(SECRET, user_id="u", trusted=True))
    many = m.get_many(m.add_many([{"content": SECRET, "user_id": "u"}], trusted=True))
    assert one.raw_content == SECRET and many[0].raw_content == SECRET
    assert "ingest" not in one.metadata
    with pytest.raises(InvalidInputError):
        m.add(SECRET, user_id="u", trusted="yes")


def test_add_many_redacts_dicts_and_chunks(make_memory) -> None:
    m = make_memory()
    ids = m.add_many([{"content": SECRET, "user_id": "u"},
                      KnowledgeChunk(SECRET, "u", summary="mail dana@example.com", entities=["dana@example.com"])])
    a, b = m.get_many(ids)
    assert a.raw_content == b.raw_content == "Call me at [EMAIL] or [PHONE]."
    assert b.content == b.raw_content and b.summary == "mail [EMAIL]" and b.entities == ["[EMAIL]"]
    assert b.metadata["ingest"]["redactions"] == {"email": 3, "phone": 1}


def test_update_redacts_what_add_would_have(make_memory) -> None:
    m = make_memory()
    cid = m.add("The user prefers green tea.", user_id="u")
    for field in ("content", "raw_content"):
        c = m.update(cid, **{field: SECRET}, tags=["dana@example.com"], metadata={"note": "13812345678"})
        assert c.raw_content == "Call me at [EMAIL] or [PHONE]." and c.content == c.raw_content
        assert c.tags == ["[EMAIL]"] and c.metadata["note"] == "[PHONE]"
    c = m.update(cid, summary="mail dana@example.com", entities=["dana@example.com"],
                 processed_content={"type": "text", "text": SECRET})
    assert c.summary == "mail [EMAIL]" and c.entities == ["[EMAIL]"] and "dana@" not in c.content
    assert all("dana@" not in h.chunk.content for h in m.search("dana@example.com", user_id="u", k=5))
    assert m.update(cid, content=SECRET, trusted=True).raw_content == SECRET
    with pytest.raises(InvalidInputError):
        m.update(cid, content="x", trusted="yes")
    assert m.get(cid).raw_content == SECRET  # the refused update changed nothing


def test_redaction_keeps_the_text_around_it() -> None:
    r = Redactor()
    assert r.redact("Dana (+1 415 555 0199).") == "Dana ([PHONE])."
    assert r.redact("(+86 138 1234 5678)") == "([PHONE])"
    assert r.redact("ring +44 (20) 7946 0958 today") == "ring [PHONE] today"  # a whole group in parentheses


def test_direct_writes_pass_admission(make_memory) -> None:
    m = make_memory(admission=AdmissionRules(blocked_words=["confidential"], min_confidence=0.7))
    held = m.get(m.add("The confidential roadmap ships in May.", user_id="u"))
    assert held.status is ChunkStatus.PENDING
    assert held.metadata["ingest"]["review"] == ["blocked word 'confidential'"]
    unsure = m.get(m.add("The deploy window is probably Friday.", user_id="u", confidence=0.4))
    assert unsure.status is ChunkStatus.PENDING and unsure.metadata["ingest"]["review"] == ["confidence 0.4 < 0.7"]
    sure = m.get(m.add("The deploy window is Friday at noon.", user_id="u", confidence=0.9))
    assert sure.status is ChunkStatus.ACTIVE
    short = m.get(m.add("Likes tea", user_id="u"))  # a caller's own short note is meant: length is for turns
    assert short.status is ChunkStatus.ACTIVE
    given = m.get(m.add("The confidential plan, reviewed.", user_id="u", status="active"))
    assert given.status is ChunkStatus.ACTIVE  # an explicit status is the caller's decision


def test_minimums_per_source() -> None:
    rules = AdmissionRules(sources=[SourceRule(agent_id="scraper", min_confidence=0.7, min_importance=0.6),
                                    SourceRule(agent_id="scraper", decision="active")])
    text = "a perfectly ordinary memory about tea"
    ok = Candidate(text, "u", "scraper", confidence=0.9, importance=1.0)
    assert admit(rules, ok) == (ChunkStatus.ACTIVE, [])
    status, why = admit(rules, Candidate(text, "u", "scraper", confidence=0.9))
    assert status is ChunkStatus.PENDING
    assert why == ["importance not stated < 0.6 (source rule: agent_id='scraper')"]
    status, why = admit(rules, Candidate(text, "u", "scraper", confidence=0.5, importance=0.6))
    assert why == ["confidence 0.5 < 0.7 (source rule: agent_id='scraper')"]
    assert admit(rules, Candidate(text, "u", "other")) == (ChunkStatus.ACTIVE, [])  # other sources: unchecked
    with pytest.raises(InvalidInputError):
        SourceRule(min_confidence=1.5)
    with pytest.raises(InvalidInputError):
        AdmissionRules(min_importance=-0.1)
