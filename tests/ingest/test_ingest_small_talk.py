"""Small talk is not stored: greetings and thanks answered in kind, and a request answered by
an acknowledgement alone, in English and Chinese; a statement answered "OK" is kept, and so is
a run that used tools. ``IngestConfig(skip_small_talk=False)`` stores everything."""

from __future__ import annotations

import pytest

from beeweave_core.filters import build_filter
from beeweave_core.ingest.small_talk import is_small_talk

SKIPPED = [("Recommend a good sci-fi novel.", "OK."), ("Thanks!", "You're welcome!"), ("谢谢", "不客气"),
           ("推荐一本科幻小说", "好的"), ("Can you find me a hotel?", "Sure."), ("", "OK"), ("晚安", "晚安！")]
KEPT = [("I moved to Munich.", "OK."), ("我搬到慕尼黑了", "好的"), ("What is the staging port?", "5433"),
        ("The deploy failed again", "Got it."), ("Where is the wifi password?", ""), ("Recommend a sci-fi novel.", "Try 'The Three-Body Problem' by Liu Cixin.")]


@pytest.mark.parametrize(("query", "response"), SKIPPED)
def test_small_talk_is_recognised(query: str, response: str) -> None:
    assert is_small_talk(query, response)


@pytest.mark.parametrize(("query", "response"), KEPT)
def test_what_says_something_is_not_small_talk(query: str, response: str) -> None:
    assert not is_small_talk(query, response)


def test_small_talk_is_not_stored_and_facts_are(make_memory) -> None:
    m = make_memory()
    for i, (q, r) in enumerate(SKIPPED + KEPT):
        m.ingest({"id": f"e{i}", "user_id": "u", "query": q, "response": r})
    m.ingest({"id": "tools", "user_id": "u", "query": "Thanks!", "response": "OK.",
              "intermediate_steps": [{"tool": "deploy_status", "input": "staging", "output": "staging deploy #42 is green"}]})
    assert m.flush(10)
    contents = [c.raw_content for c in m.backend.scan(build_filter(None, user_id="u"))]
    for q, r in SKIPPED:
        assert "\n\n".join(p for p in (q, r) if p) not in contents, (q, r)
    for q, r in KEPT:
        assert "\n\n".join(p for p in (q, r) if p) in contents, (q, r)
    assert any("staging deploy #42" in c for c in contents)  # the run with a tool is kept


def test_it_can_be_turned_off(make_memory) -> None:
    m = make_memory(skip_small_talk=False)
    m.ingest({"id": "e", "user_id": "u", "query": "Thanks!", "response": "You're welcome!"})
    assert m.flush(10)
    assert m.get("e@u:0").raw_content == "Thanks!\n\nYou're welcome!"
