"""Shared fixtures for the LlamaIndex face: a small store with varied fields."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from beeweave_core import BeeWeave, KnowledgeChunk, ProcessedContent
from tests.support import frozen_clock

# id, user, agent, session, tags, entities, intent, type, status, year
ROWS = [
    ("m1", "alice", "planner", "s1", ["drink"], ["tea"], "information_query", "text", "active", 2021),
    ("m2", "alice", "planner", "s1", ["health"], ["peanut"], None, "text", "active", 2022),
    ("m3", "alice", "coder", "s2", ["code", "python"], [], "code_generation", "code", "active", 2023),
    ("m4", "alice", None, "s2", ["drink", "health"], ["tea", "peanut"], "other", "text", "active", 2024),
    ("m5", "alice", "coder", "s3", ["python"], [], None, "text", "archived", 2025),
    ("m6", "bob", "planner", "s1", ["drink"], ["coffee"], "information_query", "text", "active", 2023),
]
TEXTS = {
    "m1": "alice drinks green tea every morning",
    "m2": "alice is allergic to peanuts",
    "m3": "def brew(tea): return tea + water",
    "m4": "alice avoids peanut snacks with her tea",
    "m5": "alice once wrote python scripts",
    "m6": "bob drinks black coffee",
}


def chunks() -> list[KnowledgeChunk]:
    out = []
    for cid, user, agent, session, tags, entities, intent, type_, status, year in ROWS:
        text = TEXTS[cid]
        out.append(KnowledgeChunk(raw_content=text, user_id=user, id=cid, agent_id=agent, session_id=session,
                                  tags=tags, entities=entities, intent=intent, status=status,
                                  timestamp=datetime(year, 1, 1, tzinfo=timezone.utc),
                                  processed_content=ProcessedContent(type_, text, "python" if type_ == "code" else None)))
    return out


@pytest.fixture
def store(embedder) -> BeeWeave:
    """Six memories of two users (one archived), one per year from 2021; the clock stands
    still, so two calls of one search score alike (weights decay continuously)."""
    m = BeeWeave(embedder=embedder, clock=frozen_clock)
    m.add_many(chunks())
    yield m
    m.close()
