"""The shared catch-up (``index.catch_up.apply_changes``) against the obvious reference: an
index caught up with rewritten, replaced, deleted and new rows answers as one built afresh
from the final rows; a held record whose term counts are unknown changes nothing."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from beeweave_core.index.catch_up import ChangedRow, apply_changes
from beeweave_core.index.context import IndexConfig
from beeweave_core.index.memory_index import IndexEntry, MemoryIndex
from tests.test_memory_index import _answers, _entry


def _row(e: IndexEntry) -> ChangedRow:
    return ChangedRow(e.seq, json.dumps(e.chunk.to_dict()), lambda e=e: e)


def _scenario() -> tuple[list[IndexEntry], list[IndexEntry], dict[str, IndexEntry]]:
    rnd = random.Random(11)
    terms: dict[str, int] = {}
    scratch = MemoryIndex(IndexConfig())
    before = [_entry(rnd, i, terms, scratch) for i in range(40)]
    after = {e.chunk.id: e for e in before}
    for e in before[:6]:  # rewritten, same text: new fields, same row number
        after[e.chunk.id] = replace(e, chunk=replace(e.chunk, tags=["rewritten"]))
    for e in before[6:12]:  # new text: a new row number
        fresh = _entry(rnd, 100 + int(e.chunk.id[1:]), terms, scratch)
        after[e.chunk.id] = replace(fresh, chunk=replace(fresh.chunk, id=e.chunk.id), seq=fresh.seq + 1000)
    for e in before[12:18]:  # deleted
        del after[e.chunk.id]
    for i in range(40, 48):  # new records
        e = _entry(rnd, i, terms, scratch)
        after[e.chunk.id] = e
    return before, list(after.values()), after


def test_a_caught_up_index_answers_as_one_built_afresh() -> None:
    before, final, current = _scenario()
    caught = MemoryIndex(IndexConfig())
    caught.add(before)
    held = {e.chunk.id: e.term_counts for e in before}
    changed = [e.chunk.id for e in before[:18]] + [f"m{i}" for i in range(40, 48)]
    applied = apply_changes(caught, changed, {cid: _row(current[cid]) for cid in changed if cid in current},
                            held.get)
    assert applied == 6 + 6 * 2 + 6 + 8  # rewrites, replacements (out and in), deletions, additions
    fresh = MemoryIndex(IndexConfig())
    fresh.add(sorted(final, key=lambda e: e.seq))
    assert _answers(caught, random.Random(3)) == _answers(fresh, random.Random(3))
    assert caught.seq_of("m0") == 1 and caught.seq_of("m12") is None


def test_unknown_term_counts_change_nothing() -> None:
    before, _, current = _scenario()
    index = MemoryIndex(IndexConfig())
    index.add(before)
    state = _answers(index, random.Random(5))
    changed = [e.chunk.id for e in before[6:18]]
    rows = {cid: _row(current[cid]) for cid in changed if cid in current}
    assert apply_changes(index, changed, rows, lambda cid: None) is None
    assert _answers(index, random.Random(5)) == state
