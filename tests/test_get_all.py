"""``BeeWeave.get_all``: a user's memories a page at a time, oldest first, with a cursor that
neither repeats nor skips a memory when others are added or deleted between pages; the REST
listing (``MemoryService.list_memories``) returns the very same pages (mem0 parity, issue 44)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.server.service import MemoryService

T0 = datetime(2025, 5, 1, tzinfo=timezone.utc)


@pytest.fixture
def memory():
    m = BeeWeave(embedder=HashingEmbedder(32), clock=lambda: T0 + timedelta(days=30))
    # Ten of alice's, in an order unlike their times (two share a time: the id breaks the tie).
    for i in (3, 0, 7, 1, 9, 4, 2, 8, 6, 5):
        m.add(f"alice note number {i} about the staging cluster", user_id="alice", chunk_id=f"a{i}",
              timestamp=T0 + timedelta(hours=min(i, 8)))
    m.add("bob's own note", user_id="bob", chunk_id="b0", timestamp=T0)
    yield m
    m.close()


def pages(m: BeeWeave, **kw) -> list[list[str]]:
    out, cursor = [], None
    while True:
        page = m.get_all(user_id="alice", cursor=cursor, **kw)
        out.append([c.id for c in page.items])
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def test_pages_are_a_users_memories_oldest_first(memory) -> None:
    assert pages(memory, limit=4) == [["a0", "a1", "a2", "a3"], ["a4", "a5", "a6", "a7"], ["a8", "a9"]]
    assert [c.id for c in memory.get_all(user_id="bob").items] == ["b0"]
    assert len(memory.get_all().items) == 11  # no user: every user's, as an admin listing


def test_the_cursor_neither_repeats_nor_skips_when_the_store_changes(memory) -> None:
    first = memory.get_all(user_id="alice", limit=3)
    memory.delete("a1")  # already listed
    memory.add("an older note, added late", user_id="alice", chunk_id="a-old", timestamp=T0 - timedelta(days=1))
    rest = []
    cursor = first.next_cursor
    while cursor is not None:
        page = memory.get_all(user_id="alice", limit=3, cursor=cursor)
        rest += [c.id for c in page.items]
        cursor = page.next_cursor
    assert [c.id for c in first.items] + rest == ["a0", "a1", "a2"] + [f"a{i}" for i in range(3, 10)]


def test_filters_and_bad_arguments(memory) -> None:
    memory.update("a2", status="archived")
    active = memory.get_all(user_id="alice", filters={"status": "active"}, limit=100)
    assert "a2" not in {c.id for c in active.items} and len(active.items) == 9
    assert "a2" in {c.id for c in memory.get_all(user_id="alice", limit=100).items}  # every status, as REST
    for bad in ({"limit": 0}, {"limit": 1001}, {"cursor": "not-a-cursor"}, {"user_id": ""}):
        with pytest.raises(InvalidInputError):
            memory.get_all(**{"user_id": "alice", **bad})


def test_rest_lists_the_same_pages(memory) -> None:
    svc = MemoryService(memory)
    cursor = None
    while True:
        mine = memory.get_all(user_id="alice", limit=4, cursor=cursor)
        rest = svc.list_memories(user_id="alice", limit=4, cursor=cursor)
        assert [c.id for c in rest.items] == [c.id for c in mine.items] and rest.next_cursor == mine.next_cursor
        if mine.next_cursor is None:
            break
        cursor = mine.next_cursor
