"""Filter masks: the per-user fast path (few candidate slots, checked one by one) gives exactly
the masks of the plain path (passes over every slot), including slots that moved to another
user, died, or were set again, and users listed more than once."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import numpy as np
import pytest

from beeweave_core.filters import build_filter
from beeweave_core.index.columns import AttributeColumns, Selection
from tests.support import frozen_clock

USERS = [f"u{i}" for i in range(40)]


def _columns(rnd: random.Random, n: int) -> tuple[AttributeColumns, np.ndarray, dict[str, int]]:
    cols = AttributeColumns()
    half = np.arange(n // 2)
    pick = [rnd.choice(USERS) for _ in half]
    cols.set_bulk(half, pick, [rnd.choice([None, "a1"]) for _ in half], [rnd.choice([None, "s1", "s2"]) for _ in half],
                  np.array([rnd.uniform(0, 100) for _ in half]), [rnd.choice(["active", "archived"]) for _ in half],
                  ["text"] * len(half), [None] * len(half), ['["x"]' if rnd.random() < 0.3 else "[]" for _ in half],
                  ["[]"] * len(half))
    for slot in range(n // 2, n):
        cols.set(slot, rnd.choice(USERS), rnd.choice([None, "a1"]), rnd.choice([None, "s1", "s2"]), rnd.uniform(0, 100),
                 rnd.choice(["active", "archived"]), "text", None, ["x"] if rnd.random() < 0.3 else [], [])
    for slot in rnd.sample(range(n), n // 10):  # moved to another user (the old user's list keeps it)
        cols.set(slot, rnd.choice(USERS), None, "s1", 50.0, "active", "text", None, [], [])
    alive = np.ones(n, bool)
    for slot in rnd.sample(range(n), n // 10):
        cols.clear(slot)
        alive[slot] = False
    slot_of = {f"id{s}": s for s in range(n) if alive[s]}
    return cols, alive, slot_of


@pytest.mark.parametrize("seed", range(5))
def test_the_per_user_path_gives_the_plain_masks(seed: int, monkeypatch) -> None:
    rnd = random.Random(seed)
    cols, alive, slot_of = _columns(rnd, 2000)
    since = datetime.fromtimestamp(30, timezone.utc)
    for _ in range(60):
        users = rnd.sample(USERS + ["nobody"], rnd.randint(1, 3))
        extra = rnd.choice([{}, {"session_id": "s1"}, {"agent_id": "a1"}, {"tags": "x"}, {"since": since},
                            {"status": ["active", "archived"]}, {"ids": rnd.sample(sorted(slot_of), 30)}])
        flt = build_filter(extra, user_id=users)
        assert cols._user_candidates(flt, len(alive)) is not None, "the fast path was not taken"
        fast, fast_scope = cols.mask(flt, alive, slot_of), cols.scope_mask(flt, alive)
        with monkeypatch.context() as mp:
            mp.setattr(AttributeColumns, "_user_candidates", lambda self, flt, n: None)
            plain, plain_scope = cols.mask(flt, alive, slot_of), cols.scope_mask(flt, alive)
        np.testing.assert_array_equal(fast, plain)
        np.testing.assert_array_equal(fast_scope, plain_scope)


@pytest.mark.parametrize("seed", range(3))
def test_the_selection_of_a_narrow_filter_is_its_mask(seed: int) -> None:
    rnd = random.Random(seed)
    cols, alive, slot_of = _columns(rnd, 2000)
    for _ in range(30):
        flt = build_filter(rnd.choice([{}, {"session_id": "s1"}, {"tags": "x"}]), user_id=rnd.choice(USERS))
        few = cols.slots(flt, alive, slot_of)
        mask = cols.mask(flt, alive, slot_of)
        np.testing.assert_array_equal(few, np.flatnonzero(mask))
        sel = Selection(few, None, len(alive))
        np.testing.assert_array_equal(sel.mask(), mask)
        probe = Selection(few, None, len(alive))  # membership without building the mask
        asked = np.array([rnd.randrange(-3, len(alive) + 3) for _ in range(300)])
        expected = [0 <= s < len(alive) and bool(mask[s]) for s in asked.tolist()]
        assert probe.allows(asked).tolist() == expected
        assert probe._mask is None
        assert Selection(None, mask.copy(), len(alive)).allows(asked).tolist() == expected
        assert Selection(few[:0], None, len(alive)).allows(asked).tolist() == [False] * len(asked)


def test_one_user_searches_are_the_same_without_the_narrow_path(monkeypatch) -> None:
    """A store of many users answers a one-user search from that user's slots (exact vector
    scan, BM25 document by document, no mask over every slot): the results, scores and the
    scores of included ids equal those of the mask path."""
    from beeweave_core import BeeWeave, HashingEmbedder
    from beeweave_core.index.bm25 import BM25Index

    rnd = random.Random(5)
    words = "alpha beta gamma delta python memory agent tool cache index vector graph".split()
    m = BeeWeave(embedder=HashingEmbedder(32), clock=frozen_clock)
    try:
        m.add_many([{"content": " ".join(rnd.choices(words, k=6)), "user_id": f"u{i % 30}",
                     "session_id": f"s{i % 60}", "chunk_id": f"c{i}"} for i in range(900)], show_progress=False)
        monkeypatch.setattr(BM25Index, "_DOC_AT_A_TIME", 0)  # the document path whenever there is a choice
        calls = []
        real = BM25Index.score_documents
        monkeypatch.setattr(BM25Index, "score_documents", lambda self, *a: calls.append(1) or real(self, *a))
        b = m.backend

        def run() -> list:
            out = []
            for q in range(20):
                user = f"u{q % 30}"
                flt = build_filter({}, user_id=user)
                qvec = m.embed_query(words[q % len(words)])
                vec = b.vector_search(qvec, flt, 10)
                terms = {words[q % len(words)]: 1, words[(q * 7) % len(words)]: 1}
                lex = b.lexical_search(terms, flt, 10, include=[cid for cid, _ in vec] + ["c1", "c2", "nope"])
                hits = m.search(" ".join(terms), user_id=user, k=5)
                out.append((vec, lex, [(h.id, h.score) for h in hits]))
            return out

        narrow = run()
        assert calls, "the document path was not taken"
        with monkeypatch.context() as mp:
            mp.setattr(AttributeColumns, "slots", lambda self, *a, **kw: None)
            b.index.forget_selection()
            plain = run()
        assert narrow == plain
    finally:
        m.close()


def test_setting_the_same_attributes_keeps_masks_valid() -> None:
    """Access counts rewrite records without changing anything a filter reads: the columns'
    version (which retires cached masks) moves only when something filterable changed."""
    cols = AttributeColumns()
    cols.set(0, "u1", None, "s1", 5.0, "active", "text", None, ["a", "b"], ["e"])
    v = cols.version
    cols.set(0, "u1", None, "s1", 5.0, "active", "text", None, ["a", "b"], ["e"])
    assert cols.version == v
    for change in ({"user": "u2"}, {"session": None}, {"ts": 6.0}, {"status": "archived"}, {"tags": ["a"]},
                   {"entities": []}):
        args = {"user": "u1", "agent": None, "session": "s1", "ts": 5.0, "status": "active", "ctype": "text",
                "intent": None, "tags": ["a", "b"], "entities": ["e"]}
        cols.set(0, **args)
        v = cols.version
        cols.set(0, **{**args, **change})
        assert cols.version > v, change
