"""Facts keep one current value per subject and their version history; opinions keep every
view with its source and confidence; conflicting memories rank by confidence, then recency."""

from __future__ import annotations

from datetime import timedelta

import pytest

from beeweave_core import ChunkStatus, InvalidInputError, NotFoundError, ScoringConfig
from beeweave_core.filters import build_filter


def test_a_fact_update_replaces_content_and_keeps_versions(mem, clock) -> None:
    cid = mem.remember_fact("home_city", "Alice lives in Paris", user_id="alice", source="chat-1")
    t1 = clock.now
    clock.advance(days=30)
    assert mem.remember_fact("home_city", "Alice lives in Lyon", user_id="alice", source="chat-9") == cid
    t2 = clock.now
    clock.advance(days=30)
    mem.remember_fact("home_city", "Alice lives in Nantes", user_id="alice", confidence=0.8)

    now = mem.get(cid)
    assert now.raw_content == "Alice lives in Nantes" and now.timestamp == clock.now
    assert now.metadata["version"] == 3 and now.metadata["fact_key"] == "home_city"
    assert now.metadata["source"] == "chat-9" and now.confidence == 0.8
    history = mem.history(cid)
    assert [v.chunk.raw_content for v in history] == ["Alice lives in Paris", "Alice lives in Lyon"]
    assert [v.chunk.metadata["source"] for v in history] == ["chat-1", "chat-9"]
    assert [v.chunk.timestamp for v in history] == [t1, t2]
    assert [v.replaced_at for v in history] == [t2, clock.now]
    assert {v.reason for v in history} == {"fact_update"}
    assert mem.count(user_id="alice") == 1
    assert mem.fact("home_city", user_id="alice").id == cid


def test_the_new_content_is_what_search_finds(mem) -> None:
    cid = mem.remember_fact("editor", "The user edits code in emacs", user_id="u")
    mem.remember_fact("editor", "The user switched to neovim", user_id="u")
    assert [h.id for h in mem.search("neovim", user_id="u")] == [cid]
    assert mem.get(cid).content == "The user switched to neovim"
    old_terms = {t: 1 for t in mem.tokenizer("emacs")}
    assert mem.backend.lexical_search(old_terms, build_filter(None), 10) == []  # the old text left the index
    vec = mem.backend.get_vectors([cid])[cid]
    assert vec == pytest.approx(mem.embedder.embed_documents(["The user switched to neovim"])[0], abs=1e-6)


def test_same_content_again_is_not_a_new_version(mem) -> None:
    cid = mem.remember_fact("diet", "The user is vegetarian", user_id="u")
    mem.remember_fact("diet", "The user is vegetarian", user_id="u")
    assert mem.history(cid) == [] and mem.get(cid).metadata["version"] == 1
    mem.remember_fact("diet", "The user is vegetarian", user_id="u", confidence=0.6)
    assert mem.get(cid).confidence == 0.6 and mem.history(cid) == []


def test_a_bad_revision_changes_nothing(mem) -> None:
    cid = mem.remember_fact("diet", "The user is vegetarian", user_id="u")
    before = mem.get(cid).to_dict()
    for bad in ("   ", 42):
        with pytest.raises(InvalidInputError):
            mem.remember_fact("diet", bad, user_id="u")
    with pytest.raises(InvalidInputError):
        mem.remember_fact("diet", "The user is vegan", user_id="u", confidence="high")
    assert mem.get(cid).to_dict() == before and mem.history(cid) == []


def test_facts_are_per_user(mem) -> None:
    a = mem.remember_fact("home_city", "Lives in Paris", user_id="a")
    b = mem.remember_fact("home_city", "Lives in Rome", user_id="b")
    assert a != b and mem.fact("home_city", user_id="a").raw_content == "Lives in Paris"
    assert mem.fact("job", user_id="a") is None


def test_a_deleted_fact_starts_again(mem) -> None:
    a = mem.remember_fact("pet", "Has a cat", user_id="u")
    mem.delete(a)
    assert mem.fact("pet", user_id="u") is None
    b = mem.remember_fact("pet", "Has a dog", user_id="u")
    assert b != a and mem.get(b).metadata["version"] == 1


def test_fact_updates_clear_staleness(mem) -> None:
    cid = mem.remember_fact("editor", "Uses emacs", user_id="u")
    for _ in range(3):
        mem.feedback([cid], "down")
    assert mem.get(cid).metadata["stale"]
    mem.remember_fact("editor", "Uses neovim", user_id="u")
    assert "stale" not in mem.get(cid).metadata


def test_history_of_unknown_id(mem) -> None:
    with pytest.raises(NotFoundError):
        mem.history("nope")
    assert mem.history(mem.add("plain", user_id="u")) == []


@pytest.mark.parametrize("args,kw", [(("", "x"), {"user_id": "u"}), ((3, "x"), {"user_id": "u"}),
                                     (("k", "x"), {"user_id": ""}), (("k", "  "), {"user_id": "u"}),
                                     (("k", "x"), {"user_id": "u", "source": ""}),
                                     (("k", "x"), {"user_id": "u", "tags": "a"})])
def test_bad_fact_input_changes_nothing(mem, args, kw) -> None:
    with pytest.raises(InvalidInputError):
        mem.remember_fact(*args, **kw)
    assert mem.count() == 0


def test_opinions_keep_every_view_with_source_and_confidence(mem, clock) -> None:
    a = mem.remember_opinion("Vim is the best editor", user_id="u", topic="editor", source="bob", confidence=0.9)
    assert "conflict_group" not in mem.get(a).metadata  # one view is not a conflict
    clock.advance(hours=1)
    b = mem.remember_opinion("Emacs is the best editor", user_id="u", topic="editor", source="eve", confidence=0.6)
    clock.advance(hours=1)
    c = mem.remember_opinion("VS Code is the best editor", user_id="u", topic="editor", source="al", confidence=0.6)
    views = mem.opinions("editor", user_id="u")
    assert [v.id for v in views] == [a, c, b]  # confidence, then the newest
    assert [(v.metadata["source"], v.confidence) for v in views] == [("bob", 0.9), ("al", 0.6), ("eve", 0.6)]
    assert {mem.get(x).metadata["conflict_group"] for x in (a, b, c)} == {"opinion:editor"}
    assert mem.opinions("editor", user_id="other") == []


def test_search_ranks_conflicting_memories_by_confidence_then_recency(make, clock) -> None:
    # Without the confidence factor, relevance alone would give old, new, other, sure.
    m = make(scoring=ScoringConfig(use_confidence=False))
    old = m.remember_opinion("The best editor is vim, the best editor for the terminal", user_id="u",
                             topic="editor", confidence=0.7)
    clock.advance(days=1)
    new = m.remember_opinion("emacs is the best editor", user_id="u", topic="editor", confidence=0.7)
    clock.advance(days=1)
    sure = m.remember_opinion("Many people say vscode is good", user_id="u", topic="editor", confidence=0.95)
    other = m.add("The best editor font is Iosevka", user_id="u")
    hits = m.search("the best editor", user_id="u", k=4)
    # The group keeps its places (1st, 2nd, 4th) and fills them in its own order.
    assert [h.id for h in hits] == [sure, new, other, old]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_recency_breaks_ties_between_equally_confident_conflicts(mem, clock) -> None:
    a = mem.add("The meeting is on Monday", user_id="u", confidence=0.8)
    clock.advance(hours=2)
    b = mem.add("The meeting is on Tuesday", user_id="u", confidence=0.8)
    group = mem.mark_conflict([a, b])
    assert group.startswith("conflict:")
    assert [h.id for h in mem.search("when is the meeting", user_id="u", k=2)] == [b, a]
    assert [c.id for c in mem.conflicts(group, user_id="u")] == [b, a]
    mem.update(a, confidence=0.9)
    assert [h.id for h in mem.search("when is the meeting", user_id="u", k=2)] == [a, b]


def test_mark_conflict_validates(mem) -> None:
    a = mem.add("one", user_id="u")
    b = mem.add("two", user_id="v")
    with pytest.raises(InvalidInputError):
        mem.mark_conflict([a, b])
    with pytest.raises(InvalidInputError):
        mem.mark_conflict([a])
    with pytest.raises(NotFoundError):
        mem.mark_conflict([a, "nope"])
    assert "conflict_group" not in mem.get(a).metadata


def test_archived_members_leave_the_conflict_list(mem) -> None:
    a = mem.remember_opinion("Tea is best", user_id="u", topic="drink")
    b = mem.remember_opinion("Coffee is best", user_id="u", topic="drink")
    mem.update(a, status=ChunkStatus.ARCHIVED)
    assert [c.id for c in mem.opinions("drink", user_id="u")] == [b]


def test_rule_based_expiry_follows_fact_content(mem, clock) -> None:
    cid = mem.remember_fact("weather", "Today's weather: sunny", user_id="u")
    assert mem.get(cid).expires_at == clock.now + timedelta(hours=24)
    clock.advance(hours=1)
    mem.remember_fact("weather", "The user's city has a mild climate", user_id="u")
    c = mem.get(cid)
    assert c.expires_at is None and "expiry_rule" not in c.metadata


def test_saying_an_archived_fact_again_makes_it_current(mem) -> None:
    cid = mem.remember_fact("pet", "Has a cat", user_id="u")
    mem.update(cid, status="archived")
    assert mem.remember_fact("pet", "Has a cat", user_id="u") == cid
    assert mem.get(cid).status is ChunkStatus.ACTIVE and mem.history(cid) == []


def test_processes_stating_a_new_fact_at_once_make_one_memory(reopen) -> None:
    """Two stores on the same data (two processes or hosts) state the same new fact at once:
    one memory holds it, whichever wrote last, and both are told its id."""
    import threading

    stores = [reopen(), reopen()]
    for round_ in range(5):  # the race is not hit every time: five subjects
        ids: list[str] = []
        gate = threading.Barrier(2)

        def state(m, n: int, subject: str = f"home{round_}", gate: threading.Barrier = gate,
                  ids: list[str] = ids) -> None:
            gate.wait()
            ids.append(m.remember_fact(subject, f"lives in city {n}", user_id="u"))

        threads = [threading.Thread(target=state, args=(m, n)) for n, m in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        found = [c for c in stores[0].backend.scan(build_filter({"user_id": "u"}))
                 if c.metadata.get("fact_key") == f"home{round_}"]
        assert len(found) == 1 and ids == [found[0].id] * 2, (ids, [c.raw_content for c in found])
        assert stores[1].fact(f"home{round_}", user_id="u").id == found[0].id
