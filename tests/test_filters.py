"""Filters: isolation between users, every key restricts correctly, and filters run
inside retrieval (a selective filter still fills k when k matching docs exist)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from beeweave_core import (
    BeeWeave,
    BeeWeaveError,
    ChunkStatus,
    ContentType,
    HashingEmbedder,
    Intent,
    InvalidInputError,
    KnowledgeChunk,
    ProcessedContent,
    Relationship,
    RelationType,
    UnknownFilterError,
)
from beeweave_core.filters import FILTER_KEYS, build_filter
from tests.support import all_statuses_filter, dt, matches, sentence, term_counts

USERS = ["ann", "bob", "cid", "dee"]
AGENTS = ["planner", "coder", "critic"]
SESSIONS = [f"s{i}" for i in range(6)]
TAGS = ["work", "home", "urgent", "idea", "todo"]
ENTITIES = ["Paris", "Alice", "Kubernetes", "Acme"]
VOCAB = "apple banana cherry grape lemon mango melon peach pear plum kiwi lime".split()
BASE = dt(2024, 1, 1)


def _random_chunk(rnd: random.Random, i: int) -> KnowledgeChunk:
    return KnowledgeChunk(
        id=f"c{i:04d}",
        raw_content=sentence(rnd, 2, 10, VOCAB),
        user_id=rnd.choice(USERS),
        agent_id=rnd.choice(AGENTS + [None]),
        session_id=rnd.choice(SESSIONS + [None]),
        tags=rnd.sample(TAGS, rnd.randint(0, 3)),
        entities=rnd.sample(ENTITIES, rnd.randint(0, 2)),
        timestamp=BASE + timedelta(hours=rnd.randint(0, 24 * 60)),
        processed_content=ProcessedContent(rnd.choice(list(ContentType))) if rnd.random() < 0.3 else None,
        intent=rnd.choice(list(Intent) + [None, None]),
        status=rnd.choices(list(ChunkStatus), [6, 1, 1, 1, 1])[0],
    )


@pytest.fixture(scope="module")
def world():
    rnd = random.Random(77)
    chunks = []
    for i in range(400):
        c = _random_chunk(rnd, i)
        if c.processed_content.text == "":  # a ProcessedContent(type) without text: index the raw text
            c.processed_content.text = c.raw_content
        chunks.append(c)
    m = BeeWeave(embedder=HashingEmbedder(32))
    m.add_many(chunks)
    # Edges that cross users and filters: graph expansion must not follow them out of scope.
    m.backend.add_edges([Relationship(a.id, b.id, rnd.choice(list(RelationType)), rnd.uniform(0.5, 1.0))
                         for a, b in (rnd.sample(chunks, 2) for _ in range(600))])
    # Deleted chunks must never come back, whatever the filter.
    deleted = {c.id for c in rnd.sample(chunks, 40)}
    for cid in deleted:
        m.delete(cid)
    live = [c for c in chunks if c.id not in deleted]
    yield m, live, deleted
    m.close()


filter_values = st.fixed_dictionaries(
    {},
    optional={
        "user_id": st.sampled_from(USERS) | st.lists(st.sampled_from(USERS + ["nobody"]), min_size=1, max_size=3),
        "agent_id": st.sampled_from(AGENTS) | st.lists(st.sampled_from(AGENTS), min_size=1, max_size=2),
        "session_id": st.lists(st.sampled_from(SESSIONS), min_size=1, max_size=3),
        "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2),
        "tags_any": st.sampled_from(TAGS),
        "tags_all": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2),
        "entities": st.lists(st.sampled_from(ENTITIES), min_size=1, max_size=2),
        "since": st.integers(0, 24 * 60).map(lambda h: BASE + timedelta(hours=h)),
        "until": st.integers(0, 24 * 60).map(lambda h: (BASE + timedelta(hours=h)).isoformat()),
        "type": st.sampled_from([t.value for t in ContentType]) | st.lists(st.sampled_from(list(ContentType)), min_size=1),
        "intent": st.lists(st.sampled_from(list(Intent)), min_size=1, max_size=2),
        "status": st.lists(st.sampled_from([s.value for s in ChunkStatus]), min_size=1, max_size=3),
        "ids": st.lists(st.integers(0, 420).map(lambda i: f"c{i:04d}"), min_size=1, max_size=60),
    },
).filter(lambda f: not ("since" in f and "until" in f and f["since"].isoformat() > f["until"]))


LOOSENED_KEYS = ("tags", "tags_any", "tags_all", "entities")  # what loosen=True may drop


@settings(max_examples=100)
@given(
    filters=filter_values,
    user=st.sampled_from(USERS + [None]),
    query=st.lists(st.sampled_from(VOCAB + ["zzz"]), min_size=1, max_size=4).map(" ".join),
    k=st.integers(1, 40),
    mode=st.sampled_from(["plain", "plain", "expand", "loosen", "mmr"]),
)
def test_search_honours_every_filter(world, filters, user, query, k, mode) -> None:
    m, live, deleted = world
    kw = {"expand": {"expand": True}, "loosen": {"loosen": True}, "mmr": {"mmr": 0.5}}.get(mode, {})
    hits = m.search(query, user_id=user, filters=filters, k=k, **kw)
    ids = [h.id for h in hits]
    assert len(set(ids)) == len(ids)
    by_id = {c.id: c for c in live}
    assert not set(ids) & deleted
    loose = {key: v for key, v in filters.items() if key not in LOOSENED_KEYS}
    for h in hits:
        assert h.chunk.id == h.id
        if h.loosened:
            assert mode == "loosen"
            assert matches(by_id[h.id], loose, user), (h.id, loose, user)
        else:
            assert matches(by_id[h.id], filters, user), (h.id, filters, user)
    n_match = sum(matches(c, filters, user) for c in live)
    event("matches: " + ("none" if n_match == 0 else "fewer than k" if n_match < k else "at least k"))
    # A hit's recorded rivals ("contradicts") come with it, beyond k, like expansion. A rival
    # that is itself a direct hit no retriever matched (sources empty but for "contradicts")
    # looks the same, so it counts on either side.
    rivals = [h for h in hits if set(h.sources) == {"contradicts"}]
    hits = [h for h in hits if h not in rivals]
    direct = [h for h in hits if "graph" not in h.sources and not h.loosened]
    # Filters run inside retrieval, so k is filled whenever k matching docs exist.
    assert len(direct) <= min(k, n_match) <= len(direct) + len(rivals)
    if mode == "expand":
        assert len(hits) <= 2 * k
    else:
        assert len(hits) <= k
        assert not [h for h in hits if "graph" in h.sources]
    assert m.count(user_id=user, filters=filters) == n_match
    flt = build_filter(filters, user_id=user)
    assert {c.id for c in m.backend.scan(flt)} == {c.id for c in live if matches(c, filters, user)}


@pytest.mark.parametrize("user", USERS)
def test_user_scope_never_leaks(world, user) -> None:
    m, live, _ = world
    rnd = random.Random(user)
    owner = {c.id: c.user_id for c in live}
    theirs = {c.id for c in live if c.user_id == user and c.status is ChunkStatus.ACTIVE}
    for i in range(25):
        q = sentence(rnd, 1, 4, VOCAB)
        extra = [{}, {"expand": True}, {"loosen": True, "filters": {"tags": "work"}}][i % 3]
        hits = m.search(q, user_id=user, k=rnd.randint(1, 60), **extra)
        assert hits
        assert {owner[h.id] for h in hits} == {user}
        terms = term_counts(m.tokenizer(q))
        flt = build_filter(None, user_id=user)
        assert {i for i, _ in m.backend.lexical_search(terms, flt, 1000)} <= theirs
        assert {i for i, _ in m.backend.vector_search(m.embed_query(q), flt, 1000)} == theirs
    # Asking for another user's memories inside a user scope returns nothing, never everything.
    other = next(u for u in USERS if u != user)
    assert m.search("apple banana", user_id=user, filters={"user_id": other}, k=50) == []
    assert m.count(user_id=user, filters={"user_id": other}) == 0


# -- each key, against a corpus where the matching docs rank low globally -------------
STRONG = "apple apple apple banana"
WEAK = "apple quantum zebra xylophone obsidian meridian cantilever"
DEFAULT = dict(user_id="u", agent_id="main", session_id="s-main", tags=["common"], timestamp=dt(2020, 6, 1))


def _chunk(cid: str, text: str, **kw) -> KnowledgeChunk:
    fields = {**DEFAULT, **kw}
    pc = fields.pop("processed_content", None)
    return KnowledgeChunk(id=cid, raw_content=text, processed_content=pc, **fields)


GROUPS = {
    "agent_id": ({"agent_id": "rare-agent"}, {"agent_id": "rare-agent"}),
    "session_id": ({"session_id": "rare-session"}, {"session_id": ["rare-session", "no-such"]}),
    "tags": ({"tags": ["common", "rare"]}, {"tags": "rare"}),
    "tags_any": ({"tags": ["alsorare"]}, {"tags_any": ["alsorare", "missing"]}),
    "tags_all": ({"tags": ["x", "y", "common"]}, {"tags_all": ["x", "y"]}),
    "entities": ({"entities": ["Zanzibar", "Acme"]}, {"entities": ["Zanzibar", "Nowhere"]}),
    "since": ({"timestamp": dt(2030, 1, 1)}, {"since": dt(2029, 12, 31)}),
    "until": ({"timestamp": dt(2001, 1, 1)}, {"until": "2001-01-01T00:00:00+00:00"}),
    "type": ({"processed_content": ProcessedContent(ContentType.CODE, WEAK, "python")}, {"type": "code"}),
    "intent": ({"intent": Intent.PROBLEM_DIAGNOSIS}, {"intent": "problem_diagnosis"}),
    "status": ({"status": ChunkStatus.ARCHIVED}, {"status": ChunkStatus.ARCHIVED}),
    "ids": ({}, None),  # filled in below: the ids of the group
    "user_id": ({"user_id": "rare-user"}, {"user_id": "rare-user"}),
}
GROUP_SIZE = 4


@pytest.fixture(scope="module")
def ranked_world():
    chunks = [_chunk(f"strong{i:03d}", STRONG) for i in range(300)]
    # Decoys match part of some filters (only tag x; an earlier time) and must stay out.
    chunks += [_chunk(f"decoy{i}", WEAK, tags=["x"], timestamp=dt(2029, 12, 30)) for i in range(3)]
    for key, (fields, _) in GROUPS.items():
        chunks += [_chunk(f"{key}-{j}", WEAK, **fields) for j in range(GROUP_SIZE)]
    m = BeeWeave(embedder=HashingEmbedder(32))
    m.add_many(chunks)
    yield m
    m.close()


def test_precondition_weak_docs_rank_below_the_candidate_depth(ranked_world) -> None:
    m = ranked_world
    depth = max(m.config.candidates, 4 * 10)
    flt = build_filter({"status": [s.value for s in ChunkStatus]})
    lex = m.backend.lexical_search(term_counts(m.tokenizer("apple")), flt, depth)
    vec = m.backend.vector_search(m.embed_query("apple"), flt, depth)
    assert len(lex) == len(vec) == depth
    assert all(i.startswith("strong") for i, _ in lex + vec)


@pytest.mark.parametrize("key", list(GROUPS))
def test_each_filter_key_applies_inside_retrieval(ranked_world, key) -> None:
    m = ranked_world
    want = {f"{key}-{j}" for j in range(GROUP_SIZE)}
    filters = GROUPS[key][1] if key != "ids" else {"ids": sorted(want) + ["no-such-id"]}
    for k in (2, GROUP_SIZE, 10):
        hits = m.search("apple", filters=filters, k=k)
        assert len(hits) == min(k, GROUP_SIZE), (key, [h.id for h in hits])
        assert {h.id for h in hits} <= want
    assert m.count(filters=filters) == GROUP_SIZE


def test_archived_memories_are_hidden_by_default(ranked_world) -> None:
    m = ranked_world
    everything = m.search("apple quantum zebra", k=1000)
    assert not any(h.id.startswith("status-") for h in everything)
    assert m.count() == m.count(filters={"status": "active"}) + GROUP_SIZE
    both = m.search("quantum zebra", k=1000, filters={"status": ["active", "archived"]})
    assert {f"status-{j}" for j in range(GROUP_SIZE)} <= {h.id for h in both}


def test_since_and_until_are_inclusive(ranked_world) -> None:
    m = ranked_world
    hits = m.search("apple", k=50, filters={"since": dt(2030, 1, 1), "until": dt(2030, 1, 1)})
    assert {h.id for h in hits} == {f"since-{j}" for j in range(GROUP_SIZE)}
    # Epoch seconds and naive datetimes (taken as UTC) mean the same instant.
    assert m.count(filters={"since": dt(2030, 1, 1).timestamp()}) == GROUP_SIZE
    assert m.count(filters={"since": dt(2030, 1, 1).replace(tzinfo=None)}) == GROUP_SIZE


# -- rejected filters ---------------------------------------------------------------------
@pytest.mark.parametrize("bad", [{"bogus": 1}, {"user": "ann"}, {"tag": "x"}, {"user_id": "a", "metadata": {}}])
def test_unknown_filter_key_is_rejected(memory, bad) -> None:
    memory.add("apple pie", user_id="a")
    for call in (lambda: memory.search("apple", filters=bad), lambda: memory.count(filters=bad)):
        with pytest.raises(UnknownFilterError) as info:
            call()
        assert isinstance(info.value, (BeeWeaveError, KeyError))
        assert "known keys" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        {"tags": []},
        {"user_id": 5},
        {"status": "deleted"},
        {"type": "video"},
        {"intent": "chit-chat"},
        {"since": "some day"},
        {"since": dt(2025, 1, 2), "until": dt(2025, 1, 1)},
        {"ids": [1, 2]},
    ],
)
def test_bad_filter_values_are_rejected(memory, bad) -> None:
    memory.add("apple pie", user_id="a")
    with pytest.raises(InvalidInputError):
        memory.search("apple", filters=bad)


def test_filters_must_be_a_mapping(memory) -> None:
    with pytest.raises(InvalidInputError):
        memory.search("apple", filters=[("user_id", "a")])
    with pytest.raises(InvalidInputError):
        memory.search("apple", user_id=["a", 3])


def test_filter_keys_are_the_documented_ones() -> None:
    assert set(FILTER_KEYS) == {"user_id", "agent_id", "session_id", "tags", "tags_any", "tags_all", "entities",
                                "since", "until", "type", "intent", "status", "ids", "tier"}


def test_scan_with_all_statuses_sees_every_live_chunk(world) -> None:
    m, live, _ = world
    assert {c.id for c in m.backend.scan(all_statuses_filter())} == {c.id for c in live}


# -- declared metadata fields ---------------------------------------------------------------
def _fielded(m: BeeWeave) -> dict[str, dict]:
    metas = {"p1-high": {"project_id": "p1", "priority": 3, "urgent": True},
             "p1-low": {"project_id": "p1", "priority": 1, "urgent": False},
             "p2": {"project_id": "p2", "priority": 3},
             "none": {}}
    for name, meta in metas.items():
        m.add(f"apple note {name}", user_id="ann", chunk_id=name, metadata=meta)
    return metas


@pytest.mark.parametrize("flt", [{"project_id": "p1"}, {"project_id": ["p1", "p2"]}, {"priority": 3},
                                 {"urgent": False}, {"project_id": "p1", "priority": 3}, {"project_id": "p9"}])
def test_declared_fields_filter_search_count_and_scan(memory, flt) -> None:
    _fielded(memory)
    memory.declare_fields({"project_id": "str", "priority": "int", "urgent": "bool"})
    want = {c.id for c in memory.backend.scan(all_statuses_filter()) if matches(c, flt)}
    assert {h.chunk.id for h in memory.search("apple note", filters=flt, k=10)} == want
    assert memory.count(filters=flt) == len(want)
    declared = memory.declared_fields()
    assert {c.id for c in memory.backend.scan(build_filter(flt, declared=declared))} == want


def test_undeclared_metadata_key_says_how_to_declare(memory) -> None:
    _fielded(memory)
    with pytest.raises(UnknownFilterError, match="declare_fields"):
        memory.search("apple", filters={"project_id": "p1"})
    memory.declare_fields({"priority": "int"})
    with pytest.raises(UnknownFilterError, match="declared fields: priority"):
        memory.count(filters={"project_id": "p1"})


def test_declared_fields_persist_and_reach_another_handle(db_path) -> None:
    first = BeeWeave(db_path, embedder=HashingEmbedder())
    _fielded(first)
    other = BeeWeave(db_path, embedder=HashingEmbedder())
    try:
        assert first.declare_fields({"project_id": "str"}) == {"project_id": "str"}
        assert other.count(filters={"project_id": "p1"}) == 2  # declared after it opened
    finally:
        other.close()
        first.close()
    again = BeeWeave(db_path, embedder=HashingEmbedder())
    try:
        assert again.declared_fields() == {"project_id": "str"}
        assert again.count(filters={"project_id": ["p1", "p2"]}) == 3
    finally:
        again.close()


@pytest.mark.parametrize("bad", [{}, {"a b": "str"}, {"x'--": "str"}, {"user_id": "str"}, {"n": "date"},
                                 {"n": int}, {"a" * 41: "str"}])
def test_bad_declarations_are_rejected_and_change_nothing(memory, bad) -> None:
    with pytest.raises(InvalidInputError):
        memory.declare_fields(bad)
    assert memory.declared_fields() == {}


def test_redeclaring_keeps_the_type(memory) -> None:
    memory.declare_fields({"n": "int"})
    assert memory.declare_fields({"n": "int", "s": "str"}) == {"n": "int", "s": "str"}
    with pytest.raises(InvalidInputError):
        memory.declare_fields({"n": "str"})
    assert memory.declared_fields() == {"n": "int", "s": "str"}


@pytest.mark.parametrize("bad", [{"priority": "3"}, {"priority": True}, {"priority": 1.5}, {"project_id": 1},
                                 {"urgent": 1}, {"project_id": []}])
def test_declared_field_values_must_have_its_type(memory, bad) -> None:
    memory.declare_fields({"project_id": "str", "priority": "int", "urgent": "bool"})
    with pytest.raises(InvalidInputError):
        memory.search("apple", filters=bad)
