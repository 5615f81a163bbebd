"""Over REST, with keys scoped to one user each: alice's and bob's events "turn-1" are both
stored, neither is dead-lettered, and alice's key cannot take the ids bob's event will use
(issue 47, item 4; before, bob got 202 and his event went to the dead letters)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beeweave_core.ids import event_memory_id
from beeweave_core.server import ServerConfig
from tests.service.service_support import LiveServer, event, start_server

ADMIN, ALICE, BOB = "ids-admin-key", "ids-alice-key", "ids-bob-key"
KEYS = {ADMIN: "acme", ALICE: {"tenant": "acme", "users": ["alice"]}, BOB: {"tenant": "acme", "users": ["bob"]}}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = start_server(ServerConfig(tmp_path_factory.mktemp("ids"), KEYS, embedder="beeweave:hashing-64"))
    yield srv
    srv.stop()


def test_two_scoped_keys_ingest_one_event_id(live):
    bobs_turn = event_memory_id("turn-1", "bob", 0)
    with live.http(ALICE) as alice:  # alice tries to take the id bob's event will store under
        taken = alice.post("/api/v1/memories", json={"content": "Alice was here first.", "user_id": "alice",
                                                     "id": bobs_turn})
        assert taken.status_code == 400, taken.text
        assert alice.post("/api/v1/ingest", json=event("alice", "Where is my umbrella?", "In the hall.",
                                                        id="turn-1")).status_code == 202
    with live.http(BOB) as bob:
        assert bob.post("/api/v1/ingest", json=event("bob", "Where is my passport?", "In the desk drawer.",
                                                      id="turn-1")).status_code == 202
        assert bob.post("/api/v1/flush", params={"timeout": 20}).json()["drained"]
        assert bob.get("/api/v1/dead-letters").json()["dead_letters"] == []
        mine = bob.get(f"/api/v1/memories/{bobs_turn}")
        assert mine.status_code == 200 and "passport" in mine.json()["raw_content"]
    with live.http(ADMIN) as admin:
        assert admin.get("/api/v1/dead-letters").json()["dead_letters"] == []
        assert "umbrella" in admin.get(f"/api/v1/memories/{event_memory_id('turn-1', 'alice', 0)}").json()["raw_content"]
