"""Standing queries are kept in the store: a reopened store keeps them, another process on the
same store sees them and checks its own writes, unwatch ends them everywhere, and forgetting
a user removes theirs. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from beeweave_core import BeeWeave, EventType
from beeweave_core.engine import watch as watch_module

# ``reopen`` (tests/lifecycle/conftest.py) opens the same SQLite file or PostgreSQL tenant
# each time: after a close, or beside another open store (as another process has it).
Opener = Callable[..., BeeWeave]


@contextmanager
def matches(memory: BeeWeave) -> Iterator[list[tuple[str | None, str]]]:
    seen: list[tuple[str | None, str]] = []
    sub = memory.events.subscribe(lambda e: seen.append((e.chunk_id, e.data["watch_id"])),
                                  types=[EventType.WATCH_MATCHED])
    yield seen
    memory.events.unsubscribe(sub)


def test_a_watch_survives_a_reopen(reopen: Opener) -> None:
    a = reopen()
    w = a.watch("nightly database backup", user_id="u", agent_id="ops", min_relevance=0.9)
    a.close()
    with reopen() as b:
        assert [(x.id, x.query, x.user_id, x.agent_id, x.min_relevance) for x in b.watches()] == [
            (w.id, "nightly database backup", "u", "ops", 0.9)]
        with matches(b) as seen:
            hit = b.add("nightly database backup", user_id="u")
            b.add("lunch is at noon", user_id="u")
        assert seen == [(hit, w.id)]


def test_another_process_sees_watches_and_their_end(reopen: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    with reopen() as a, reopen() as b:
        assert b.watches() == []  # b has looked: its view is now fresh
        w = a.watch("nightly database backup", user_id="u", min_relevance=0.9)
        monkeypatch.setattr(watch_module, "REFRESH_SECONDS", 0.0)  # instead of waiting a second
        with matches(b) as seen:
            hit = b.add("nightly database backup", user_id="u")
        assert seen == [(hit, w.id)] and [x.id for x in b.watches()] == [w.id]
        assert b.unwatch(w.id)
        assert a.watches() == [] and not a.unwatch(w.id)
        with matches(a) as seen:
            a.add("nightly database backup", user_id="u")
        assert seen == []


def test_forgetting_a_user_removes_their_watches(reopen: Opener) -> None:
    with reopen() as m:
        m.watch("nightly database backup", user_id="u")
        kept = m.watch("nightly database backup", user_id="v")
        m.add("something", user_id="u")
        m.backend.delete_user("u")
    with reopen() as m:
        assert [w.id for w in m.watches()] == [kept.id]
