"""Importance the user states is a cue in Chinese as in English: "这个很重要", "记住", "别忘了",
"以后都…", "this is important", "don't forget"; said in the negative or asked, it is not. A
stated cue makes the memory important, so it is kept long-term from the start (issue 44)."""

from __future__ import annotations

import pytest

from beeweave_core.ingest.importance import stated_importance
from beeweave_core.records import MemoryTier
from tests.ingest.ingest_support import everything

CUES = ["这个很重要：我的护照号码是E12345678。", "记住，我对花生过敏。", "别忘了周五交季度报告", "以后都用中文回答我",
        "务必在发布前跑完测试", "非常重要！每周一九点开站会", "請記住我的生日是三月五日", "千万别忘了给猫喂药",
        "This is important: the VPN token rotates monthly.", "Don't forget my flight leaves on Friday.",
        "Remember that I take my coffee black.", "From now on, answer in French.", "Keep in mind I'm vegetarian."]
NOT_CUES = ["这个不重要", "没那么重要，不用记住", "这个重要吗？", "我记得他住在柏林", "帮我推荐一本科幻小说",
            "It's not very important.", "Is this important?", "I remember when we met in Rome.",
            "What is the wifi password?", "An unimportant detail: the room is blue."]


@pytest.mark.parametrize("text", CUES)
def test_a_stated_cue_is_high_importance(text: str) -> None:
    assert stated_importance(text) == 1.0


@pytest.mark.parametrize("text", NOT_CUES)
def test_negated_asked_or_absent_cues_state_nothing(text: str) -> None:
    assert stated_importance(text) is None


def test_a_chinese_cue_keeps_the_memory_long_term(make_memory) -> None:
    m = make_memory()
    m.ingest({"id": "cue", "user_id": "u", "query": "这个很重要：我的护照号码放在书房左边的抽屉里", "response": "好的，我记下了。"})
    m.ingest({"id": "plain", "user_id": "u", "query": "我的雨伞放在门口的柜子里", "response": "好的，我记下了。"})
    assert m.flush(10)
    got = {c.id: c for c in everything(m, user_id="u")}
    assert got["cue@u:0"].metadata.get("importance") == 1.0 and got["cue@u:0"].tier is MemoryTier.LONG
    assert "importance" not in got["plain@u:0"].metadata and got["plain@u:0"].tier is not MemoryTier.LONG


def test_the_assistants_emphasis_is_not_the_users_judgment(make_memory) -> None:
    m = make_memory()
    m.ingest({"id": "e", "user_id": "u", "query": "How do I rotate the VPN token?",
              "response": "Important: run vpn-rotate on the first of each month."})
    assert m.flush(10)
    [chunk] = everything(m, user_id="u")
    assert "importance" not in chunk.metadata
