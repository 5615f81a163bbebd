"""What the face tests of facts that change share (like relevance_faces.py): the times of the
two statements and, per language, what the user said, the question asked and the values."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

from beeweave_core import BeeWeave, HashingEmbedder

T0 = datetime(2025, 1, 10, 9, 0, tzinfo=timezone.utc)  # "I live in Berlin"
T1 = T0 + timedelta(days=45)  # "I moved to Munich"
# language -> (the old statement, the new one, the question, the old value, the new value)
CASES = {
    "en": ("I live in Berlin.", "I moved to Munich.", "where do I live", "Berlin", "Munich"),
    "zh": ("我住在北京", "我搬到了上海", "我住在哪里", "北京", "上海"),
}


@contextmanager
def moved_memory(lang: str) -> Iterator[BeeWeave]:
    """An in-memory store (the instant hashing embedder, a clock a day after the move) where
    alice made both statements of ``CASES[lang]``, the queue drained."""
    said_old, said_new, *_ = CASES[lang]
    with BeeWeave(embedder=HashingEmbedder(32), clock=lambda: T1 + timedelta(days=1)) as m:
        m.ingest({"user_id": "alice", "query": said_old, "response": "OK.", "timestamp": T0.isoformat()})
        m.ingest({"user_id": "alice", "query": said_new, "response": "OK.", "timestamp": T1.isoformat()})
        assert m.flush(30)
        yield m
