"""Session views: trace() (the whole session, any status) and context() (the latest window)."""

from __future__ import annotations

import pytest

from beeweave_core import InvalidInputError
from tests.network.net_support import at


@pytest.fixture
def talk(mem):
    """Alice's session "s1" added out of time order, with neighbours that must stay out."""
    for cid, user, session, t in [("t5", "alice", "s1", 5), ("t1", "alice", "s1", 1), ("t3", "alice", "s1", 3),
                                  ("t4", "alice", "s1", 4), ("bob2", "bob", "s1", 2), ("other0", "alice", "s2", 0),
                                  ("loose6", "alice", None, 6), ("t2", "alice", "s1", 2), ("t0", "alice", "s1", 0)]:
        mem.add(f"{cid} says something", user_id=user, session_id=session, chunk_id=cid, timestamp=at(t))
    mem.update("t4", status="archived")
    return mem


def _ids(chunks):
    return [c.id for c in chunks]


def test_trace_returns_every_memory_of_the_session_in_time_order(talk):
    chunks = talk.trace("s1", user_id="alice")
    assert _ids(chunks) == ["t0", "t1", "t2", "t3", "t4", "t5"]  # t4 is archived and still there
    assert [c.timestamp for c in chunks] == sorted(c.timestamp for c in chunks)
    assert _ids(talk.trace("s1", user_id="bob")) == ["bob2"]
    assert _ids(talk.trace("s2", user_id="alice")) == ["other0"]
    assert talk.trace("no-such-session", user_id="alice") == []


def test_context_returns_the_latest_window_in_time_order(mem):
    for t in (4, 0, 2, 5, 1, 3):
        mem.add(f"turn {t}", user_id="alice", session_id="s", chunk_id=f"t{t}", timestamp=at(t))
    mem.add("later, elsewhere", user_id="alice", session_id="other", chunk_id="x", timestamp=at(9))
    mem.add("bob's later turn", user_id="bob", session_id="s", chunk_id="b", timestamp=at(9))
    assert _ids(mem.context("s", user_id="alice", window=3)) == ["t3", "t4", "t5"]
    assert _ids(mem.context("s", user_id="alice", window=100)) == [f"t{t}" for t in range(6)]
    assert mem.context("s", user_id="alice", window=0) == []
    assert len(mem.context("s", user_id="alice")) == 6  # the default window is 10


def test_context_leaves_out_memories_that_are_not_active(talk):
    assert _ids(talk.context("s1", user_id="alice", window=3)) == ["t2", "t3", "t5"]


@pytest.mark.parametrize("window", [-1, 2.5, "3"])
def test_context_refuses_a_bad_window(talk, window):
    with pytest.raises(InvalidInputError):
        talk.context("s1", user_id="alice", window=window)
