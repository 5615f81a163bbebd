"""Isolation, property-based: for random multi-user data, random queries, filters (user_id
lists, ids of other users' memories, tags, sessions, statuses) and graph expansion over
relationships that cross users, no result ever belongs to another user, nor to another
tenant — on the embedded store, on PostgreSQL (two tenants sharing tables, with the same
user names and ids) and over the REST API (two tenants, two keys).

Every user's memories carry a marker in their text (``owner-<tenant>-<user>``) so a leak
is visible however a result reached the caller.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beeweave_core import BeeWeave, Candidate, ExpandOptions, HashingEmbedder, InvalidInputError, Relationship
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.reliability.rel_support import ALL_STATUSES, examples
from tests.support import WORDS

USERS = ["alice", "bob", "carol", "dave"]
TAGS = ["work", "home", "food", "travel"]
SESSIONS = ["s1", "s2", "s3"]
N_PER_USER = 25


def dataset(tenant: str) -> list[dict]:
    """The same ids, users, sessions and tags in every tenant; only the marker differs."""
    rnd = random.Random(7)
    out = []
    for u in USERS:
        for i in range(N_PER_USER):
            out.append({"content": f"{' '.join(rnd.choice(WORDS[:40]) for _ in range(8))} owner-{tenant}-{u}",
                        "user_id": u, "chunk_id": f"{u}-{i}", "session_id": rnd.choice(SESSIONS),
                        "tags": rnd.sample(TAGS, rnd.randint(0, 2)), "entities": [rnd.choice(["paris", "rome"])],
                        "status": "archived" if i % 11 == 10 else "active",
                        "timestamp": 1_700_000_000 + i * 60})
    return out


def cross_user_edges(rnd: random.Random) -> list[Relationship]:
    ids = [f"{u}-{i}" for u in USERS for i in range(N_PER_USER)]
    return [Relationship(a, b, t, 1.0) for a, b, t in
            ((rnd.choice(ids), rnd.choice(ids), rnd.choice(["semantic", "session", "tag", "entity"]))
             for _ in range(300)) if a != b]


def fill(m: BeeWeave, tenant: str) -> None:
    records = dataset(tenant)
    statuses = {r["chunk_id"]: r.pop("status") for r in records}
    m.add_many(records, show_progress=False)
    for cid, status in statuses.items():
        if status != "active":
            m.update(cid, status=status)
    m.backend.add_edges(cross_user_edges(random.Random(tenant)))  # edges may cross users: scope must not


# -- the property ---------------------------------------------------------------------------------
scope_filters = st.fixed_dictionaries({}, optional={
    "user_id": st.lists(st.sampled_from(USERS + ["nobody"]), min_size=1, max_size=3),
    "ids": st.lists(st.builds(lambda u, i: f"{u}-{i}", st.sampled_from(USERS), st.integers(0, N_PER_USER - 1)),
                    min_size=1, max_size=6),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2),
    "session_id": st.sampled_from(SESSIONS), "entities": st.lists(st.sampled_from(["paris", "rome"]), min_size=1),
    "status": st.lists(st.sampled_from(ALL_STATUSES), min_size=1, max_size=3)})
expansions = st.one_of(st.none(), st.just(True), st.builds(ExpandOptions, hops=st.integers(1, 3),
                                                           decay=st.just(0.9), limit=st.integers(1, 20)))
queries = st.one_of(st.sampled_from(WORDS[:40]), st.lists(st.sampled_from(WORDS[:40]), min_size=1, max_size=5).map(" ".join),
                    st.builds(lambda u: f"owner {u}", st.sampled_from(USERS)))


def allowed_users(user_id: str | None, flt: dict[str, Any]) -> set[str]:
    users = set(USERS) if user_id is None else {user_id}
    if "user_id" in flt:
        users &= set(flt["user_id"])
    return users


def check_hits(hits: list[Any], tenant: str, users: set[str], given_texts: dict[str, str] | None = None) -> None:
    for h in hits:
        c = h.chunk
        if given_texts is not None and c.metadata.get("external"):
            assert c.raw_content == (given_texts.get(c.id) or " ")  # the caller's own text, nothing stored
            continue
        assert c.user_id in users, (h.id, c.user_id, users)
        assert c.raw_content.endswith(f"owner-{tenant}-{c.user_id}"), (h.id, c.raw_content)


def run_property(m: BeeWeave, tenant: str, n: int) -> tuple[int, int]:
    """Run the property ``n`` times; return (examples run, hits checked)."""
    calls = [0, 0]

    @settings(max_examples=examples(n), derandomize=True, database=None, deadline=None)
    @given(query=queries, user_id=st.one_of(st.none(), st.sampled_from(USERS)), flt=scope_filters,
           expand=expansions, k=st.integers(1, 15), loosen=st.booleans(), mmr=st.one_of(st.none(), st.just(0.5)),
           others=st.lists(st.builds(lambda u, i: f"{u}-{i}", st.sampled_from(USERS), st.integers(0, 24)), max_size=5))
    def prop(query, user_id, flt, expand, k, loosen, mmr, others) -> None:
        users = allowed_users(user_id, flt)
        hits = m.search(query, user_id=user_id, k=k, filters=flt or None, expand=expand, loosen=loosen, mmr=mmr)
        check_hits(hits, tenant, users)
        calls[1] += len(hits)
        if user_id is not None:
            cands = [Candidate(cid, f"text given for {cid}") for cid in others]
            post = m.postprocess(query, cands, user_id=user_id, expand=expand or None)
            check_hits(post, tenant, {user_id}, {c.id: c.text for c in cands})
            for session in SESSIONS:
                check_hits([_Hit(c) for c in m.trace(session, user_id=user_id)], tenant, {user_id})
                check_hits([_Hit(c) for c in m.context(session, user_id=user_id)], tenant, {user_id})
            assert m.count(user_id=user_id, filters=flt or None) <= N_PER_USER
        calls[0] += 1

    prop()
    return calls[0], calls[1]


class _Hit:
    def __init__(self, chunk: Any) -> None:
        self.chunk, self.id = chunk, chunk.id


# -- the backends ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def embedded() -> Iterator[BeeWeave]:
    m = BeeWeave(embedder=HashingEmbedder(32))
    fill(m, "A")
    yield m
    m.close()


def test_no_result_of_another_user_on_the_embedded_store(embedded) -> None:
    ran, hits = run_property(embedded, "A", 100)
    assert ran >= 50 and hits >= 200


def test_disjoint_user_scopes_return_nothing_never_everything(embedded) -> None:
    assert embedded.search("owner", user_id="alice", filters={"user_id": ["bob"]}, k=50) == []
    assert embedded.search("owner", user_id="alice", filters={"ids": ["bob-1", "bob-2"]}, k=50) == []
    with pytest.raises(InvalidInputError):
        embedded.search("owner", filters={"user_id": []})


@pytest.fixture(scope="module")
def two_pg_tenants(pg_url) -> Iterator[tuple[BeeWeave, BeeWeave]]:  # noqa: F811
    a_name, b_name = new_tenant("iso-a"), new_tenant("iso-b")
    a = BeeWeave.from_url(pg_url, tenant=a_name, embedder=HashingEmbedder(32))
    b = BeeWeave.from_url(pg_url, tenant=b_name, embedder=HashingEmbedder(32))
    fill(a, "A")
    fill(b, "B")  # same users, same ids, same sessions: only the tenant differs
    yield a, b
    a.close()
    b.close()


@pytest.mark.slow
def test_no_result_of_another_user_or_tenant_on_postgresql(two_pg_tenants) -> None:
    a, b = two_pg_tenants
    for m, tenant in ((a, "A"), (b, "B")):
        ran, hits = run_property(m, tenant, 40)
        assert ran >= 20 and hits >= 50


@pytest.mark.slow
def test_no_result_of_another_tenant_over_the_rest_api(tmp_path_factory) -> None:
    from beeweave_core.server import ServerConfig
    from tests.service.service_support import start_server

    keys = {"tenant-a-key-01": "ta", "tenant-b-key-01": "tb"}
    live = start_server(ServerConfig(tmp_path_factory.mktemp("tenants"), keys, embedder="beeweave:hashing-32"))
    try:
        for _key, tenant in (("tenant-a-key-01", "A"), ("tenant-b-key-01", "B")):
            svc = live.app.state.stores.get({"A": "ta", "B": "tb"}[tenant])
            fill(svc.memory, tenant)
        with live.client("tenant-a-key-01") as a, live.client("tenant-b-key-01") as b:
            calls = [0]

            @settings(max_examples=examples(25), derandomize=True, database=None, deadline=None)
            @given(query=queries, user_id=st.one_of(st.none(), st.sampled_from(USERS)), flt=scope_filters,
                   expand=st.one_of(st.none(), st.just(True)), k=st.integers(1, 15))
            def prop(query, user_id, flt, expand, k) -> None:
                users = allowed_users(user_id, flt)
                for client, tenant in ((a, "A"), (b, "B")):
                    check_hits(client.search(query, user_id=user_id, k=k, filters=flt or None, expand=expand),
                               tenant, users)
                if user_id is not None:
                    for client, tenant in ((a, "A"), (b, "B")):
                        for session in SESSIONS:
                            check_hits([_Hit(c) for c in client.trace(session, user_id=user_id)], tenant, {user_id})
                        export = client.export_user(user_id)
                        assert {c["id"] for c in export["chunks"]} == {f"{user_id}-{i}" for i in range(N_PER_USER)}
                        assert all(c["raw_content"].endswith(f"owner-{tenant}-{user_id}") for c in export["chunks"])
                calls[0] += 1

            prop()
            assert calls[0] >= 1
    finally:
        live.stop()
