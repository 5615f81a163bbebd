"""Session-context postings for the BM25 index, kept up to date instead of recomputed per query.

With session context a memory's count of term ``t`` is its own count plus ``w`` times the
counts of its neighbours. Spreading a common term's postings to every neighbour at query
time costs a few passes over the whole slot array per term (most of a search at 100k
memories). So the first query that uses a term builds that term's *context postings* —
every slot that holds the term or has a neighbour holding it, with the two counts kept
apart — and every later write patches the entries it changes:

- a new document adds its own counts to the terms it holds;
- a changed neighbour row (a document joined or left the session window) adds or
  subtracts the neighbour's counts, read from a forward index (slot -> its terms).

Both counts are integers, so patched and freshly built postings are equal exactly and a
reopened store scores bit for bit as before. Deletions (rare: merges, expiry, forget) drop
the built postings; they are rebuilt lazily.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ContextPostings", "ForwardIndex"]


class ForwardIndex:
    """Each slot's (term id, count) pairs, in append-only flat arrays.

    A slot indexed again gets a fresh run; old runs stay as garbage (slots are not reused
    by the stores, so this is bounded by what was ever inserted).
    """

    def __init__(self) -> None:
        self._start = np.zeros(0, np.int64)
        self._len = np.zeros(0, np.int32)
        self._terms = np.zeros(0, np.int32)
        self._tfs = np.zeros(0, np.int32)
        self._used = 0

    def _ensure_slots(self, n: int) -> None:
        if n > len(self._start):
            cap = max(n, 2 * len(self._start), 64)
            self._start = np.concatenate([self._start, np.zeros(cap - len(self._start), np.int64)])
            self._len = np.concatenate([self._len, np.zeros(cap - len(self._len), np.int32)])

    def _reserve(self, extra: int) -> None:
        need = self._used + extra
        if need > len(self._terms):
            cap = max(need, 2 * len(self._terms), 256)
            self._terms = np.resize(self._terms, cap)
            self._tfs = np.resize(self._tfs, cap)

    def set(self, slot: int, terms: np.ndarray, tfs: np.ndarray) -> None:
        self._ensure_slots(slot + 1)
        self._reserve(len(terms))
        a, b = self._used, self._used + len(terms)
        self._terms[a:b], self._tfs[a:b] = terms, tfs
        self._start[slot], self._len[slot] = a, len(terms)
        self._used = b

    def set_bulk(self, slots: np.ndarray, counts: np.ndarray, terms: np.ndarray, tfs: np.ndarray) -> None:
        """Runs of ``counts[i]`` consecutive pairs belong to ``slots[i]``."""
        if not len(slots):
            return
        self._ensure_slots(int(slots.max()) + 1)
        self._reserve(len(terms))
        a = self._used
        self._terms[a : a + len(terms)], self._tfs[a : a + len(terms)] = terms, tfs
        starts = a + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self._start[slots], self._len[slots] = starts, counts
        self._used = a + len(terms)

    def state(self) -> dict[str, np.ndarray]:
        return {"start": self._start, "len": self._len, "terms": self._terms[: self._used],
                "tfs": self._tfs[: self._used]}

    @classmethod
    def from_state(cls, st: dict[str, np.ndarray]) -> ForwardIndex:
        f = cls()
        f._start, f._len, f._terms, f._tfs = st["start"], st["len"], st["terms"], st["tfs"]
        f._used = len(f._terms)
        return f

    def runs(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pairs of many slots at once: (position in ``slots`` of each pair, term, count)."""
        starts, lens = self._start[slots], self._len[slots].astype(np.int64)
        owner = np.repeat(np.arange(len(slots)), lens)
        idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(int(lens.sum()))
        return owner, self._terms[idx], self._tfs[idx]

    def get(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        if slot >= len(self._start):
            return self._terms[:0], self._tfs[:0]
        a = int(self._start[slot])
        b = a + int(self._len[slot])
        return self._terms[a:b], self._tfs[a:b]


class ContextPostings:
    """One term's context postings: sorted slots, own count and neighbours' count."""

    __slots__ = ("slots", "own", "nbr", "n", "max_own", "max_nbr")

    def __init__(self, slots: np.ndarray, own: np.ndarray, nbr: np.ndarray) -> None:
        self.slots: np.ndarray = slots.astype(np.int32)
        self.own: np.ndarray = own.astype(np.float32)  # integral values: exact in float32 up to 2**24
        self.nbr: np.ndarray = nbr.astype(np.float32)
        self.n = len(slots)
        # Upper bounds of the two counts over the entries (for pruning, see BM25Index.search):
        # raised by add(), never lowered, so they stay bounds however the entries change.
        self.max_own = float(self.own.max()) if self.n else 0.0
        self.max_nbr = float(self.nbr.max()) if self.n else 0.0

    @classmethod
    def build(cls, slots: np.ndarray, tfs: np.ndarray, nb: np.ndarray, n_slots: int) -> ContextPostings:
        """From a term's postings (sorted slots, counts) and the neighbour rows of those slots:
        each posting counts for its own slot and, as a neighbour count, for each of its
        neighbours (neighbourhood is symmetric). The first query meeting a term pays for this,
        so it does a few passes and no more (counts are integers: any order sums them exactly)."""
        recv = nb.ravel()
        keep = recv >= 0
        recv = recv[keep]
        credit = np.repeat(tfs, nb.shape[1])[keep]
        if (len(slots) + len(recv)) * 16 > n_slots:  # many: one pass over the slots beats sorting
            own: np.ndarray = np.zeros(n_slots, np.float64)
            own[slots] = tfs
            nbr: np.ndarray = np.bincount(recv, weights=credit, minlength=n_slots)
            uniq = np.flatnonzero((own > 0) | (nbr > 0))
            return cls(uniq, own[uniq], nbr[uniq])
        every = np.concatenate([slots, recv])
        if not len(every):
            return cls(every, np.zeros(0), np.zeros(0))
        order = np.argsort(every, kind="stable")
        ordered = every[order]
        first = np.empty(len(ordered), bool)
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        own = np.zeros(len(every))
        own[: len(slots)] = tfs
        nbr = np.zeros(len(every))
        nbr[len(slots) :] = credit
        return cls(ordered[starts], np.add.reduceat(own[order], starts), np.add.reduceat(nbr[order], starts))

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.slots[: self.n], self.own[: self.n], self.nbr[: self.n]

    def add(self, slot: int, own: float, nbr: float) -> None:
        """Add to one slot's counts; an entry whose counts both reach zero goes away."""
        n = self.n
        i = int(np.searchsorted(self.slots[:n], slot))
        if i < n and self.slots[i] == slot:
            self.own[i] += own
            self.nbr[i] += nbr
            self.max_own = max(self.max_own, float(self.own[i]))
            self.max_nbr = max(self.max_nbr, float(self.nbr[i]))
            if self.own[i] == 0 and self.nbr[i] == 0:
                for a in (self.slots, self.own, self.nbr):
                    a[i : n - 1] = a[i + 1 : n]
                self.n -= 1
            return
        if n == len(self.slots):
            cap = max(2 * n, 8)
            self.slots, self.own, self.nbr = (np.resize(a, cap) for a in (self.slots, self.own, self.nbr))
        for a, v in ((self.slots, slot), (self.own, own), (self.nbr, nbr)):
            if i < n:  # slots are mostly new and last: this shift is rare and short
                a[i + 1 : n + 1] = a[i:n].copy()
            a[i] = v
        self.n += 1
        self.max_own = max(self.max_own, float(own))
        self.max_nbr = max(self.max_nbr, float(nbr))
