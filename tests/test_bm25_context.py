"""BM25 with session context: the index's patched context postings against a slow, obvious
reference, and against an index built in one go from the same final state.

The reference recomputes everything from the definition at every query: a document's count
of a term is its own count plus ``w`` times its neighbours' counts, its length likewise, and
N/avgdl are over the live documents, the idf Lucene's (as in bm25.py). The random operations are the ones the
store performs (insert anywhere in a session, delete, move to another session), with the
neighbour rows refreshed from a session order, and queries in between, so that some terms'
context postings are built early and patched many times, others built late.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from beeweave_core.index.bm25 import BM25Index

K1, B, RADIUS, W = 1.2, 0.3, 2, 0.3
VOCAB = [f"t{i}" for i in range(40)]


class Model:
    """The state the store would hold: documents, sessions in order, neighbour rows."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.docs: dict[int, Counter[int]] = {}
        self.sessions: dict[int, list[int]] = {}
        self.session_of: dict[int, int] = {}
        self.rows: dict[int, list[int]] = {}
        self.next_slot = 0

    def doc(self) -> Counter[int]:
        # Zipf-ish: a few terms are in most documents, as in real text.
        n = self.rnd.randint(1, 8)
        return Counter(min(int(self.rnd.paretovariate(1.2)) - 1, len(VOCAB) - 1) for _ in range(n))

    def window_rows(self) -> dict[int, list[int]]:
        rows: dict[int, list[int]] = {}
        for lst in self.sessions.values():
            for i, s in enumerate(lst):
                rows[s] = sorted(lst[max(0, i - RADIUS) : i] + lst[i + 1 : i + RADIUS + 1])
        return rows

    def refresh(self, index: BM25Index) -> None:
        new = self.window_rows()
        for s in self.docs:
            if new.get(s, []) != self.rows.get(s, []):
                index.set_neighbours(s, new.get(s, []))
        self.rows = {s: r for s, r in new.items() if s in self.docs}

    def place(self, slot: int, session: int) -> None:
        lst = self.sessions.setdefault(session, [])
        lst.insert(self.rnd.randint(0, len(lst)), slot)
        self.session_of[slot] = session

    def unplace(self, slot: int) -> None:
        session = self.session_of.pop(slot)
        self.sessions[session].remove(slot)

    def step(self, index: BM25Index) -> None:
        r = self.rnd.random()
        if r < 0.6 or len(self.docs) < 3:
            slot, self.next_slot = self.next_slot, self.next_slot + 1
            self.docs[slot] = self.doc()
            index.add(slot, dict(self.docs[slot]))
            self.place(slot, self.rnd.randint(0, 4))
        elif r < 0.8:
            slot = self.rnd.choice(sorted(self.docs))
            index.remove(slot, dict(self.docs.pop(slot)))
            self.unplace(slot)
            self.rows.pop(slot, None)
        else:  # an update that moves a memory to another session (or another place in it)
            slot = self.rnd.choice(sorted(self.docs))
            self.unplace(slot)
            self.place(slot, self.rnd.randint(0, 4))
        self.refresh(index)

    def reference(self, query: Counter[int]) -> dict[int, float]:
        n = len(self.docs)
        lens = {s: sum(c.values()) for s, c in self.docs.items()}
        ctx_len = {s: lens[s] + W * sum(lens[q] for q in self.rows.get(s, [])) for s in self.docs}
        avgdl = sum(ctx_len.values()) / n
        df = Counter(t for c in self.docs.values() for t in c)
        idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        out: dict[int, float] = {}
        for s, c in self.docs.items():
            total, hit = 0.0, False
            for t, qtf in query.items():
                if t not in df:
                    continue
                tf = c.get(t, 0) + W * sum(self.docs[q].get(t, 0) for q in self.rows.get(s, []))
                if tf:
                    hit = True
                    total += idf[t] * qtf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * ctx_len[s] / avgdl))
            if hit:
                out[s] = total
        return out

    def bulk_index(self) -> BM25Index:
        """A new index built from the final state in one go, as a store does when it opens."""
        index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
        slots = np.array(sorted(self.docs), np.int64)
        pairs = [(s, t, tf) for s in slots.tolist() for t, tf in self.docs[s].items()]
        ps, pt, pf = (np.array(col) for col in zip(*pairs))
        index.add_bulk(ps.astype(np.int32), pt.astype(np.int64), pf.astype(np.float32), slots,
                       np.array([sum(self.docs[s].values()) for s in slots.tolist()], np.int64))
        nb = np.full((len(slots), 2 * RADIUS), -1, np.int32)
        for i, s in enumerate(slots.tolist()):
            row = self.rows.get(s, [])
            nb[i, : len(row)] = row
        index.set_neighbours_bulk(slots, nb)
        return index


def scores(index: BM25Index, query: Counter[int]) -> dict[int, float]:
    slots, values = index.score(dict(query))
    return dict(zip(slots.tolist(), values.tolist()))


@pytest.mark.parametrize("seed", range(12))
def test_patched_context_postings_match_the_reference(seed: int) -> None:
    rnd = random.Random(seed)
    model = Model(rnd)
    index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
    for step in range(160):
        model.step(index)
        if step % 7 == 0:  # queries in between build some terms' postings early
            query = Counter(rnd.choice(range(len(VOCAB))) for _ in range(rnd.randint(1, 3)))
            got, want = scores(index, query), model.reference(query)
            assert got.keys() == want.keys()
            for s, v in want.items():
                assert got[s] == pytest.approx(v, rel=1e-9, abs=1e-12)
    built = model.bulk_index()
    for t in range(len(VOCAB)):
        query = Counter([t])
        got, fresh = scores(index, query), scores(built, query)
        assert got == fresh  # patched and freshly built postings agree bit for bit
        want = model.reference(query)
        assert got.keys() == want.keys()


def test_a_scope_filter_on_receivers_equals_filtering_postings_first() -> None:
    """``sources`` (a user/session scope, closed under neighbourhood) restricts receivers."""
    rnd = random.Random(99)
    model = Model(rnd)
    index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
    for _ in range(120):
        model.step(index)
    n = max(model.docs) + 1
    scope = np.zeros(n + 16, bool)
    for session in (2,):
        scope[model.sessions.get(session, [])] = True
    for query in [{t: 1} for t in range(10)] + [{t: 1, t + 1: 2, t + 5: 1} for t in range(10)]:
        # A narrow scope sums few postings (sorted path), the whole store many (dense path).
        slots, values = index.score(query, scope, scope)
        all_slots, all_values = index.score(query)
        expected = {s: v for s, v in zip(all_slots.tolist(), all_values.tolist()) if scope[s]}
        assert dict(zip(slots.tolist(), values.tolist())) == expected


def test_a_narrow_scope_in_a_big_index_sums_like_the_whole_index() -> None:
    """Few postings are summed by sorting, many by a dense pass: the sums are the same."""
    rnd = random.Random(5)
    index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
    n = 3000
    for slot in range(n):
        index.add(slot, dict(Counter(rnd.randrange(12) for _ in range(rnd.randint(1, 6)))))
    for slot in range(0, n, 3):  # sessions of three
        index.set_neighbours(slot, [slot + 1, slot + 2])
        index.set_neighbours(slot + 1, [slot, slot + 2])
        index.set_neighbours(slot + 2, [slot, slot + 1])
    scope = np.zeros(n, bool)
    scope[30:45] = True
    for t in range(10):
        query = {t: 1, t + 1: 1, t + 2: 2}
        slots, values = index.score(query, scope, scope)
        all_slots, all_values = index.score(query)
        assert len(all_slots) * 16 > n >= len(slots) * 3 * 16  # both paths are taken
        expected = {s: v for s, v in zip(all_slots.tolist(), all_values.tolist()) if scope[s]}
        assert dict(zip(slots.tolist(), values.tolist())) == expected


@pytest.mark.parametrize("seed", range(6))
def test_scoring_a_few_documents_from_their_terms_equals_the_postings_path(seed: int, monkeypatch) -> None:
    """A narrow filter is scored document by document (forward index + neighbour rows);
    forced either way, the two paths give the same slots and bit-identical scores."""
    rnd = random.Random(seed)
    model = Model(rnd)
    index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
    for _ in range(150):
        model.step(index)
    n = max(model.docs) + 1
    for _ in range(30):
        allowed = np.zeros(n + 8, bool)
        if rnd.random() < 0.5:  # a few documents: most neighbours lie outside
            allowed[rnd.sample(sorted(model.docs), rnd.randint(1, 12))] = True
        else:  # whole sessions (as a user scope is): neighbours are candidates themselves
            for session in rnd.sample(sorted(model.sessions), min(2, len(model.sessions))):
                allowed[model.sessions[session]] = True
        query = {rnd.randrange(len(VOCAB)): rnd.randint(1, 2) for _ in range(rnd.randint(1, 4))}
        got = {}
        for factor in (0, 10**9):  # 0: the documents path always; 10**9: the postings path always
            monkeypatch.setattr(BM25Index, "_DOC_AT_A_TIME", factor)
            slots, values = index.score(query, allowed)
            got[factor] = dict(zip(slots.tolist(), values.tolist()))
        assert got[0] == got[10**9]
        want = {s: v for s, v in model.reference(Counter(query)).items() if allowed[s]}
        assert got[0].keys() == want.keys()


@pytest.mark.parametrize("seed", range(6))
def test_pruned_top_k_equals_scoring_everything(seed: int, monkeypatch) -> None:
    """BM25Index.top_k skips documents that a bound proves cannot reach the top k (MaxScore):
    forced on every query, it returns the same slots, scores and order as top_k over every
    score, with and without a filter and a scope, on an index patched by many writes (its
    count bounds are then stale, i.e. loose, but still bounds). Queries of up to 14 terms
    reach the steps where the threshold is not tried (it is after 1, 2, 4, 8... terms)."""
    from beeweave_core.index.bm25 import scores_at, top_k

    rnd = random.Random(seed)
    model = Model(rnd)
    index = BM25Index(K1, B, radius=RADIUS, context_weight=W)
    for _ in range(400):
        model.step(index)
    monkeypatch.setattr(BM25Index, "_PRUNE_MIN", 0)
    answered = []
    real = BM25Index._pruned
    monkeypatch.setattr(BM25Index, "_pruned", lambda self, *a: answered.append(r := real(self, *a)) or r)
    n = max(model.docs) + 1
    for factor in (BM25Index._DOC_AT_A_TIME, 0):  # 0: never give up for cost
        monkeypatch.setattr(BM25Index, "_DOC_AT_A_TIME", factor)
        for _ in range(60):
            query = {min(int(rnd.paretovariate(0.8)) - 1, len(VOCAB) - 1): rnd.randint(1, 2)
                     for _ in range(rnd.randint(2, 5) if rnd.random() < 0.7 else rnd.randint(6, 14))}
            live = np.zeros(n + 4, bool)
            live[sorted(model.docs)] = True  # a store's filter masks hold live slots only
            allowed = None if rnd.random() < 0.5 else live & np.array([rnd.random() < 0.7 for _ in range(n + 4)])
            scope = None
            if rnd.random() < 0.3:
                scope = np.zeros(n + 4, bool)
                for session in rnd.sample(range(5), 3):
                    scope[model.sessions.get(session, [])] = True
                allowed = scope & (live if allowed is None else allowed)  # as a store's filter: within its scope
            pool = np.flatnonzero(live if allowed is None else allowed)
            include = np.sort(rnd.sample(pool.tolist(), min(len(pool), 8)))
            all_slots, all_scores = index.score(query, allowed, scope)
            for k in (1, 3, 10):
                got = index.search(query, k, allowed, scope, include)
                want = top_k(all_slots, all_scores, k)
                assert got[0].tolist() == want[0].tolist()
                assert got[1].tolist() == want[1].tolist()
                assert got[2].tolist() == scores_at(all_slots, all_scores, include).tolist()
    pruned = sum(r is not None for r in answered)
    assert pruned >= 20, f"the pruned path answered only {pruned} of {len(answered)} queries"


@pytest.mark.parametrize("n_slots", [60, 5_000])  # dense pass / sorted path
@pytest.mark.parametrize("seed", range(4))
def test_context_postings_build_counts_each_posting_for_itself_and_its_neighbours(n_slots: int, seed: int) -> None:
    from beeweave_core.index.bm25_context import ContextPostings

    rng = np.random.default_rng(seed)
    for n_postings in (0, 1, 7, 40):
        slots = np.sort(rng.choice(n_slots, n_postings, replace=False)).astype(np.int32)
        tfs = rng.integers(1, 5, n_postings).astype(np.float64)
        nb = rng.integers(-1, n_slots, (n_postings, 2 * RADIUS)).astype(np.int32)
        own: Counter[int] = Counter()
        nbr: Counter[int] = Counter()
        for s, tf, row in zip(slots.tolist(), tfs.tolist(), nb.tolist()):
            own[s] += tf
            for r in row:
                if r >= 0:
                    nbr[r] += tf
        every = sorted(set(own) | set(nbr))
        c = ContextPostings.build(slots, tfs, nb, n_slots)
        got_slots, got_own, got_nbr = c.view()
        assert got_slots.tolist() == every
        assert got_own.tolist() == [own[s] for s in every]
        assert got_nbr.tolist() == [nbr[s] for s in every]
        assert (c.max_own, c.max_nbr) == (max(own.values(), default=0.0), max(nbr.values(), default=0.0))
