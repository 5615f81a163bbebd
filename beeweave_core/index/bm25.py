"""An incremental Okapi BM25 index over integer document slots.

Adding or deleting a document touches only its own postings and a few counters;
nothing is ever rebuilt. A term's weight is Lucene's idf, ``log(1 + (N - df + .5) / (df + .5))``,
positive however many documents hold the term; a posting scores
``idf * qtf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` (Okapi's saturation and
length normalisation, dl a document's number of tokens, avgdl their mean over every live
document). That is bm25s's method "lucene" times the constant ``k1 + 1``, which Lucene and
bm25s leave out of the numerator (it changes no ranking); ``tests/test_bm25.py`` checks the
scores against bm25s to 1e-6.

Lucene's idf, not rank_bm25's ``log((N - df + .5) / (df + .5))``: that one is 0 for a term in
half the documents and negative above (rank_bm25 then floors it at ``epsilon`` times the mean
idf, which is itself negative when most terms are common), so in a small store (every user's
first) a memory matching the query could score below one matching nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .bm25_context import ContextPostings, ForwardIndex

__all__ = ["BM25Index", "bm25_idf"]


def bm25_idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    """Lucene's idf, ``log(1 + (N - df + .5) / (df + .5))``: positive for every df <= N.

    Computed as ``log(N + 1) - log(df + .5)``, the same value: PostgreSQL's search spells it
    so too (store/postgres/sql.py), and numpy's log agrees with PostgreSQL's ``ln`` on those
    arguments (integers and halves) where it does not always on ``1 + x``, so that memories
    tied in one backend are tied in the other."""
    return np.log(n_docs + 1.0) - np.log(df + 0.5)


class _Postings:
    """Growable (slot, tf) arrays for one term, kept sorted by slot."""

    __slots__ = ("slots", "tfs", "n")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int32)
        self.tfs = np.empty(4, dtype=np.float32)
        self.n = 0

    def append(self, slot: int, tf: int) -> None:
        if self.n == len(self.slots):
            self.slots = np.resize(self.slots, 2 * self.n)
            self.tfs = np.resize(self.tfs, 2 * self.n)
        if self.n and slot < self.slots[self.n - 1]:  # a re-used slot: keep the order
            i = int(np.searchsorted(self.slots[: self.n], slot))
            self.slots[i + 1 : self.n + 1] = self.slots[i : self.n].copy()
            self.tfs[i + 1 : self.n + 1] = self.tfs[i : self.n].copy()
            self.slots[i], self.tfs[i] = slot, tf
        else:
            self.slots[self.n] = slot
            self.tfs[self.n] = tf
        self.n += 1

    def extend(self, slots: np.ndarray, tfs: np.ndarray) -> None:
        need = self.n + len(slots)
        if need > len(self.slots):
            cap = max(need, 2 * len(self.slots))
            self.slots = np.resize(self.slots, cap)
            self.tfs = np.resize(self.tfs, cap)
        self.slots[self.n : need] = slots
        self.tfs[self.n : need] = tfs
        self.n = need
        if need > 1 and (np.diff(self.slots[:need]) < 0).any():
            order = np.argsort(self.slots[:need], kind="stable")
            self.slots[:need] = self.slots[:need][order]
            self.tfs[:need] = self.tfs[:need][order]

    def remove_slot(self, slot: int) -> None:
        # Postings are in insertion (= slot) order, so the entry is found by bisection.
        i = int(np.searchsorted(self.slots[: self.n], slot))
        if i < self.n and self.slots[i] == slot:
            self.slots[i : self.n - 1] = self.slots[i + 1 : self.n]
            self.tfs[i : self.n - 1] = self.tfs[i + 1 : self.n]
            self.n -= 1


class BM25Index:
    """Okapi BM25 over term ids and document slots.

    Statistics (N, average length, document frequencies) are over every live
    document; a filter only restricts which documents may be returned.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, *, radius: int = 0, context_weight: float = 0.0) -> None:
        self.k1, self.b = k1, b
        self.context_weight = context_weight
        self._width = 2 * radius  # neighbour slots per document
        self._postings: list[_Postings] = []
        self._df = np.zeros(0, dtype=np.int64)
        self._doc_len = np.zeros(0, dtype=np.float64)  # own terms
        self._ctx_len = np.zeros(0, dtype=np.float64)  # own + weighted neighbour terms
        self._nb = np.full((0, self._width), -1, dtype=np.int32)
        self._alive = np.zeros(0, dtype=bool)
        self._n_docs = 0
        # Lengths are integers; keep the totals integral so that their order of
        # accumulation can never change avgdl (reopen must reproduce scores exactly).
        self._own_total = 0  # sum of own lengths of live documents
        self._nb_total = 0  # sum over live documents of their neighbours' own lengths
        self._nb_len = np.zeros(0, dtype=np.int64)  # per document: its neighbours' own lengths
        self._idf_cache: tuple[int, np.ndarray] | None = None  # (version, idf per term id)
        self._norm_cache: tuple[int, np.ndarray] | None = None  # (version, length norm per slot)
        self._norm_min_cache: tuple[int, float] | None = None
        # Per built term, for the current version only: the saturation of each context
        # posting (see _saturation), the part of its score that does not depend on the query.
        self._sat: dict[int, np.ndarray] = {}
        self._sat_version = -1
        self._version = 0
        # Session context (see bm25_context): each slot's terms, and the context postings
        # built so far (by the queries that needed them), patched by every write.
        self._fwd = ForwardIndex()
        self._ctx: dict[int, ContextPostings] = {}

    @property
    def _spreads(self) -> bool:
        return bool(self._width and self.context_weight)

    # -- snapshot (see store/snapshot.py) -------------------------------------
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """Arrays and integers that rebuild this index exactly (built context postings are
        a cache and are not saved)."""
        ns = np.array([p.n for p in self._postings], np.int64)
        ptr = np.concatenate([[0], np.cumsum(ns)])
        arrays = {
            "post_ptr": ptr,
            "post_slots": np.concatenate([p.slots[: p.n] for p in self._postings]) if self._postings
            else np.zeros(0, np.int32),
            "post_tfs": np.concatenate([p.tfs[: p.n] for p in self._postings]) if self._postings
            else np.zeros(0, np.float32),
            "df": self._df, "doc_len": self._doc_len, "ctx_len": self._ctx_len, "nb": self._nb,
            "alive": self._alive, "nb_len": self._nb_len,
            **{f"fwd_{k}": v for k, v in self._fwd.state().items()},
        }
        ints = {"n_docs": self._n_docs, "own_total": self._own_total, "nb_total": self._nb_total}
        return arrays, ints

    def restore(self, arrays: dict[str, np.ndarray], ints: dict[str, int]) -> None:
        ptr = arrays["post_ptr"]
        slots, tfs = arrays["post_slots"], arrays["post_tfs"]
        self._postings = []
        for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
            p = _Postings()
            # Views of disjoint ranges: a list shifts entries only within its own range, and
            # growing past it allocates a new array (the snapshot's pages are copy-on-write).
            p.slots, p.tfs, p.n = slots[a:b], tfs[a:b], b - a
            if p.n == 0:
                p.slots, p.tfs = np.empty(4, np.int32), np.empty(4, np.float32)
            self._postings.append(p)
        self._df, self._doc_len, self._ctx_len = arrays["df"], arrays["doc_len"], arrays["ctx_len"]
        self._nb, self._alive, self._nb_len = arrays["nb"], arrays["alive"], arrays["nb_len"]
        self._fwd = ForwardIndex.from_state({k[4:]: v for k, v in arrays.items() if k.startswith("fwd_")})
        self._n_docs, self._own_total, self._nb_total = ints["n_docs"], ints["own_total"], ints["nb_total"]
        self._ctx.clear()
        self._version += 1

    # -- bookkeeping ---------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return self._n_docs

    @property
    def avgdl(self) -> float:
        if not self._n_docs:
            return 0.0
        return (self._own_total + self.context_weight * self._nb_total) / self._n_docs

    def _ensure_slot(self, slot: int) -> None:
        if slot >= len(self._doc_len):
            cap = max(slot + 1, 2 * len(self._doc_len), 16)
            extra = cap - len(self._doc_len)
            self._doc_len = np.concatenate([self._doc_len, np.zeros(extra)])
            self._ctx_len = np.concatenate([self._ctx_len, np.zeros(extra)])
            self._nb_len = np.concatenate([self._nb_len, np.zeros(extra, np.int64)])
            self._alive = np.concatenate([self._alive, np.zeros(extra, bool)])
            self._nb = np.concatenate([self._nb, np.full((extra, self._width), -1, np.int32)])

    def _ensure_term(self, term_id: int) -> None:
        while term_id >= len(self._postings):
            self._postings.append(_Postings())
        if term_id >= len(self._df):
            cap = max(term_id + 1, 2 * len(self._df), 64)
            self._df = np.concatenate([self._df, np.zeros(cap - len(self._df), np.int64)])

    def add(self, slot: int, term_counts: Mapping[int, int]) -> None:
        """Index one document given {term_id: count}."""
        self._ensure_slot(slot)
        if self._alive[slot]:
            raise ValueError(f"slot {slot} is already indexed")
        if self._spreads:
            if self._fwd.get(slot)[0].size:
                self._ctx.clear()  # a reused slot: stale neighbour credits may name it
            self._fwd.set(slot, np.fromiter(term_counts.keys(), np.int32, len(term_counts)),
                          np.fromiter(term_counts.values(), np.int32, len(term_counts)))
            for term_id, tf in term_counts.items():
                c = self._ctx.get(term_id)
                if c is not None:
                    c.add(slot, tf, 0)
        length = 0
        for term_id, tf in term_counts.items():
            self._ensure_term(term_id)
            self._postings[term_id].append(slot, tf)
            self._df[term_id] += 1
            length += tf
        self._doc_len[slot] = length
        self._alive[slot] = True
        self._n_docs += 1
        self._own_total += length
        self._set_context_length(slot)
        self._version += 1

    def add_bulk(self, slots: np.ndarray, term_ids: np.ndarray, tfs: np.ndarray, doc_slots: np.ndarray,
                 doc_lens: np.ndarray) -> None:
        """Index many documents from flat (slot, term, tf) triples; used when a store opens."""
        if len(doc_slots):
            self._ensure_slot(int(doc_slots.max()))
        self._doc_len[doc_slots] = doc_lens
        self._ctx_len[doc_slots] = doc_lens
        self._nb_len[doc_slots] = 0
        self._alive[doc_slots] = True
        self._n_docs += len(doc_slots)
        self._own_total += int(doc_lens.sum())
        if self._spreads:
            self._ctx.clear()
            self._fwd_bulk(slots, term_ids, tfs)
        if len(term_ids):
            self._ensure_term(int(term_ids.max()))
            order = np.argsort(term_ids, kind="stable")
            t_sorted = term_ids[order]
            bounds = np.flatnonzero(np.diff(t_sorted)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.concatenate([bounds, [len(t_sorted)]])
            for s, e in zip(starts.tolist(), ends.tolist()):
                tid = int(t_sorted[s])
                idx = order[s:e]
                self._postings[tid].extend(slots[idx], tfs[idx])
                self._df[tid] += e - s
        self._version += 1

    def _fwd_bulk(self, slots: np.ndarray, term_ids: np.ndarray, tfs: np.ndarray) -> None:
        if not len(slots):
            return
        if (np.diff(slots) < 0).any():
            order = np.argsort(slots, kind="stable")
            slots, term_ids, tfs = slots[order], term_ids[order], tfs[order]
        bounds = np.flatnonzero(np.diff(slots)) + 1
        starts = np.concatenate([[0], bounds])
        counts = np.diff(np.concatenate([starts, [len(slots)]]))
        self._fwd.set_bulk(slots[starts].astype(np.int64), counts.astype(np.int32), term_ids.astype(np.int32),
                           tfs.astype(np.int32))

    def _set_context_length(self, slot: int) -> None:
        row = self._nb[slot]
        nb_len = int(self._doc_len[row[row >= 0]].sum())
        self._nb_total += nb_len - int(self._nb_len[slot])
        self._nb_len[slot] = nb_len
        self._ctx_len[slot] = self._doc_len[slot] + self.context_weight * nb_len

    def set_neighbours(self, slot: int, neighbours: list[int]) -> None:
        """Set which documents' terms count (weighted) as this document's context."""
        if not self._width or slot >= len(self._alive) or not self._alive[slot]:
            return
        row = np.full(self._width, -1, np.int32)
        row[: len(neighbours)] = sorted(neighbours)[: self._width]
        if self._ctx:
            old = set(self._nb[slot].tolist())
            new = set(row.tolist())
            for sign, changed in ((1, new - old), (-1, old - new)):
                for q in changed:
                    if q >= 0:
                        self._credit(slot, q, sign)
        self._nb[slot] = row
        self._set_context_length(slot)
        self._version += 1

    def _credit(self, slot: int, neighbour: int, sign: int) -> None:
        """Add (sign 1) or take away (-1) a neighbour's counts in ``slot``'s built context postings."""
        terms, tfs = self._fwd.get(neighbour)
        for t, tf in zip(terms.tolist(), tfs.tolist()):
            c = self._ctx.get(t)
            if c is not None:
                c.add(slot, 0, sign * tf)

    def set_neighbours_bulk(self, slots: np.ndarray, nb: np.ndarray) -> None:
        """Set many neighbour rows at once (rows in canonical order, as ``SessionOrder.add_bulk`` gives)."""
        if not self._width or not len(slots):
            return
        self._ctx.clear()
        self._nb[slots] = nb
        valid = nb >= 0
        nb_len = np.where(valid, self._doc_len[np.where(valid, nb, 0)], 0.0).sum(axis=1).astype(np.int64)
        self._nb_total += int(nb_len.sum()) - int(self._nb_len[slots].sum())
        self._nb_len[slots] = nb_len
        self._ctx_len[slots] = self._doc_len[slots] + self.context_weight * nb_len
        self._version += 1

    def neighbours(self, slots: np.ndarray) -> np.ndarray:
        """The neighbour matrix rows (-1 = none) of the given slots."""
        return self._nb[slots]

    def remove(self, slot: int, term_counts: Mapping[int, int]) -> None:
        """Un-index one document and drop its postings."""
        if slot >= len(self._alive) or not self._alive[slot]:
            return
        self._ctx.clear()  # rare (merge, expiry, forget): rebuilt by the next queries
        for term_id in term_counts:
            self._df[term_id] -= 1
            self._postings[term_id].remove_slot(slot)
        self._alive[slot] = False
        self._n_docs -= 1
        self._own_total -= int(self._doc_len[slot])
        self._nb_total -= int(self._nb_len[slot])
        self._nb_len[slot] = 0
        self._doc_len[slot] = 0
        self._ctx_len[slot] = 0
        if self._width:
            self._nb[slot] = -1
        self._version += 1

    def _idf(self) -> np.ndarray:
        """Each term id's idf (0 for a term no live document holds), per version."""
        if self._idf_cache is None or self._idf_cache[0] != self._version:
            present = self._df[: len(self._postings)]
            mask = present > 0
            idf = np.zeros(len(present))
            idf[mask] = bm25_idf(self._n_docs, present[mask].astype(np.float64))
            self._idf_cache = (self._version, idf)
        return self._idf_cache[1]

    def idf(self, term_ids: Iterable[int]) -> list[float]:
        """Each term id's idf as the scores weigh it (0 for a term no live document holds)."""
        idf = self._idf()
        return [float(idf[t]) if 0 <= t < len(idf) else 0.0 for t in term_ids]

    def rare_idf(self) -> float:
        """The idf of a term one live document holds (df = 1), the highest a held term has;
        0 with no live document."""
        return float(bm25_idf(self._n_docs, np.array(1.0))) if self._n_docs else 0.0

    def _norm(self) -> np.ndarray:
        """Per slot ``k1 * (1 - b + b * dl / avgdl)``, the length part of the BM25 denominator;
        it changes only with the index, so it is computed once per version, not per query term."""
        if self._norm_cache is None or self._norm_cache[0] != self._version:
            k1, b = self.k1, self.b
            self._norm_cache = (self._version, k1 * (1 - b + b * self._ctx_len / (self.avgdl or 1.0)))
        return self._norm_cache[1]

    def _saturation(self, tfs: Any, norm: Any) -> Any:  # arrays, or one bound's floats
        """``tf * (k1 + 1) / (tf + norm)``: a posting's score is ``idf * qtf`` times this. Every
        scoring path computes it here, so their scores agree bit for bit."""
        return (tfs * (self.k1 + 1)) / (tfs + norm)

    def _context_saturation(self, term_id: int, n_slots: int, norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A term's context slots and their saturations, kept until the next write: between
        writes a search then costs one multiplication per posting instead of nine."""
        if self._sat_version != self._version:
            self._sat.clear()
            self._sat_version = self._version
        slots, own, nbr = self._context(term_id, n_slots).view()
        sat = self._sat.get(term_id)
        if sat is None:
            tfs = own.astype(np.float64) + self.context_weight * nbr.astype(np.float64)
            sat = self._sat[term_id] = self._saturation(tfs, norm[slots])
        return slots, sat

    # -- scoring -------------------------------------------------------------
    def score(self, query_terms: Mapping[int, int], allowed: np.ndarray | None = None,
              sources: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Return (slots, scores) of live documents containing any query term.

        ``query_terms`` maps term id to how often it occurs in the query (a term
        repeated in the query counts again, as in bm25s and rank_bm25). ``allowed`` is an
        optional boolean mask over slots applied before ranking. ``sources`` is an
        optional cheaper pre-filter on the postings themselves; it must be closed
        under neighbourhood (a user or session scope is: neighbours share both),
        so that it never drops a term a returned document's context holds.

        Each term's context postings are scored, then summed per slot in one dense
        accumulation: the cost is the query's postings plus one pass over the slot array,
        with no sorting.
        """
        empty = np.zeros(0, np.int64), np.zeros(0)
        if self._n_docs == 0:
            return empty
        idf = self._idf()
        norm = self._norm()
        n_slots = len(self._alive)
        terms = self._terms(query_terms)
        if allowed is not None and self._prefers(terms, int(np.count_nonzero(allowed[:n_slots]))):
            # A narrow filter (one user in a big store): score its few documents from their own
            # and their neighbours' terms instead of filtering every posting of the query's terms.
            return self._score_documents(terms, np.flatnonzero(allowed[:n_slots]), idf, norm)
        parts_slots: list[np.ndarray] = []
        parts_scores: list[np.ndarray] = []
        for term_id, qtf in terms:
            if self._spreads:
                slots, sat = self._context_saturation(term_id, n_slots, norm)
            else:
                p = self._postings[term_id]
                slots = p.slots[: p.n]
                sat = self._saturation(p.tfs[: p.n].astype(np.float64), norm[slots])
            if sources is not None:  # closed under neighbourhood: filtering receivers is enough
                keep = sources[slots]
                slots, sat = slots[keep], sat[keep]
            if not len(slots):
                continue
            parts_slots.append(slots)
            parts_scores.append(idf[term_id] * qtf * sat)
        if not parts_slots:
            return empty
        if len(parts_slots) == 1:  # one term: its slots are sorted and unique already
            uniq, scores = parts_slots[0].astype(np.int64), parts_scores[0]
        else:
            # One accumulation over all terms; bincount adds each slot's terms in query
            # order, the same sums however the index was built.
            slots = np.concatenate(parts_slots)
            weights = np.concatenate(parts_scores)
            if len(slots) * 16 > n_slots:
                acc = np.bincount(slots, weights=weights, minlength=n_slots)
                hit = np.zeros(n_slots, bool)
                hit[slots] = True
                uniq = np.flatnonzero(hit)
                scores = acc[uniq]
            else:  # few postings (a narrow scope in a big store): sorting them beats passes over every slot
                uniq, inv = np.unique(slots, return_inverse=True)
                scores = np.bincount(inv, weights=weights, minlength=len(uniq))
                uniq = uniq.astype(np.int64)
        if allowed is not None:
            keep = allowed[uniq]
            uniq, scores = uniq[keep], scores[keep]
        return uniq, scores

    # Scoring document by document reads ~this many (term, count) pairs per document (its own
    # terms; as many per neighbour); below that many postings it is the cheaper way.
    _DOC_AT_A_TIME = 16

    def _terms(self, query_terms: Mapping[int, int]) -> list[tuple[int, int]]:
        return [(t, q) for t, q in query_terms.items() if t < len(self._postings) and self._df[t] > 0]

    def prefers_documents(self, query_terms: Mapping[int, int], n_candidates: int) -> bool:
        """Whether ``score_documents`` over that many candidates is cheaper than ``score``."""
        return self._prefers(self._terms(query_terms), n_candidates)

    def _prefers(self, terms: list[tuple[int, int]], n_candidates: int) -> bool:
        if not (self._spreads and terms):
            return False
        postings = sum(int(self._df[t]) for t, _ in terms) * (1 + self._width)
        return n_candidates * (1 + self._width) * self._DOC_AT_A_TIME < postings

    def score_documents(self, query_terms: Mapping[int, int], cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``score`` restricted to the sorted live slots ``cand``, equal to it on those slots."""
        terms = self._terms(query_terms)
        if self._n_docs == 0 or not terms or not len(cand):
            return np.zeros(0, np.int64), np.zeros(0)
        idf = self._idf()
        cand = np.asarray(cand, np.int64)
        if self._spreads:
            return self._score_documents(terms, cand, idf, self._norm())
        # Without session context there is no forward index: look each term's postings up.
        norm = self._norm()
        total, hit = np.zeros(len(cand)), np.zeros(len(cand), bool)
        for t, qtf in terms:
            p = self._postings[t]
            i, found = _locate(p.slots[: p.n], cand)
            tf = np.where(found, p.tfs[i], 0).astype(np.float64)
            total += np.where(found, idf[t] * qtf * self._saturation(tf, norm[cand]), 0.0)
            hit |= found
        return cand[hit], total[hit]

    def _score_documents(self, terms: list[tuple[int, int]], cand: np.ndarray, idf: np.ndarray,
                         norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``score`` for the candidate slots only, from the forward index: each candidate's own
        counts and its neighbours' counts of the query terms. The counts, the formula and the
        order of the sum over terms are those of the postings path, so the scores are equal."""
        width = self._width
        nb = self._nb[cand].ravel()
        owner = np.repeat(np.arange(len(cand)), width)[nb >= 0]
        nb = nb[nb >= 0]
        # A candidate's neighbours are mostly other candidates (a session stays in one scope):
        # read each distinct slot's forward run once (the candidates', then the few others'),
        # and give each candidate its neighbours' rows.
        nb_row, inside = _locate(cand, nb)
        others = np.unique(nb[~inside])
        nb_row[~inside] = len(cand) + np.searchsorted(others, nb[~inside])
        owner_of_pair, pterms, ptfs = self._fwd.runs(np.concatenate([cand, others]))
        col = np.full(len(pterms), -1, np.int64)
        for j, (t, _) in enumerate(terms):  # terms come from a dict: each in one column
            col[pterms == t] = j
        hit = col >= 0
        counts = np.bincount(owner_of_pair[hit] * len(terms) + col[hit], weights=ptfs[hit],
                             minlength=(len(cand) + len(others)) * len(terms)).reshape(-1, len(terms))
        own = counts[: len(cand)]
        nbr = np.zeros_like(own)
        if len(nb):
            nb_counts = counts[nb_row]
            for j in range(len(terms)):
                nbr[:, j] = np.bincount(owner, weights=nb_counts[:, j], minlength=len(cand))
        tfs = own + self.context_weight * nbr
        total = np.zeros(len(cand))
        for j, (t, qtf) in enumerate(terms):
            tf = tfs[:, j]
            total += np.where(tf > 0, idf[t] * qtf * self._saturation(tf, norm[cand]), 0.0)
        keep = (tfs > 0).any(axis=1)
        return cand[keep].astype(np.int64), total[keep]

    def _context(self, term_id: int, n_slots: int) -> ContextPostings:
        c = self._ctx.get(term_id)
        if c is None:
            p = self._postings[term_id]
            slots = p.slots[: p.n]
            c = self._ctx[term_id] = ContextPostings.build(slots, p.tfs[: p.n].astype(np.float64), self._nb[slots],
                                                           n_slots)
        return c

    def top_k(self, query_terms: Mapping[int, int], k: int, allowed: np.ndarray | None = None,
              sources: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``top_k(*score(query_terms, allowed, sources), k)``, exactly: see ``search``."""
        slots, scores, _ = self.search(query_terms, k, allowed, sources)
        return slots, scores

    def search(self, query_terms: Mapping[int, int], k: int, allowed: np.ndarray | None = None,
               sources: np.ndarray | None = None, include: np.ndarray | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top k (slots, scores) of ``score``, exactly (same documents, same scores, same
        order), and the scores of the sorted slots ``include`` (0 where no term matches),
        without scoring every posting when a bound proves it needless.

        MaxScore pruning: a term adds to a document at least 0 (its idf is positive) and at
        most ``idf * qtf * f(max count, least length norm)``. Taking the query's rarest terms
        first, once the best k documents found through them score more than every other term
        could add together, no document without one of those terms can enter the top k; the
        other terms' counts are looked up in their context postings for the candidates that
        still could. Common terms' long postings are then never scored in full. When the bound
        does not bite, this is ``score`` plus ``top_k``."""
        include = np.zeros(0, np.int64) if include is None else np.asarray(include, np.int64)
        terms = self._terms(query_terms)
        pruned = None if k <= 0 or not self._spreads or len(terms) < 2 else self._pruned(
            terms, k, allowed, sources, include)
        if pruned is not None:
            return pruned
        slots, scores = self.score(query_terms, allowed, sources)
        return (*top_k(slots, scores, k), scores_at(slots, scores, include))

    # Below this many context postings a query is scored in full: on the scale benchmark's
    # queries pruning pays at 1M memories, where a query reads many postings, and gains nothing
    # at 100k (benchmarks/history/scale.md, "What made it fast").
    _PRUNE_MIN = 100_000

    def _norm_min(self) -> float:
        """The least length norm of a live document (the bound's denominator), per version."""
        cache = self._norm_min_cache
        if cache is None or cache[0] != self._version:
            live = self._norm()[: len(self._alive)][self._alive]
            cache = self._norm_min_cache = (self._version, float(live.min()) if len(live) else 0.0)
        return cache[1]

    def _pruned(self, terms: list[tuple[int, int]], k: int, allowed: np.ndarray | None,
                sources: np.ndarray | None, include: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``search``'s answer found by pruning, or None where pruning cannot prove it."""
        if self._n_docs == 0:
            return None
        n_slots = len(self._alive)
        ctx = [self._context(t, n_slots) for t, _ in terms]
        total = sum(c.n for c in ctx)
        if total < self._PRUNE_MIN:
            return None
        idf = self._idf()
        norm = self._norm()
        least = self._norm_min()
        order = sorted(range(len(terms)), key=lambda i: ctx[i].n)  # rarest first
        bounds = []
        for i in order:
            m = ctx[i].max_own + self.context_weight * ctx[i].max_nbr
            bounds.append(idf[terms[i][0]] * terms[i][1] * float(self._saturation(m, least)))
        part_slots: list[np.ndarray] = []
        part_scores: list[np.ndarray] = []
        for j in range(1, len(order)):
            i = order[j - 1]
            slots, sat = self._context_saturation(terms[i][0], n_slots, norm)
            if sources is not None:
                keep = sources[slots]
                slots, sat = slots[keep], sat[keep]
            part_slots.append(slots)
            part_scores.append(idf[terms[i][0]] * terms[i][1] * sat)
            if 2 * sum(len(p) for p in part_slots) > total:
                return None  # most of the postings are read anyway: nothing to gain
            if j & (j - 1) and j != len(order) - 1:
                # The threshold is tried after 1, 2, 4, 8... terms (and the last): a query of
                # many terms (a dialogue) would otherwise merge and look up every term per term.
                continue
            cand, partial = _sum_runs(part_slots, part_scores)
            if allowed is not None:
                keep = allowed[cand]
                cand, partial = cand[keep], partial[keep]
            if len(cand) < k:
                continue  # not k documents yet to set a threshold with
            seeds = np.sort(top_k(cand, partial, k)[0])
            theta = float(np.sort(self._lookup_scores(terms, ctx, seeds))[-k])
            margin = theta - 1e-9 * max(1.0, abs(theta))  # rounding between bounds and exact sums
            if sum(bounds[j:]) >= margin:
                continue  # a document with none of these terms could still make the top k
            # The candidates that could still reach theta with every other term at its bound;
            # the other terms' counts are looked up for them, rarest first, dropping at each
            # step those that can no longer make it.
            for jj in range(j, len(order)):
                keep = partial + sum(bounds[jj:]) >= margin
                cand, partial = cand[keep], partial[keep]
                partial = partial + self._lookup_scores([terms[order[jj]]], [ctx[order[jj]]], cand)
            cand = cand[partial >= margin]
            return (*top_k(cand.astype(np.int64), self._lookup_scores(terms, ctx, cand), k),
                    self._lookup_scores(terms, ctx, include))
        return None

    def _lookup_scores(self, terms: list[tuple[int, int]], ctx: list[ContextPostings],
                       cand: np.ndarray) -> np.ndarray:
        """The full scores of the sorted slots ``cand``, each term's counts looked up in its
        context postings by bisection; the formula and the order of the sum over terms are
        those of ``score``, so the values are equal bit for bit."""
        idf = self._idf()
        norm, w = self._norm()[cand], self.context_weight
        want = cand.astype(np.int32)  # the postings' dtype: bisection then copies nothing
        total = np.zeros(len(cand))
        for (t, qtf), c in zip(terms, ctx):
            slots, own, nbr = c.view()
            if not len(slots):
                continue
            i, found = _locate(slots, want)
            tfs = own[i].astype(np.float64) + w * nbr[i].astype(np.float64)
            total += np.where(found, idf[t] * qtf * self._saturation(tfs, norm), 0.0)
        return total


def _sum_runs(runs: list[np.ndarray], values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique slots, summed values) of several sorted slot runs: a stable sort merges
    sorted runs in near-linear time, where np.unique sorts from scratch."""
    slots = np.concatenate(runs)
    if len(runs) > 1:
        order = np.argsort(slots, kind="stable")
        slots, vals = slots[order], np.concatenate(values)[order]
    else:
        vals = values[0]
    if not len(slots):
        return slots, vals
    starts = np.flatnonzero(np.concatenate([[True], slots[1:] != slots[:-1]]))
    return slots[starts], np.add.reduceat(vals, starts)


def scores_at(slots: np.ndarray, scores: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The scores of ``wanted`` slots in a (sorted slots, scores) result, 0 where absent."""
    if not len(slots):
        return np.zeros(len(wanted))
    i, found = _locate(slots, wanted)
    return np.where(found, scores[i], 0.0)


def _locate(slots: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each wanted slot, by bisection in the non-empty sorted ``slots``: an index (its
    own where present, any valid one otherwise) and whether it is present."""
    i = np.minimum(np.searchsorted(slots, wanted), len(slots) - 1)
    return i, slots[i] == wanted


def top_k(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (ids, scores), best first; ties broken by id for determinism."""
    if k <= 0 or not len(ids):
        return ids[:0], scores[:0]
    if len(ids) > k:
        part = np.argpartition(-scores, k - 1)[:k]
        # argpartition picks any of the ids tied with the k-th score: keep them all and let
        # the sort below choose by id, so the answer does not depend on the input's order.
        keep = np.flatnonzero(scores >= scores[part].min())
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))[:k]
    return ids[order], scores[order]


def count_terms(term_ids: Iterable[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for t in term_ids:
        counts[t] = counts.get(t, 0) + 1
    return counts

