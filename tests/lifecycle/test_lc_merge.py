"""Dedup and merge: duplicates of one user fold into a primary; relationships move;
nothing disappears without a record."""

from __future__ import annotations

import math

from beeweave_core import ChunkStatus, EventType, Relationship, RelationType
from tests.lifecycle.lifecycle_support import unit


def _pair_at(angle_deg: float) -> list[float]:
    r = math.radians(angle_deg)
    return unit(math.cos(r), math.sin(r))


def test_near_duplicates_merge_into_the_primary_with_everything_folded(mem, clock) -> None:
    a = mem.add("The user prefers dark mode in the editor", user_id="u", session_id="s1", tags=["ui"],
                summary="prefers dark mode", metadata={"source": "chat-1", "lang": "en"}, embedding=unit(1, 0))
    clock.advance(minutes=1)
    c = mem.add("Lunch is at noon on Fridays", user_id="u", session_id="s1", embedding=unit(0, 1))
    clock.advance(minutes=1)
    b = mem.add("User prefers dark mode in editors.", user_id="u", session_id="s1", tags=["editor"],
                entities=["editor"], summary="dark mode pref", metadata={"source": "chat-2", "team": "ops"},
                embedding=unit(1, 0.2))
    other = mem.add("The user prefers dark mode in the editor", user_id="v", embedding=unit(1, 0))
    e = mem.add("Editors: vim and vscode", user_id="u", embedding=unit(0, 0, 1))
    mem.backend.add_edges([Relationship(b, e, RelationType.ENTITY, 0.5)])
    for _ in range(3):
        mem.search("dark mode", user_id="u", k=1, filters={"ids": [b]})
    before_edges = {(x.source_id, x.target_id, x.type) for x in mem.relationships(b)}
    assert (c, b, RelationType.SESSION) in before_edges

    clock.advance(days=1)
    report = mem.maintain()

    assert report.merged == 1 and report.merges == {a: [b]}
    merged, primary = mem.get(b), mem.get(a)
    assert merged.status is ChunkStatus.MERGED and merged.metadata["merged_into"] == a
    assert merged.raw_content == "User prefers dark mode in editors."  # the record stays
    assert primary.status is ChunkStatus.ACTIVE and mem.get(other).status is ChunkStatus.ACTIVE
    assert primary.tags == ["ui", "editor"] and primary.entities == ["editor"]
    assert primary.summary == "prefers dark mode\ndark mode pref"
    assert primary.metadata["source"] == "chat-1" and primary.metadata["sources"] == ["chat-2"]
    assert primary.metadata["team"] == "ops" and primary.metadata["lang"] == "en"
    assert [m["id"] for m in primary.metadata["merged_from"]] == [b]
    assert primary.metadata["merged_from"][0]["raw_content"] == "User prefers dark mode in editors."
    assert primary.access_count == 3

    # Relationships: only merged_into stays on b; the others moved to a.
    assert [(x.source_id, x.target_id, x.type) for x in mem.relationships(b)] == [(b, a, RelationType.MERGED_INTO)]
    after = {(x.source_id, x.target_id, x.type) for x in mem.relationships(a)}
    assert (c, a, RelationType.SESSION) in after and (a, e, RelationType.ENTITY) in after
    assert (b, a, RelationType.MERGED_INTO) in after
    assert not any(x.type is RelationType.SEMANTIC and {x.source_id, x.target_id} == {a, b}
                   for x in mem.backend.edges([a, b]))

    # History: the primary's state before the merge, and an audit record of the move.
    (version,) = mem.history(a)
    assert version.reason == "merge" and version.chunk.tags == ["ui"] and version.replaced_at == clock.now
    (entry,) = mem.audit(b)
    assert entry["action"] == "merged" and entry["into"] == a and entry["similarity"] > 0.9
    assert {(x["source_id"], x["target_id"]) for x in entry["moved_edges"]} >= {(c, b), (b, e)}

    # Search no longer returns the merged memory, even through graph expansion.
    hits = mem.search("dark mode editor", user_id="u", k=10, expand=True)
    assert b not in {h.id for h in hits} and a in {h.id for h in hits}
    assert mem.maintain().merged == 0  # idempotent


def test_primary_is_the_highest_weight_then_longest_then_oldest(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("dark mode please", user_id="u", embedding=unit(1, 0))
    b = m.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0.1))
    c = m.add("dark mode is preferred", user_id="u", embedding=unit(1, -0.1))
    m.feedback([a], "up")
    merges = m.maintain().merges
    assert list(merges) == [a] and sorted(merges[a]) == sorted([b, c])
    assert m.get(b).metadata["merged_into"] == a and m.get(c).metadata["merged_into"] == a
    assert m.get(a).weight == 2.0

    m2 = make()
    x = m2.add("same length text one", user_id="u", embedding=unit(1, 0))
    clock.advance(seconds=1)
    y = m2.add("same length text two", user_id="u", embedding=unit(1, 0.05))
    m2.maintain()
    assert m2.get(y).metadata["merged_into"] == x  # equal weight and length: the oldest stays


def test_the_merged_primary_keeps_the_best_weight_of_the_group(make, clock) -> None:
    m = make(up_delta=1.0)
    a = m.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0))
    b = m.add("dark mode please", user_id="u", embedding=unit(1, 0.1), pinned=False)
    m.update(b, weight=0.5)  # lower than a: a stays primary
    m.feedback([b], "up")  # b: 1 + 0.5 = 1.5
    m.feedback([b], "up")  # 2.5 > a's 1.0, so b becomes the primary
    assert m.maintain().merges == {b: [a]}
    assert m.effective_weight(b) == 2.5


def test_no_chains_each_merged_memory_is_close_to_its_own_primary(mem) -> None:
    x = mem.add("the longest of the three sentences here", user_id="u", embedding=_pair_at(0))
    y = mem.add("a middle one", user_id="u", embedding=_pair_at(20))
    z = mem.add("a far one", user_id="u", embedding=_pair_at(40))
    report = mem.maintain()
    assert report.merges == {x: [y]}
    assert mem.get(z).status is ChunkStatus.ACTIVE


def test_pinned_memories_are_never_merged_away(mem) -> None:
    a = mem.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0))
    b = mem.add("dark mode", user_id="u", embedding=unit(1, 0.1), pinned=True)
    assert mem.maintain().merges == {b: [a]}  # pinned comes first as the primary
    c = mem.add("dark mode pinned", user_id="u", embedding=unit(1, 0.05), pinned=True)
    assert mem.maintain().merged == 0
    assert mem.get(c).status is ChunkStatus.ACTIVE


def test_facts_and_opinions_are_not_merged(mem) -> None:
    mem.remember_fact("city", "The user lives in Paris", user_id="u", embedding=unit(1, 0))
    mem.remember_opinion("Paris is the best city", user_id="u", topic="city", embedding=unit(1, 0.01))
    mem.add("The user lives in Paris", user_id="u", embedding=unit(0, 1))
    assert mem.maintain().merged == 0


def test_maintain_can_be_scoped_to_one_user(mem) -> None:
    mem.add("dark mode please", user_id="u", embedding=unit(1, 0))
    mem.add("dark mode pls", user_id="u", embedding=unit(1, 0.01))
    mem.add("dark mode please", user_id="v", embedding=unit(1, 0))
    mem.add("dark mode pls", user_id="v", embedding=unit(1, 0.01))
    assert mem.maintain(user_id="v").merged == 1
    assert mem.count(user_id="u") == 2 and mem.count(user_id="v") == 1


def test_threshold_is_configurable(make) -> None:
    m = make(merge_threshold=0.99)
    m.add("dark mode please", user_id="u", embedding=_pair_at(0))
    m.add("dark mode pls", user_id="u", embedding=_pair_at(10))  # cosine 0.985
    assert m.maintain().merged == 0
    m2 = make(merge_threshold=0.95)
    m2.add("dark mode please", user_id="u", embedding=_pair_at(0))
    m2.add("dark mode pls", user_id="u", embedding=_pair_at(10))
    assert m2.maintain().merged == 1


def test_merge_on_insert(make) -> None:
    m = make(merge_on_insert=True)
    seen = []
    m.events.subscribe(seen.append, types=["memory.merged"])
    a = m.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0))
    b = m.add("dark mode please", user_id="u", embedding=unit(1, 0.1))
    assert m.get(b).metadata["merged_into"] == a
    assert [(ev.chunk_id, ev.data["into"]) for ev in seen] == [(b, a)]
    # A new, better memory becomes the primary of the old one.
    c = m.add("the user wants dark mode everywhere, in every single app", user_id="u", embedding=unit(1, 0.05))
    assert m.get(a).metadata["merged_into"] == c
    assert m.count(user_id="u") == 1


def test_merge_events(mem) -> None:
    seen = []
    mem.events.subscribe(seen.append, types=[EventType.MERGED, EventType.UPDATED])
    a = mem.add("the user wants dark mode everywhere", user_id="u", embedding=unit(1, 0))
    b = mem.add("dark mode please", user_id="u", embedding=unit(1, 0.1), tags=["ui"])
    mem.maintain()
    kinds = [(ev.type, ev.chunk_id) for ev in seen]
    assert kinds == [(EventType.UPDATED, a), (EventType.MERGED, b)]
    assert seen[1].data["into"] == a and seen[1].tags == ("ui",) and seen[1].user_id == "u"


def test_float_noise_in_the_weight_does_not_pick_the_primary() -> None:
    from datetime import datetime, timedelta, timezone

    from beeweave_core import KnowledgeChunk
    from beeweave_core.lifecycle.merge import primary_key
    from beeweave_core.scoring import ScoringConfig, refreshed_weight

    cfg = ScoringConfig()
    now = datetime(2026, 12, 2, 1, tzinfo=timezone.utc)
    # Two unrated copies a few milliseconds apart: their refreshed weights differ in the last bit.
    copies = [KnowledgeChunk(raw_content="the guest wifi password is bumblebee-42", user_id="u", id=f"c{ms:05d}",
                             timestamp=now - timedelta(milliseconds=ms)) for ms in range(0, 5000, 37)]
    weight = {c.id: refreshed_weight(c, now, cfg) for c in copies}
    # An older copy whose weight came out a last bit below a newer one's: the noise this is about.
    older, newer = next((a, b) for a in copies for b in copies
                        if a.timestamp < b.timestamp and weight[a.id] < weight[b.id])
    assert weight[newer.id] - weight[older.id] < 1e-12
    pair = [newer, older]
    assert min(pair, key=lambda c: primary_key(c, now, cfg)) is older  # the oldest, as the rule says
