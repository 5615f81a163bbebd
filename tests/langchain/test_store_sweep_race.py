"""A put racing a TTL sweep (issue 47, item 2): the sweep decides which items expired on one
read and deletes them on a later one; a put in between renews the item, and must win. And a
sweep between a put's read and its write must not make the put fail or vanish.

Both windows are held open deterministically, in one thread: the racing call runs inside the
other's step that follows its read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_langchain import BeeWeaveStore
from tests.lifecycle.lifecycle_support import Clock

NS = ("users", "alice")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock, tmp_path: Path) -> Iterator[BeeWeaveStore]:
    m = BeeWeave(tmp_path / "store.db", embedder=HashingEmbedder(32), clock=clock)
    s = BeeWeaveStore(m)
    s.put(NS, "plan", {"text": "Oslo on Monday"}, ttl=1)
    clock.now += timedelta(minutes=5)  # expired: the next sweep deletes it
    yield s
    m.close()


def test_a_put_between_the_sweeps_read_and_its_delete_is_kept(store: BeeWeaveStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    memory = store.memory
    delete_many = memory.delete_many
    raced: list[bool] = []

    def put_first(ids: Any, **kw: Any) -> list[str]:
        raced.append(True)
        store.put(NS, "plan", {"text": "Bergen on Friday"}, ttl=60)  # the item, renewed
        return delete_many(ids, **kw)

    monkeypatch.setattr(memory, "delete_many", put_first)
    assert store.sweep() == 0
    assert raced
    item = store.get(NS, "plan")
    assert item is not None and item.value == {"text": "Bergen on Friday"}


def test_a_sweep_between_a_puts_read_and_its_write_loses_nothing(store: BeeWeaveStore,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    memory = store.memory
    get_many = memory.get_many
    swept: list[int] = []

    def then_sweep(ids: Any) -> Any:
        found = get_many(ids)
        if not swept:  # the put has read the expired item; the sweep deletes it now
            swept.append(store.sweep())
        return found

    monkeypatch.setattr(memory, "get_many", then_sweep)
    store.put(NS, "plan", {"text": "Bergen on Friday"}, ttl=60)
    monkeypatch.undo()
    assert swept == [1]
    item = store.get(NS, "plan")
    assert item is not None and item.value == {"text": "Bergen on Friday"}
    assert store.sweep() == 0
