"""Scopes over REST: a key scoped to a user reads the tenant's shared knowledge and the shared
scopes its settings name, never another user's memories; it writes only the scopes of its
``write_scopes``, and the store's write rules refuse an agent a scope (403); a user's forget
and export leave shared knowledge alone."""

from __future__ import annotations

import pytest

from beeweave_core.scopes import ScopeConfig, WriteRule
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

ADMIN, ALICE, BOB = "admin-key-0001", "alice-key-0001", "bob-key-00001"
KEYS = {ADMIN: "acme",
        ALICE: {"tenant": "acme", "users": ["alice"], "write_scopes": ["project:atlas"]},
        BOB: {"tenant": "acme", "users": ["bob"]}}
RULES = ScopeConfig(writers=[WriteRule("project:atlas", agents=["code-agent"]), WriteRule("tenant")])


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = start_server(ServerConfig(tmp_path_factory.mktemp("scopes"), KEYS, embedder=EMBEDDER,
                                  memory_kwargs={"scopes": RULES}))
    yield s
    s.stop()


def _add(h, user: str, content: str, **fields) -> int:
    return h.post("/api/v1/memories", json={"content": content, "user_id": user, "status": "active",
                                            **fields}).status_code


def _search(h, **body) -> set[str]:
    r = h.post("/api/v1/search", json={"query": "staging", "k": 20, "abstain_below": 0, **body})
    assert r.status_code == 200, r.text
    return {hit["chunk"]["user_id"] for hit in r.json()["hits"]}


def test_keys_read_and_write_shared_scopes_and_forget_leaves_them(srv) -> None:
    with srv.http(ADMIN) as admin, srv.http(ALICE) as alice, srv.http(BOB) as bob:
        assert _add(admin, "scope:tenant", "Staging refunds take five working days.") == 201
        assert _add(alice, "scope:project:atlas", "The staging parser uses a Pratt loop.", agent_id="code-agent") == 201
        assert _add(alice, "alice", "Alice's staging locker code is 4411.") == 201
        assert _add(bob, "bob", "Bob's staging desk is by the window.") == 201
        # the key may write the project, but the store's rules refuse this agent: 403
        assert _add(alice, "scope:project:atlas", "The staging docs live in docs/.", agent_id="docs-agent") == 403
        # a key without the scope in its write_scopes: 403, for a memory and for an event
        assert _add(bob, "scope:project:atlas", "Bob's staging parser notes.", agent_id="code-agent") == 403
        r = bob.post("/api/v1/ingest", json={"user_id": "scope:project:atlas", "query": "staging parser?",
                                             "response": "Pratt."})
        assert r.status_code == 403

        assert _search(bob) == {"bob", "scope:tenant"}  # never alice's, no project of his
        assert bob.post("/api/v1/search", json={"query": "staging", "user_id": "alice"}).status_code == 404
        assert bob.post("/api/v1/search", json={"query": "staging", "scopes": ["project:atlas"]}).status_code == 404
        assert _search(alice) == {"alice", "scope:tenant", "scope:project:atlas"}
        assert _search(alice, scopes=["project:atlas"]) == {"scope:project:atlas"}
        assert _search(admin, scopes=["project:atlas", "tenant"]) == {"scope:project:atlas", "scope:tenant"}

        # a shared memory a search returned: the key reads it and rates it, but may not edit it
        hit = bob.post("/api/v1/search", json={"query": "refunds", "abstain_below": 0}).json()["hits"][0]["chunk"]
        assert hit["user_id"] == "scope:tenant"
        assert bob.get(f"/api/v1/memories/{hit['id']}").status_code == 200
        assert bob.post("/api/v1/feedback", json={"chunk_ids": [hit["id"]], "signal": "used"}).status_code == 200
        assert bob.patch(f"/api/v1/memories/{hit['id']}", json={"content": "Refunds take a year."}).status_code == 404
        project = alice.post("/api/v1/search", json={"query": "parser", "scopes": ["project:atlas"],
                                                     "abstain_below": 0}).json()["hits"][0]["chunk"]["id"]
        assert bob.get(f"/api/v1/memories/{project}").status_code == 404  # a scope bob does not read
        assert bob.post("/api/v1/feedback", json={"chunk_ids": [project], "signal": "down"}).status_code == 404

        export = admin.get("/api/v1/users/alice/export").json()
        assert {m["user_id"] for m in export["chunks"]} == {"alice"}  # shared knowledge is no user's
        assert admin.delete("/api/v1/users/alice").status_code == 200
        assert _search(admin, scopes=["project:atlas", "tenant"]) == {"scope:project:atlas", "scope:tenant"}


def test_the_client_passes_scopes(srv) -> None:
    with srv.client(ALICE) as c:
        hits = c.search("staging", scopes=["project:atlas"], k=5, abstain_below=0)
    assert hits and {h.chunk.user_id for h in hits} == {"scope:project:atlas"}
