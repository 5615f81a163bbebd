"""BeeWeave and BeeWeaveClient both satisfy MemoryAPI: the faces accept either."""

from __future__ import annotations

import inspect

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.api import MemoryAPI
from beeweave_core.client import BeeWeaveClient

METHODS = [name for name, v in vars(MemoryAPI).items() if callable(v) and not name.startswith("_")]


def test_the_protocol_names_the_methods_the_faces_call() -> None:
    assert {"ingest", "flush", "search", "feedback", "trace", "close"} <= set(METHODS)


def test_the_engine_is_a_memory_api() -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        assert isinstance(m, MemoryAPI)


def test_the_client_is_a_memory_api() -> None:
    client = BeeWeaveClient("http://127.0.0.1:9")  # nothing is sent until a call is made
    try:
        assert isinstance(client, MemoryAPI)
    finally:
        client.close()


@pytest.mark.parametrize("cls", [BeeWeave, BeeWeaveClient])
@pytest.mark.parametrize("name", METHODS)
def test_signatures_accept_what_the_protocol_promises(cls: type, name: str) -> None:
    """Every parameter of the protocol's method exists in the implementation with the same kind."""
    want = inspect.signature(getattr(MemoryAPI, name)).parameters
    have = inspect.signature(getattr(cls, name)).parameters
    for pname, p in want.items():
        assert pname in have, f"{cls.__name__}.{name} lacks {pname}"
        assert have[pname].kind == p.kind, f"{cls.__name__}.{name}({pname}) is {have[pname].kind}, not {p.kind}"
        if p.default is not inspect.Parameter.empty:
            assert have[pname].default is not inspect.Parameter.empty, f"{cls.__name__}.{name}({pname}) is required"


def test_forget_user_tells_subscribers_and_stops_the_users_watches():
    from beeweave_core import BeeWeave

    with BeeWeave(embedder="beeweave:hashing-64") as m:
        ids = [m.add(f"note {i} about passports", user_id="gone") for i in range(2)]
        kept = m.add("note about passports", user_id="kept")
        m.watch("passports", user_id="gone", min_relevance=0.0)
        seen = []
        m.events.subscribe(seen.append)
        assert m.forget_user("gone") == 2
        assert sorted((e.type.value, e.chunk_id, e.user_id) for e in seen) == sorted(
            ("memory.deleted", i, "gone") for i in ids)
        assert m.watches() == [] and m.count() == 1 and m.get(kept).user_id == "kept"
