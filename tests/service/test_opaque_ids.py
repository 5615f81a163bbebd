"""A key scoped to users never learns which memory ids exist (docs/rest.md, Scoped keys): every
route answers another user's id exactly as an id that does not exist (issue 47, item 5).

Before: ``POST /memories {"id": <bob's>}`` was 409 (201 for a free id), an import naming it
409 or 400 (200), and feedback or history said "no such memory" (else "no chunk with id")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from beeweave_core.server import ServerConfig
from tests.service.service_support import LiveServer, start_server

EMB = "beeweave:hashing-64"
ADMIN, ALICE = "opaque-admin-key", "opaque-alice-key"
KEYS = {ADMIN: "acme", ALICE: {"tenant": "acme", "users": ["alice"], "admin": True}}
BOBS, NONE = "bob-plan", "never-was"  # bob's memory, and an id no one holds


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = start_server(ServerConfig(tmp_path_factory.mktemp("opaque"), KEYS, embedder=EMB))
    with srv.http(ADMIN) as h:
        r = h.post("/api/v1/memories", json={"content": "Bob's plan for the merger.", "user_id": "bob",
                                             "id": BOBS, "status": "active"})
        assert r.status_code == 201, r.text
        h.patch(f"/api/v1/memories/{BOBS}", json={"content": "Bob's plan for the merger, revised."})  # a version
    yield srv
    srv.stop()


def _export(cid: str) -> dict[str, Any]:
    return {"format": "beeweave.export/1", "user_id": "alice", "chunks": [
        {"id": cid, "user_id": "alice", "raw_content": "Alice's note.", "timestamp": "2026-03-01T09:00:00+00:00"}]}


PROBES = {
    "add": lambda h, cid: h.post("/api/v1/memories", json={"content": "Alice's note.", "user_id": "alice", "id": cid}),
    "import": lambda h, cid: h.post("/api/v1/users/alice/import", json=_export(cid)),
    "get": lambda h, cid: h.get(f"/api/v1/memories/{cid}"),
    "history": lambda h, cid: h.get(f"/api/v1/memories/{cid}/history"),
    "feedback": lambda h, cid: h.post("/api/v1/feedback", json={"chunk_ids": [cid], "signal": "up"}),
    "approve": lambda h, cid: h.post("/api/v1/review/approve", json={"ids": [cid]}),
    "reject": lambda h, cid: h.post("/api/v1/review/reject", json={"ids": [cid]}),
    "resolve": lambda h, cid: h.post("/api/v1/review/resolve", json={"chunk_id": cid, "decision": "keep"}),
    "relate": lambda h, cid: h.post("/api/v1/relationships", json={"source_id": cid, "target_id": cid,
                                                                    "type": "related"}),
}


def _answer(r: httpx.Response, cid: str) -> tuple[int, str]:
    return r.status_code, r.text.replace(cid, "<id>")


@pytest.mark.parametrize("route", sorted(PROBES))
def test_another_users_id_is_answered_as_a_missing_one(live, route):
    with live.http(ALICE) as h:
        theirs, missing = PROBES[route](h, BOBS), PROBES[route](h, NONE)
    assert theirs.status_code in (400, 404), theirs.text
    assert _answer(theirs, BOBS) == _answer(missing, NONE)
    with live.http(ADMIN) as h:  # and nothing of bob's changed
        bob = h.get(f"/api/v1/memories/{BOBS}").json()
        assert (bob["user_id"], bob["weight"], bob["status"]) == ("bob", 1.0, "active")


def test_a_scoped_key_chooses_ids_in_its_users_name(live):
    with live.http(ALICE) as h:
        r = h.post("/api/v1/memories", json={"content": "Alice's own note.", "user_id": "alice", "id": "note-1@alice"})
        assert r.status_code == 201 and r.json()["id"] == "note-1@alice", r.text
        again = h.post("/api/v1/memories", json={"content": "Alice's own note.", "user_id": "alice",
                                                 "id": "note-1@alice"})
        assert again.status_code == 409  # her own id: she may know it exists
        plain = h.post("/api/v1/memories", json={"content": "Alice's note.", "user_id": "alice", "id": "note-2"})
        assert plain.status_code == 400 and "'<name>@alice'" in plain.json()["detail"]
        assert h.post("/api/v1/users/alice/import", json=_export("imported@alice")).status_code == 200
        generated = h.post("/api/v1/memories", json={"content": "No id given.", "user_id": "alice"})
        assert generated.status_code == 201 and generated.json()["id"].endswith("@alice")
        # Her export (with her events' memories, <event id>@alice:<n>) goes back in with her key.
        assert h.post("/api/v1/ingest", json={"user_id": "alice", "id": "t1", "query": "Where is the tent?",
                                              "response": "In the attic."}).status_code == 202
        assert h.post("/api/v1/flush", params={"timeout": 20}).json()["drained"]
        export = h.get("/api/v1/users/alice/export").json()
        assert "t1@alice:0" in {c["id"] for c in export["chunks"]}
        back = h.post("/api/v1/users/alice/import", json=export)
        assert back.status_code == 200 and back.json()["memories"] == 0, back.text  # all there: skipped
    # A plain id alice already holds (a tenant-wide key gave it) is hers to import again.
    with live.http(ADMIN) as admin:
        assert admin.post("/api/v1/memories", json={"content": "Alice's plain note.", "user_id": "alice",
                                                    "id": "plain-of-alice"}).status_code == 201
        export = admin.get("/api/v1/users/alice/export").json()
    with live.http(ALICE) as h:
        assert h.post("/api/v1/users/alice/import", json=export).status_code == 200
