"""BeeWeaveStore.put refuses what it cannot store with ``InvalidInputError`` (a BeeWeaveError
and a ValueError), before anything is written (issue 47, item 10): a value nested 3,000 deep
raised a raw ``RecursionError`` and ``ttl=1e10`` an ``OverflowError``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from langgraph.store.base import PutOp

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_langchain import BeeWeaveStore
from beeweave_langchain.store import item_id

MAX_TTL_MINUTES = 1000 * 525_960  # a thousand years: beeweave_langchain.store.MAX_TTL_MINUTES


def _nested(depth: int) -> dict:
    value: dict = {"text": "bottom"}
    for _ in range(depth):
        value = {"a": value}
    return value


def _nested_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _bad_puts() -> list[tuple[str, dict, float | None]]:
    return [("deep", _nested(3000), None), ("deep-list", {"text": "x", "l": _nested_list(3000)}, None),
            ("far", {"text": "x"}, 1e10), ("past-max", {"text": "x"}, MAX_TTL_MINUTES * 1.01)]


@pytest.mark.parametrize("key,value,ttl", _bad_puts(), ids=[k for k, _, _ in _bad_puts()])
def test_a_bad_put_is_an_invalid_input_error_and_writes_nothing(memory, key, value, ttl) -> None:
    store = BeeWeaveStore(memory)
    store.put(("notes",), "old", {"text": "kept"})
    with pytest.raises(InvalidInputError):
        store.put(("notes",), key, value, ttl=ttl)
    # in a batch: the bad put is checked before the delete and the good put before it run
    with pytest.raises(InvalidInputError):
        store.batch([PutOp(("notes",), "old", None), PutOp(("notes",), "new", {"text": "n"}),
                     PutOp(("notes",), key, value, ttl=ttl)])
    assert store.get(("notes",), "old").value == {"text": "kept"}
    assert store.get(("notes",), "new") is None and store.get(("notes",), key) is None
    assert memory.count() == 1


def test_the_longest_ttl_is_kept_and_refreshing_it_never_overflows() -> None:
    from beeweave_langchain import store as module

    assert module.MAX_TTL_MINUTES == MAX_TTL_MINUTES
    now = [datetime(9000, 1, 1, tzinfo=timezone.utc)]
    memory = BeeWeave(embedder=HashingEmbedder(32), clock=lambda: now[0])
    try:
        store = BeeWeaveStore(memory)
        store.put(("notes",), "k", {"text": "for a long time"}, ttl=MAX_TTL_MINUTES)
        assert memory.get(item_id(("notes",), "k")).expires_at == datetime.max.replace(tzinfo=timezone.utc)
        now[0] += timedelta(days=365)
        assert store.get(("notes",), "k").value == {"text": "for a long time"}  # a refresh saturates
    finally:
        memory.close()
