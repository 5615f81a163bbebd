"""Scopes in the engine: a user's search reads their own memories, the tenant's and the
shared scopes granted to them, never another user's; write rules refuse an agent a scope;
a user's forget leaves shared knowledge (beeweave_core/scopes.py, ingest/write_policy.py).
The searches run on SQLite and on PostgreSQL (one OR over owner ids in each backend)."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, InvalidInputError
from beeweave_core.errors import PermissionDeniedError
from beeweave_core.filters import build_filter
from beeweave_core.ingest import KnowledgeEvent
from beeweave_core.scopes import Scope, ScopeConfig, ScopeKind, Scopes, WriteRule, scope_owner
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

ATLAS = scope_owner("project:atlas")
PARSER = scope_owner("project:atlas/module:parser")


def _store(url: str | None = None, **config) -> BeeWeave:
    if url is None:
        m = BeeWeave(embedder=HashingEmbedder(64), scopes=ScopeConfig(**config))
    else:
        m = BeeWeave.from_url(url, embedder=HashingEmbedder(64), tenant=new_tenant("scopes"),
                              scopes=ScopeConfig(**config))
    m.add("The atlas parser reads operator precedence with a Pratt loop.", user_id=ATLAS, chunk_id="atlas")
    m.add("The parser module keeps its token table in tokens.py.", user_id=PARSER, chunk_id="parser")
    m.add("Refunds are paid back within five working days.", user_id=scope_owner("tenant"), chunk_id="tenant")
    m.add("Alice's parser notes: she prefers recursive descent.", user_id="alice", chunk_id="alice")
    m.add("Bob's private parser notes: his refund code is 4411.", user_id="bob", chunk_id="bob")
    return m


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request):
    url = None if request.param == "sqlite" else request.getfixturevalue("pg_url")
    m = _store(url, grants={"alice": ["project:atlas"]})
    yield m
    m.close()


def _owners(m: BeeWeave, query: str, **kw) -> set[str]:
    return {h.chunk.user_id for h in m.search(query, k=10, **kw)}


def test_scope_names_and_owner_ids() -> None:
    s = Scope.parse("project:atlas/module:parser")
    assert (s.kind, s.owner) == (ScopeKind.SHARED, "scope:project:atlas/module:parser")
    assert Scope.parse(s.owner) == s and Scope.of_owner("alice") == Scope(ScopeKind.USER, "alice")
    assert Scope.parse("tenant").owner == "scope:tenant"
    assert s.within(Scope.parse("project:atlas")) and not Scope.parse("project:atlas2").within(Scope.parse("project:atlas"))
    for bad in ("atlas", "project:", "Project:atlas", "project:a b", "project:atlas/", "user:bob", 7):
        with pytest.raises(InvalidInputError):
            Scope.parse(bad)


def test_a_users_search_reads_their_own_the_tenants_and_the_granted_scopes(memory) -> None:
    assert _owners(memory, "parser refund", user_id="alice") == {"alice", ATLAS, "scope:tenant"}
    # bob has no grant: his own and the tenant's; alice's private notes never
    assert _owners(memory, "parser refund", user_id="bob") == {"bob", "scope:tenant"}


def test_user_b_never_sees_user_a_private_memories_whatever_the_scopes(memory) -> None:
    for scopes in (None, ["user", "project:atlas", "project:atlas/module:parser", "tenant"]):
        assert "alice" not in _owners(memory, "alice parser notes", user_id="bob", scopes=scopes)
    # a filter naming another user narrows the scopes read; it never widens them
    assert memory.search("alice parser notes", user_id="bob", filters={"user_id": "alice"}) == []


def test_a_search_names_the_scopes_it_reads(memory) -> None:
    assert _owners(memory, "parser token table", user_id="bob", scopes=["project:atlas/module:parser"]) == {PARSER}
    assert _owners(memory, "parser", user_id="alice", scopes=["user"]) == {"alice"}
    assert _owners(memory, "parser", scopes=["project:atlas", "tenant"]) == {ATLAS, "scope:tenant"}
    assert "bob" in _owners(memory, "parser refund")  # no user and no scopes: every memory, as before
    with pytest.raises(InvalidInputError, match="pass user_id"):
        memory.search("parser", scopes=["user"])
    with pytest.raises(InvalidInputError, match="empty"):
        memory.search("parser", user_id="alice", scopes=[])
    with pytest.raises(InvalidInputError, match="not a scope"):
        memory.search("parser", user_id="alice", scopes=["atlas"])


def test_tenant_knowledge_can_be_left_out_of_the_default() -> None:
    m = _store(tenant=False, grants={"*": ["project:atlas/module:parser"]})
    try:
        assert _owners(m, "parser refund", user_id="bob") == {"bob", PARSER}
    finally:
        m.close()


def test_the_default_read_set_follows_the_grants() -> None:
    scopes = Scopes(ScopeConfig(grants={"*": ["team:support"], "alice": ["project:atlas", "team:support"]}))
    assert scopes.owners("alice", None) == ["alice", "scope:tenant", "scope:team:support", ATLAS]
    assert scopes.owners(["ann", "bob"], ["user"]) == ["ann", "bob"]
    assert scopes.owners(None, None) is None


def test_an_agent_without_a_write_rule_for_a_scope_is_refused() -> None:
    rules = [WriteRule("project:atlas", agents=["code-agent"], categories=["code", "procedure"]), WriteRule("tenant")]
    m = BeeWeave(embedder=HashingEmbedder(64), scopes=ScopeConfig(writers=rules))
    try:
        # allowed: the code agent writes code knowledge to the project and to its modules
        m.add("parse() returns an AST.", user_id=ATLAS, agent_id="code-agent", metadata={"category": "code"})
        m.add("tokens.py holds the table.", user_id=PARSER, agent_id="code-agent", metadata={"category": "code"})
        m.add("Refund policy: five days.", user_id=scope_owner("tenant"))  # any writer for the tenant
        m.add("Alice's own note.", user_id="alice", agent_id="docs-agent")  # users' memories: no rules
        with pytest.raises(PermissionDeniedError, match="docs-agent"):
            m.add("The docs live in docs/.", user_id=ATLAS, agent_id="docs-agent", metadata={"category": "code"})
        with pytest.raises(PermissionDeniedError, match="opinion"):
            m.add("Pratt is nicer.", user_id=ATLAS, agent_id="code-agent", metadata={"category": "opinion"})
        with pytest.raises(PermissionDeniedError):  # no agent named: no rule of the project allows it
            m.add_many([{"content": "anonymous", "user_id": ATLAS}])
        with pytest.raises(PermissionDeniedError):
            m.add("team note", user_id=scope_owner("team:support"), agent_id="code-agent")
        with pytest.raises(PermissionDeniedError):  # an event to the scope is refused before it is queued
            m.ingest(KnowledgeEvent(user_id=ATLAS, agent_id="docs-agent", query="where are the docs?",
                                    response="In docs/."))
        with pytest.raises(InvalidInputError, match="not a scope"):
            m.add("a bad owner", user_id="scope:Nope")
        # an edit that moves a memory into a scope, or out of one, is a write to that scope
        note = m.add("Alice's code note.", user_id="alice", agent_id="docs-agent", metadata={"category": "code"})
        with pytest.raises(PermissionDeniedError):
            m.update(note, user_id=ATLAS)
        shared = m.update(note, user_id=PARSER, agent_id="code-agent")
        with pytest.raises(PermissionDeniedError):
            m.update(shared.id, user_id="alice", agent_id="docs-agent")
        m.update(shared.id, user_id="alice")  # the code agent, as recorded, takes it back
        with pytest.raises(PermissionDeniedError):  # seed documents too
            m.import_documents("The parser's style guide: four spaces.", user_id=ATLAS, agent_id="docs-agent")
        seeded = m.import_documents("Refunds are paid within five working days of the request.",
                                    user_id=scope_owner("tenant"))
        assert seeded and {c.user_id for c in m.get_many(seeded)} == {"scope:tenant"}
        assert m.flush(10)
        assert sorted(c.user_id for c in m.backend.scan(build_filter({"status": "active"}))) \
            == sorted(["alice", "alice", ATLAS, PARSER, "scope:tenant", *(["scope:tenant"] * len(seeded))])
    finally:
        m.close()


def test_a_users_forget_never_deletes_shared_knowledge(memory) -> None:
    memory.forget_user("alice")
    assert memory.get_many(["alice"]) == []
    assert [c.id for c in memory.get_many(["atlas", "parser", "tenant", "bob"])] == ["atlas", "parser", "tenant", "bob"]
    assert _owners(memory, "parser refund", user_id="alice") == {ATLAS, "scope:tenant"}


def test_config_is_checked_where_it_is_built() -> None:
    with pytest.raises(InvalidInputError):
        ScopeConfig(grants={"alice": ["atlas"]})
    with pytest.raises(InvalidInputError):
        ScopeConfig(writers=["project:atlas"])
    with pytest.raises(InvalidInputError):
        WriteRule("project:atlas", agents="code-agent")
    with pytest.raises(InvalidInputError):
        WriteRule("project:atlas", categories=[None])
    with pytest.raises(InvalidInputError):
        ScopeConfig(tenant="no")
    with pytest.raises(InvalidInputError, match="ScopeConfig"):
        BeeWeave(embedder=HashingEmbedder(8), scopes={"grants": {}})
