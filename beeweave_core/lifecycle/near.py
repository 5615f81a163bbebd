"""The near-duplicates of freshly added memories, found in time linear in the batch.

Merge-on-insert used to look, for every new memory, "as far as the batch is long" and load
every near-duplicate it found: one event with 1,000 tool calls whose outputs a model calls
alike (cosine above the threshold) but whose words differ (so nothing merges) read and
tokenised each memory once per later memory of the batch: quadratic (issue 47, item 8). Here each memory looks at its
``merge_candidates`` nearest neighbours, like ``maintain()`` does, and every memory is read,
tokenised and has its vector fetched at most once per call. A neighbour from the batch itself
is judged on its words from the batch (an insert's hooks change expiries and tiers, never the
text), so it is read from the store only when it joins a group.

The wide look existed for a batch holding many copies of one memory (an agent asking the same
question again and again): with ten neighbours the copies would fold into several primaries.
So a lookup widens (doubling, up to the old limit) while at least half of what it found are
duplicates that join the group: each widening is paid for by memories that are absorbed and
never looked up again, so the copies still end in one group under the best of them, and
alike-but-different memories never widen anything.

Ten nearer memories that do not merge (alike by vector but of other words, or facts) hid a
duplicate behind them. So when every neighbour a lookup found is a duplicate by vector, the
memory's words are looked up too (once, the ``merge_candidates`` best lexical matches), and
those that are duplicates by vector join the candidates: a copy but for a word is found there
however many alike memories stand nearer. One more bounded lookup per memory, still linear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..filters import Filter, build_filter
from ..records import KnowledgeChunk
from ..store.base import StoreBackend
from .merge import dedupable

__all__ = ["NearDuplicates"]


class NearDuplicates:
    """Bounded neighbour lookups over one backend, with what they read kept for the call.

    A cached memory is never stale for the caller: merge-on-insert holds the write lock for the
    whole call and never looks again at a memory it merged (absorbed, or the primary it changed).
    """

    def __init__(self, backend: StoreBackend, tokenize: Callable[[str], Iterable[str]], *, candidates: int,
                 threshold: float, same_words: float | None, limit: int) -> None:
        self.backend = backend
        self.tokenize = tokenize
        self.candidates = candidates
        self.threshold = threshold
        self.same_words = same_words
        self.limit = max(limit, candidates + 1)  # the widest a lookup may grow: the old "batch long"
        self._chunks: dict[str, KnowledgeChunk] = {}  # as stored
        self._texts: dict[str, str] = {}  # the batch's texts, for the words test before any read
        self._vectors: dict[str, np.ndarray] = {}
        self._terms: dict[str, set[str]] = {}
        self.loaded = 0  # memories read from the backend (tests bound it)
        self.lookups = 0  # vector searches
        self.word_lookups = 0  # lexical searches (only where the vector neighbours are all duplicates)
        self.looked_at = 0  # neighbours returned by them

    def preload(self, batch: Sequence[KnowledgeChunk]) -> None:
        """Take the batch's texts, and read its vectors in one go."""
        self._texts.update((c.id, c.content) for c in batch)
        self.vectors([c.id for c in batch])

    def vector(self, cid: str) -> np.ndarray | None:
        return self.vectors([cid]).get(cid)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        missing = [i for i in ids if i not in self._vectors]
        if missing:
            self._vectors.update(self.backend.get_vectors(missing))
        return {i: self._vectors[i] for i in ids if i in self._vectors}

    def group(self, c: KnowledgeChunk, vec: np.ndarray, done: set[str]) -> list[KnowledgeChunk]:
        """``c`` and its near-duplicates that may merge (not in ``done``, dedupable and, with
        ``same_words``, sharing that share of ``c``'s words), nearest first."""
        flt = build_filter(None, user_id=c.user_id)
        k = self.candidates + 1
        by_words: list[tuple[str, float]] | None = None
        while True:
            found = self.backend.vector_search(vec, flt, k)
            self.lookups += 1
            self.looked_at += len(found)
            near = [(o, sim) for o, sim in found if sim >= self.threshold]
            if len(found) == k and len(near) == k:
                # Every neighbour looked at is a duplicate by vector: one further away can be
                # missed when the nearer ones do not merge (other words, facts). A duplicate
                # sharing the words is also among the best matches of the words: looked up once.
                if by_words is None:
                    by_words = self._by_words(c, vec, flt)
                seen = {o for o, _ in near}
                near += [hit for hit in by_words if hit[0] not in seen]
                near.sort(key=lambda hit: -hit[1])
            ids = [o for o, _ in near if o not in done]
            if self.same_words is not None:
                self._load([i for i in ids if i not in self._texts])  # stored neighbours: read for their words
                ids = [i for i in ids if i in self._texts or i in self._chunks]  # not deleted meanwhile
                mine = self._words(c.id)
                ids = [i for i in ids if i == c.id or _jaccard(mine, self._words(i)) >= self.same_words]
            if len(ids) > 1:  # a group: its members as stored now
                self._load(ids)
            group = [self._chunks[i] for i in ids if i in self._chunks and dedupable(self._chunks[i])]
            if len(found) < k or k >= self.limit or 2 * len(ids) < k:
                return group
            k = min(2 * k, self.limit)

    def _by_words(self, c: KnowledgeChunk, vec: np.ndarray, flt: Filter) -> list[tuple[str, float]]:
        """The ``candidates`` best lexical matches of ``c``'s words that are duplicates by vector."""
        self.word_lookups += 1
        found = self.backend.lexical_search(dict.fromkeys(self._words(c.id), 1), flt, self.candidates)
        vecs = self.vectors([o for o, _ in found])
        sims = ((o, float(np.dot(vec, vecs[o]))) for o, _ in found if o in vecs)
        return [(o, sim) for o, sim in sims if sim >= self.threshold]

    def _load(self, ids: Sequence[str]) -> None:
        missing = [i for i in dict.fromkeys(ids) if i not in self._chunks]
        if missing:
            got = self.backend.get(missing)
            self.loaded += len(got)
            self._chunks.update(got)
            self.vectors(list(got))

    def _words(self, cid: str) -> set[str]:
        words = self._terms.get(cid)
        if words is None:
            text = self._texts[cid] if cid in self._texts else self._chunks[cid].content
            words = self._terms[cid] = set(self.tokenize(text))
        return words


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0
