"""Rank columns (store/rank_columns.py): what a slot holds reads back exactly as the chunk's
``RankFields``, for any datetime; unfilled and cleared slots say so; the snapshot state
restores the same fields."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from beeweave_core import KnowledgeChunk
from beeweave_core.index.rank_columns import RankColumns
from beeweave_core.scoring import RankFields

UTC = timezone.utc
EDGES = [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
         datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), datetime(2106, 2, 7, 6, 28, 16, 999999, tzinfo=UTC)]


def _chunk(rnd: random.Random, i: int) -> KnowledgeChunk:
    def when() -> datetime:
        return rnd.choice(EDGES) if rnd.random() < 0.3 else \
            datetime(2024, 1, 1, tzinfo=UTC) + timedelta(microseconds=rnd.randrange(10**15))

    return KnowledgeChunk(f"text {i}", "u", id=f"c{i}", timestamp=when(), weight=rnd.choice([1.0, 0.1 * i, 3.75]),
                          confidence=rnd.choice([1.0, 0.3]), pinned=rnd.random() < 0.3,
                          metadata=rnd.choice([{}, {"stale": True}, {"stale": 0}, {"stale": "yes"}]),
                          reinforced_at=rnd.choice([None, when()]), expires_at=rnd.choice([None, when()]))


def test_fields_read_back_exactly_and_unfilled_slots_are_reported() -> None:
    rnd = random.Random(3)
    cols = RankColumns()
    chunks = {slot: _chunk(rnd, slot) for slot in rnd.sample(range(300), 120)}  # sparse, growing
    for slot, c in chunks.items():
        cols.set(slot, c)
    slots = sorted(chunks)
    assert cols.fields(slots) == [RankFields.of(chunks[s]) for s in slots]
    assert cols.unknown([slots[0], 1000, *(s for s in range(300) if s not in chunks)][:5]) == [1, 2, 3, 4]
    cols.clear(slots[7])
    assert cols.unknown(slots) == [7]
    cols.set(slots[7], chunks[slots[3]])  # set again: the new chunk's fields
    assert cols.fields([slots[7]]) == [RankFields.of(chunks[slots[3]])]


def test_state_restores_the_same_fields() -> None:
    rnd = random.Random(4)
    cols = RankColumns()
    chunks = [_chunk(rnd, i) for i in range(50)]
    for slot, c in enumerate(chunks):
        cols.set(slot, c)
    again = RankColumns()
    again.restore(cols.state(60))  # longer than the filled slots: the rest unknown
    assert again.fields(list(range(50))) == [RankFields.of(c) for c in chunks]
    assert again.unknown(list(range(48, 60))) == list(range(2, 12))
