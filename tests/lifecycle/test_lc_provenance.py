"""Provenance (lineage), code validity (invalidate) and standing queries (watch)."""

from __future__ import annotations

import pytest

from beeweave_core import EventType, InvalidInputError, NotFoundError
from tests.lifecycle.lifecycle_support import unit


def test_lineage_gathers_events_agents_tools_merges_edits_feedback_and_relations(mem, clock):
    a = mem.add("deploys run on Fridays", user_id="u", agent_id="planner", embedding=unit(1, 0),
                metadata={"source": "wiki", "ingest": {"event_id": "e1", "role": "turn", "tools": ["search"]}})
    b = mem.add("deploys run on Friday", user_id="u", agent_id="coder", embedding=unit(1, 0.05),
                metadata={"source": "chat", "ingest": {"event_id": "e2", "role": "tool", "tool": "git"}})
    c = mem.add("deploys moved to Tuesday", user_id="u", agent_id="ops", embedding=unit(0, 1))
    mem.feedback(a, "up")
    clock.advance(hours=1)
    report = mem.maintain()
    # The two near-identical ingested turns merge at insert (the default) or in maintain().
    primary = next(iter(report.merges), None) or next(x for x in (a, b) if mem.get(x).status.value == "active")
    other = b if primary == a else a
    mem.relate(c, primary, "contradicts", note="release day changed")
    lin = mem.lineage(primary)
    assert lin.id == primary and lin.user_id == "u"
    assert set(lin.agents) == {"planner", "coder"} and set(lin.events) == {"e1", "e2"}
    assert set(lin.tools) == {"search", "git"} and set(lin.sources) == {"wiki", "chat"}
    assert [m["id"] for m in lin.merged_from] == [other]
    assert [e["reason"] for e in lin.edits] == ["merge"]
    assert lin.feedback.get("up") == 1
    assert {"type": "contradicts", "direction": "in", "other": c, "weight": 1.0,
            "note": "release day changed"} in lin.relations
    assert {r["type"] for r in lin.relations} == {"contradicts", "merged_into"}
    gone = mem.lineage(other)
    assert gone.merged_into == primary and [x["action"] for x in gone.actions] == ["merged"]
    assert lin.to_dict()["id"] == primary
    with pytest.raises(NotFoundError):
        mem.lineage("nope")


def test_invalidate_marks_memories_about_changed_files_and_lowers_their_weight(mem):
    code = mem.add("parse_config reads TOML from config.py", user_id="u",
                   metadata={"paths": ["src/app/config.py"], "commit": "abc123"})
    folder = mem.add("everything under src/db uses psycopg", user_id="u", metadata={"paths": ["src/db"]})
    other = mem.add("the CLI lives in cli.py", user_id="u", metadata={"path": "src/app/cli.py"})
    plain = mem.add("the user likes tea", user_id="u")
    report = mem.invalidate(["./src/app/config.py", "src/db/pool.py", "README.md"], "def456")
    assert report.marked == sorted([code, folder]) and report.updated == []
    marked = mem.get(code)
    assert marked.metadata["verify"]["paths"] == ["src/app/config.py"]
    assert marked.metadata["verify"]["commit"] == "def456" and marked.weight == 0.5
    assert mem.get(folder).metadata["verify"]["paths"] == ["src/db/pool.py"]
    assert "verify" not in mem.get(other).metadata and "verify" not in mem.get(plain).metadata
    assert {i.chunk_id: i.reasons for i in mem.review_queue()} == {code: ("verify",), folder: ("verify",)}
    hits = mem.search("parse_config TOML", user_id="u", k=1)
    assert hits[0].chunk.metadata["verify"]["commit"] == "def456"  # search shows the mark
    again = mem.invalidate(["src/app/config.py"], "fff000")
    assert again.updated == [code] and mem.get(code).weight == 0.5  # lowered once
    kept = mem.resolve_review(code, "keep")
    assert "verify" not in kept.metadata and kept.weight == 1.0
    with pytest.raises(InvalidInputError):
        mem.invalidate("src/app/config.py")


def test_a_watch_fires_for_new_and_updated_memories_that_match(mem):
    seen = []
    mem.events.subscribe(seen.append, types=[EventType.WATCH_MATCHED])
    w = mem.watch("database backup schedule", user_id="u", agent_id="ops-bot", min_relevance=0.9)
    mem.add("lunch at noon", user_id="u", embedding=unit(0, 1))
    assert seen == []
    qv = mem.embed_query("database backup schedule").tolist()
    hit = mem.add("backups run nightly", user_id="u", embedding=qv)
    mem.add("backups run nightly", user_id="v", embedding=qv)  # another user: not this watch's
    assert [(e.chunk_id, e.agent_id, e.data["watch_id"], e.data["reason"]) for e in seen] == [
        (hit, "ops-bot", w.id, "created")]
    assert seen[0].data["relevance"] >= 0.9 and w.fired == 1
    later = mem.add("the cat sleeps", user_id="u", embedding=unit(0, 0, 1))
    mem.update(later, content="database backup schedule")  # now it matches
    assert [e.data["reason"] for e in seen] == ["created", "updated"] and seen[-1].chunk_id == later
    mem.feedback(later, "up")  # no new content: no new match
    assert len(seen) == 2
    assert mem.watches(user_id="u") == [w] and mem.unwatch(w.id) and not mem.unwatch(w.id)
    mem.add("database backup schedule", user_id="u")
    assert len(seen) == 2
    with pytest.raises(InvalidInputError):
        mem.watch("x", user_id="u", min_relevance=2)


def test_a_path_given_as_text_is_one_path(mem):
    # A trial stored metadata={"paths": "src/app/config.py"}: invalidate ignored the memory,
    # and its lineage listed the path's characters one by one.
    one = mem.add("parse_config reads TOML", user_id="u", metadata={"paths": "src/app/config.py"})
    assert mem.invalidate(["src/app/config.py"], "c1").marked == [one]
    assert mem.lineage(one).code["paths"] == ["src/app/config.py"]
