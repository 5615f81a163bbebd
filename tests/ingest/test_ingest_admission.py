"""Admission rules (active vs pending review) and the review API: pending, approve, reject."""

from __future__ import annotations

import pytest

from beeweave_core import ChunkStatus, InvalidInputError, NotFoundError
from beeweave_core.ingest import Admission, AdmissionRules, Candidate, KnowledgeEvent, SourceRule, ToolCall
from beeweave_core.ingest.admission import admit
from tests.ingest.ingest_support import everything


def c(text: str = "a perfectly ordinary memory about tea", **kw) -> Candidate:
    return Candidate(text=text, user_id="u", **kw)


def test_defaults_admit_ordinary_memories() -> None:
    assert admit(AdmissionRules(), c()) == (ChunkStatus.ACTIVE, [])


def test_minimum_length() -> None:
    status, why = admit(AdmissionRules(min_chars=20), c("ok thanks"))
    assert status is ChunkStatus.PENDING and why == ["too short (9 < 20 characters, a CJK character counting as two)"]


@pytest.mark.parametrize("text, active", [
    ("我住在哪里？\n\n你住在杭州西湖区。", True),  # 17 characters, more than "Where do I live? In Hangzhou."
    ("Where do I live?\n\nIn Hangzhou.", True),
    ("好的。\n\n谢谢！", False),  # "ok", "thanks" in Chinese are not knowledge either
    ("ＯＫ\n\n好", False),  # fullwidth letters are wide too: 8 columns
])
def test_minimum_length_counts_a_cjk_character_as_two(text: str, active: bool) -> None:
    # A user trial saw a Chinese question and answer held for review while the same exchange in
    # English, which says less, was stored.
    status, _ = admit(AdmissionRules(min_chars=20), c(text))
    assert (status is ChunkStatus.ACTIVE) is active


@pytest.mark.parametrize("text, blocked", [
    ("the CONFIDENTIAL roadmap", True),
    ("confidentiality is fine", False),  # whole words only for Latin script
    ("这是机密文件的内容摘要", True),  # substrings for Chinese
])
def test_blocked_words(text: str, blocked: bool) -> None:
    status, why = admit(AdmissionRules(min_chars=0, blocked_words=["confidential", "机密"]), c(text))
    assert (status is ChunkStatus.PENDING) is blocked
    assert bool(why) is blocked


@pytest.mark.parametrize("feedback, status", [(None, ChunkStatus.PENDING), (-1.0, ChunkStatus.PENDING),
                                               (0.0, ChunkStatus.PENDING), (1.0, ChunkStatus.ACTIVE)])
def test_require_positive_feedback(feedback, status) -> None:
    assert admit(AdmissionRules(require_positive_feedback=True), c(feedback=feedback))[0] is status


def test_source_rules_first_match_wins_before_the_checks() -> None:
    rules = AdmissionRules(min_chars=100, sources=[
        SourceRule(Admission.ACTIVE, tool="calculator"),
        SourceRule(Admission.PENDING, agent_id="scraper"),
    ])
    assert admit(rules, c("2+2=4", tools=("calculator",)))[0] is ChunkStatus.ACTIVE  # trusted despite length
    status, why = admit(rules, c("x" * 200, agent_id="scraper"))
    assert status is ChunkStatus.PENDING and why == ["source rule: agent_id='scraper'"]
    assert admit(rules, c("x" * 200, agent_id="helper"))[0] is ChunkStatus.ACTIVE


def test_custom_checks_and_a_pending_default() -> None:
    rules = AdmissionRules(checks=[lambda cand: "mentions money" if "$" in cand.text else None])
    assert admit(rules, c("it costs $5 per month, said the agent"))[1] == ["mentions money"]
    assert admit(AdmissionRules(default=Admission.PENDING), c())[0] is ChunkStatus.PENDING


def test_bad_rules_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        AdmissionRules(min_chars=-1)
    with pytest.raises(InvalidInputError):
        AdmissionRules(blocked_words="secret")
    with pytest.raises(InvalidInputError):
        AdmissionRules(sources=[{"agent_id": "x"}])


# -- through ingest ----------------------------------------------------------------------------
def test_pending_memories_are_stored_but_not_found_until_approved(make_memory) -> None:
    m = make_memory(admission=AdmissionRules(blocked_words=["internal"]))
    m.ingest(KnowledgeEvent(user_id="u", id="e1", query="What is the internal VPN address?",
                            response="The VPN gateway is vpn.example.org on port 443."))
    m.ingest(KnowledgeEvent(user_id="u", id="e2", query="What tea does the user like?",
                            response="The user likes green tea without sugar."))
    assert m.flush(10)
    assert [x.id for x in m.pending(user_id="u")] == ["e1@u:0"]
    held = m.get("e1@u:0")
    assert held.status is ChunkStatus.PENDING and held.metadata["ingest"]["review"] == ["blocked word 'internal'"]
    assert "e1@u:0" not in {h.id for h in m.search("VPN gateway address", user_id="u", k=5)}
    assert m.approve(["e1@u:0", "e2@u:0"]) == ["e1@u:0"]  # e2:0 was already active
    assert m.get("e1@u:0").status is ChunkStatus.ACTIVE
    assert m.get("e1@u:0").metadata["ingest"]["reviewed"]["decision"] == "approved"
    assert "e1@u:0" in {h.id for h in m.search("VPN gateway address", user_id="u", k=5)}
    assert m.pending() == []


def test_reject_deletes_and_the_memory_never_comes_back(make_memory) -> None:
    m = make_memory(admission=AdmissionRules(require_positive_feedback=True))
    event = KnowledgeEvent(user_id="u", id="e1", query="Which port does the API use?",
                           response="It listens on port 8080 behind the proxy.", feedback=None)
    m.ingest(event)
    assert m.flush(10)
    assert m.reject("e1@u:0", reason="wrong port") == ["e1@u:0"]
    assert everything(m) == []
    m.ingest(event)  # the same event again (e.g. a replayed callback)
    assert m.flush(10)
    assert everything(m) == []


def test_review_checks_every_id_before_changing_anything(make_memory) -> None:
    m = make_memory(admission=AdmissionRules(default=Admission.PENDING))
    m.ingest({"user_id": "u", "id": "e1", "query": "Where is the office?", "response": "In Lyon, near the station."})
    assert m.flush(10)
    with pytest.raises(NotFoundError):
        m.approve(["e1@u:0", "nope"])
    assert m.get("e1@u:0").status is ChunkStatus.PENDING
    with pytest.raises(InvalidInputError):
        m.reject([3])


def test_per_tool_rule_holds_only_that_tools_memories(make_memory) -> None:
    m = make_memory(admission=AdmissionRules(sources=[SourceRule(Admission.PENDING, tool="web_search", role="tool")]))
    m.ingest(KnowledgeEvent(user_id="u", id="e1", query="Weather in Oslo?", response="Cold and clear today, -5 C.",
                            intermediate_steps=[ToolCall("web_search", "oslo weather", "Oslo: -5 C, clear sky, wind 3 m/s"),
                                                ToolCall("calculator", "2*3", "The product of 2 and 3 is 6, exactly.")]))
    assert m.flush(10)
    status = {x.id: x.status for x in everything(m)}
    assert status == {"e1@u:0": ChunkStatus.ACTIVE, "e1@u:1": ChunkStatus.PENDING, "e1@u:2": ChunkStatus.ACTIVE}
    assert [x.id for x in m.pending(agent_id=None)] == ["e1@u:1"]
