"""Everything the embedded store keeps in memory to answer searches: one object, no SQL.

A ``MemoryIndex`` numbers the memories it holds with *slots* (never reused: a deleted
memory's slot stays a dead placeholder, a re-indexed one gets a new slot) and keeps, per
slot, its id and row number (``seq``), its BM25 postings with their session context, its
vector, its filter columns, its rank fields and its place in its session. It also holds
the term -> term id map the postings are keyed by.

The store that owns it (``store/sqlite.py``) writes rows, runs transactions and
migrations, and calls the index only with what it has committed: ``add`` (new rows),
``update`` (records whose indexed text did not change), ``remove`` (deleted rows),
``load`` (every row at once, column-wise, when a store opens). ``state()``/``restore()``
turn the whole index into arrays and back (``store/snapshot.py`` writes them to a file).
Nothing here can fail on bad input: the store validated and committed it first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..filters import Filter
from ..records import KnowledgeChunk
from ..scoring import RankFields
from .bm25 import BM25Index, scores_at, top_k
from .columns import AttributeColumns, Selection
from .config import IndexConfig
from .context import SessionOrder
from .rank_columns import RankColumns
from .turns import lends_context
from .vectors import VectorIndex, matvec

__all__ = ["IndexEntry", "MemoryIndex", "lex_counts"]


@dataclass
class IndexEntry:
    """One committed row as the index takes it: the record, its vector, its term counts
    (term id -> count) and its row number in the store."""

    chunk: KnowledgeChunk
    vector: np.ndarray
    term_counts: dict[int, int]
    seq: int


def lex_counts(blob: bytes) -> dict[int, int]:
    """Term counts from their stored form: (term id, count) int32 pairs."""
    pairs = np.frombuffer(blob, np.int32).reshape(-1, 2)
    return dict(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=False))


class MemoryIndex:
    """Slots, ids, term ids, BM25 (with session context), vectors, filter and rank columns,
    session order. ``make_vectors(dim)`` builds the vector index (tests pass one with other
    limits)."""

    def __init__(self, config: IndexConfig, make_vectors: Callable[[int], VectorIndex] | None = None) -> None:
        self.config = config
        self._make_vectors: Callable[[int], VectorIndex] = make_vectors or (lambda dim: VectorIndex(dim))
        self.clear()

    def clear(self) -> None:
        """Empty (before a load, or to start a failed one again)."""
        cfg = self.config
        self._mask_cache: tuple[tuple[Any, ...], Selection] | None = None  # see selection()
        self.term_ids: dict[str, int] = {}
        self.slot_of: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.seqs: list[int] = []
        self.lex = BM25Index(cfg.k1, cfg.b, radius=cfg.context_radius,
                             context_weight=cfg.lexical_context_weight)
        self.order = SessionOrder(cfg.context_radius)
        self.vec: VectorIndex | None = None
        self.cols = AttributeColumns()
        self.rank = RankColumns()

    # -- what is held -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.slot_of)

    def __contains__(self, cid: object) -> bool:
        return cid in self.slot_of

    @property
    def dim(self) -> int | None:
        return None if self.vec is None else self.vec.dim

    def seq_of(self, cid: str) -> int | None:
        slot = self.slot_of.get(cid)
        return None if slot is None else self.seqs[slot]

    def contains(self, ids: Iterable[str]) -> set[str]:
        return {i for i in ids if i in self.slot_of}

    def present(self, ids: Iterable[str]) -> list[str]:
        """``ids`` held, each once, in order."""
        return [i for i in dict.fromkeys(ids) if i in self.slot_of]

    # -- terms ----------------------------------------------------------------------
    def add_terms(self, new: Mapping[str, int]) -> None:
        self.term_ids.update(new)

    def drop_terms(self, terms: Iterable[str]) -> None:
        for t in terms:
            self.term_ids.pop(t, None)

    # -- writes (of committed rows) -------------------------------------------------
    def _order_key(self, slot: int, c: KnowledgeChunk) -> tuple[int, int] | None:
        if not lends_context(c, self.config.session_context):
            return None
        return (int(self.cols.arrays["user"][slot]), int(self.cols.arrays["session"][slot]))

    def _refresh_neighbours(self, slots: Iterable[int]) -> None:
        for slot in set(slots):
            self.lex.set_neighbours(slot, self.order.neighbours(slot))

    def _set_columns(self, slot: int, c: KnowledgeChunk) -> None:
        self.cols.set(slot, c.user_id, c.agent_id, c.session_id, c.timestamp.timestamp(), c.status.value,
                      c.processed_content.type.value if c.processed_content else "text",
                      c.intent.value if c.intent else None, c.tags, c.entities, c.tier.value)
        self.rank.set(slot, c)

    def add(self, entries: Sequence[IndexEntry]) -> None:
        """Index new rows (ids not held), each in a new slot."""
        if not entries:
            return
        dim = len(entries[0].vector)
        if self.vec is None or (self.vec.dim != dim and self.vec.n_alive == 0):
            # First rows, or every old vector was just replaced by a re-embed.
            self.vec = self._make_vectors(dim)
            self._mask_cache = None
            self.vec.set(np.arange(len(self.ids)), np.zeros((len(self.ids), dim), np.float32))
            for s in range(len(self.ids)):
                self.vec.remove(s)
        first = len(self.ids)
        slots = np.arange(first, first + len(entries))
        self.vec.set(slots, np.stack([np.asarray(e.vector, np.float32) for e in entries]))
        self.vec.maybe_extend_graph()  # a full tail joins the graph now, not at some search
        touched: list[int] = []
        for slot, e in zip(slots.tolist(), entries, strict=False):
            c = e.chunk
            self.ids.append(c.id)
            self.seqs.append(e.seq)
            self.slot_of[c.id] = slot
            self.lex.add(slot, e.term_counts)
            self._set_columns(slot, c)
            touched += self.order.add(slot, self._order_key(slot, c), c.timestamp.timestamp(), e.seq)
        self._refresh_neighbours(touched)

    def update(self, chunks: Sequence[KnowledgeChunk]) -> None:
        """Rewritten records (held, same text): their columns, rank fields and session place."""
        touched: list[int] = []
        cols = self.cols
        for c in chunks:
            slot = self.slot_of[c.id]
            before = (cols.arrays["user"][slot], cols.arrays["session"][slot], cols.ts[slot], self.order.placed(slot))
            self._set_columns(slot, c)
            after = (cols.arrays["user"][slot], cols.arrays["session"][slot], cols.ts[slot],
                     lends_context(c, self.config.session_context))
            if before == after:
                continue  # same place in the same session (e.g. counts or tags changed): no neighbour moved
            touched.append(slot)  # its own neighbours change too (e.g. it left its session)
            touched += self.order.remove(slot)
            touched += self.order.add(slot, self._order_key(slot, c), c.timestamp.timestamp(), self.seqs[slot])
        self._refresh_neighbours(touched)

    def remove(self, term_counts: Mapping[str, Mapping[int, int]]) -> list[str]:
        """Drop held ids (``id -> its term counts``, as indexed); return the ids dropped."""
        touched: list[int] = []
        gone = []
        assert self.vec is not None or not self.slot_of
        for cid, counts in term_counts.items():
            slot = self.slot_of.pop(cid, None)
            if slot is None:
                continue
            gone.append(cid)
            self.ids[slot] = None
            self.lex.remove(slot, counts)
            self.vec.remove(slot)  # type: ignore[union-attr]
            self.cols.clear(slot)
            self.rank.clear(slot)
            touched += self.order.remove(slot)
        self._refresh_neighbours(s for s in touched if self.ids[s] is not None)
        return gone

    def drop_graph(self) -> None:
        """Drop the HNSW graph (it keeps deleted points), e.g. after forgetting a user."""
        if self.vec is not None:
            self.vec.drop_graph()

    # -- bulk load ------------------------------------------------------------------
    def load(self, seqs: Sequence[int], ids: Sequence[str], users: Sequence[str], agents: Sequence[str | None],
             sessions: Sequence[str | None], tss: Sequence[float], statuses: Sequence[str], ctypes: Sequence[str],
             intents: Sequence[str | None], tags: Sequence[str], ents: Sequence[str], lexes: Sequence[bytes],
             vecs: Sequence[bytes], tiers: Sequence[str] | None = None, turns: Sequence[int] | None = None, *,
             graph: Path | None = None, saved: np.ndarray | None = None) -> None:
        """Build the index from every row's columns at once (fast at 1M rows), into an empty index.

        ``turns`` says which rows take part in session context (``turns.lends_context`` when
        they were written; None: every row with a session).

        ``saved`` is the slot -> seq numbering of the HNSW graph at ``graph``: the slots keep
        it so the graph can be reused as is."""
        if not seqs:
            return
        dim = len(vecs[0]) // 4
        self.vec = self._make_vectors(dim)
        seq_arr = np.asarray(seqs, np.int64)
        if saved is None:
            slots = np.arange(len(seqs), dtype=np.int64)
            self.seqs = list(seqs)
        else:
            pos = {int(s): i for i, s in enumerate(saved.tolist())}
            extra = iter(range(len(saved), len(saved) + len(seqs)))
            slots = np.fromiter((pos[q] if q in pos else next(extra) for q in seqs), np.int64, len(seqs))
            self.seqs = saved.tolist() + [-1] * (int(slots.max()) + 1 - len(saved))
            for q, sl in zip(seqs, slots.tolist(), strict=False):
                self.seqs[sl] = q
        n_slots = len(self.seqs)
        self.ids = [None] * n_slots
        for cid, sl in zip(ids, slots.tolist(), strict=False):
            self.ids[sl] = cid
        self.slot_of = dict(zip(ids, slots.tolist(), strict=False))
        # Vectors: one buffer, one reshape. Slots of deleted rows stay dead placeholders.
        mat = np.zeros((n_slots, dim), np.float32)
        mat[slots] = np.frombuffer(b"".join(vecs), np.float32).reshape(len(vecs), dim)
        self.vec.set(np.arange(n_slots), mat)
        del mat
        for sl in np.setdiff1d(np.arange(n_slots), slots).tolist():
            self.vec.remove(sl)
        # Postings: (term, tf) pairs of every row, tagged with the row's slot.
        counts = np.fromiter((len(b) // 8 for b in lexes), np.int64, len(lexes))
        pairs = np.frombuffer(b"".join(lexes), np.int32).reshape(-1, 2)
        pair_slots = np.repeat(slots, counts).astype(np.int32)
        lens = np.bincount(np.repeat(np.arange(len(slots)), counts), weights=pairs[:, 1], minlength=len(slots))
        self.lex.add_bulk(pair_slots, pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.float32), slots,
                          lens.astype(np.int64))
        # Filter columns.
        self.cols.set_bulk(slots, users, agents, sessions, np.asarray(tss, np.float64), statuses, ctypes, intents,
                           tags, ents, tiers)
        # Session neighbourhoods, computed for all sessions at once.
        user_codes = self.cols.arrays["user"][slots].astype(np.int64)
        session_codes = self.cols.arrays["session"][slots].astype(np.int64)
        if turns is not None:
            session_codes = np.where(np.asarray(turns, bool), session_codes, 0)
        nb = self.order.add_bulk(slots, user_codes, session_codes, np.asarray(tss, np.float64), seq_arr)
        self.lex.set_neighbours_bulk(slots, nb)
        if graph is not None and saved is not None:
            self.vec.load_graph(graph, np.asarray(self.seqs, np.int64))

    # -- state (for the snapshot file) ----------------------------------------------
    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able header parts, named arrays) that ``restore`` rebuilds this index from.
        The HNSW graph is not included: it is saved on its own (``save_graph``)."""
        assert self.vec is not None
        n_slots = len(self.ids)
        lex_arrays, lex_ints = self.lex.state()
        col_arrays, col_extra = self.cols.state(n_slots)
        arrays: dict[str, np.ndarray] = {
            "seqs": np.asarray(self.seqs, np.int64),
            **{f"lex_{k}": v for k, v in lex_arrays.items()},
            **{f"ord_{k}": v for k, v in self.order.state().items()},
            **col_arrays,
            **{f"rank_{k}": v for k, v in self.rank.state(n_slots).items()},
            **self.vec.state(),
        }
        header = {"dim": self.vec.dim, "ids": self.ids, "term_ids": self.term_ids, "lex": lex_ints,
                  "cols": col_extra}
        return header, arrays

    def restore(self, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray], graph: Path | None) -> bool:
        """Adopt a ``state()``; False (and this index unchanged) when its graph at ``graph`` is
        missing or does not match. Call on an empty index."""
        seqs = arrays["seqs"]
        vec = self._make_vectors(int(header["dim"]))
        if not vec.restore({k: v for k, v in arrays.items() if k.startswith("vec_")}, graph, seqs):
            return False
        ids: list[str | None] = header["ids"]
        self.vec = vec
        self.ids = ids
        self.seqs = seqs.tolist()
        self.slot_of = dict(zip(ids, range(len(ids)), strict=False))  # type: ignore[arg-type]  # (faster than filtering)
        self.slot_of.pop(None, None)  # type: ignore[call-overload]  # deleted slots
        self.term_ids = dict(header["term_ids"])
        self.lex.restore({k[4:]: v for k, v in arrays.items() if k.startswith("lex_")}, dict(header["lex"]))
        self.order.restore({k[4:]: v for k, v in arrays.items() if k.startswith("ord_")})
        self.cols.restore({k: v for k, v in arrays.items() if k.startswith("col_")}, header["cols"])
        self.rank.restore({k[5:]: v for k, v in arrays.items() if k.startswith("rank_")})
        self._mask_cache = None
        return True

    @property
    def has_graph(self) -> bool:
        return self.vec is not None and self.vec.has_graph

    def save_graph(self, path: Path) -> None:
        if self.vec is not None:
            self.vec.save_graph(path, np.asarray(self.seqs, np.int64))

    # -- reads ----------------------------------------------------------------------
    def _alive(self) -> np.ndarray:
        return self.vec.alive_mask() if self.vec is not None else np.zeros(0, bool)

    def selection(self, flt: Filter) -> Selection:
        """What the filter allows (see Selection). A search asks twice (dense and lexical
        side), so the last one is kept until a slot lives, dies or changes its attributes."""
        alive = self._alive()
        if self.vec is None:
            return Selection(None, self.cols.mask(flt, alive, self.slot_of), len(alive))
        key = (flt, self.vec._n, self.vec.n_alive, self.cols.version)
        cached = self._mask_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        few = self.cols.slots(flt, alive, self.slot_of)
        sel = Selection(few, None if few is not None else self.cols.mask(flt, alive, self.slot_of), len(alive))
        self._mask_cache = (key, sel)
        return sel

    def forget_selection(self) -> None:
        """Drop the kept selection (tests that time filters)."""
        self._mask_cache = None

    def mask(self, flt: Filter) -> np.ndarray:
        """The filter's boolean mask over slots (read-only)."""
        return self.selection(flt).mask()

    def _scope(self, flt: Filter) -> np.ndarray | None:
        """The user/session part of the filter as a BM25 pre-filter, None when it holds
        every live memory (pre-filtering would then only cost time)."""
        scope = self.cols.scope_mask(flt, self._alive())
        if scope is not None and int(np.count_nonzero(scope)) == self.lex.n_docs:
            return None
        return scope

    def scan_ids(self, flt: Filter, *, order: str = "timestamp", limit: int | None = None,
                 descending: bool = False) -> list[str]:
        slots = np.flatnonzero(self.mask(flt))
        if order == "timestamp":
            keys = self.cols.ts[slots]
            slots = slots[np.lexsort((slots, keys))]
        if descending:
            slots = slots[::-1]
        if limit is not None:
            slots = slots[: max(limit, 0)]
        return [self.ids[s] for s in slots.tolist()]

    def count(self, flt: Filter | None = None) -> int:
        if flt is None:
            return len(self.slot_of)
        return int(self.mask(flt).sum())

    def matching(self, ids: Sequence[str], flt: Filter) -> set[str]:
        mask = self.mask(flt)
        return {i for i in ids if i in self.slot_of and mask[self.slot_of[i]]}

    def status_counts(self) -> dict[str, int]:
        return self.cols.status_counts(self._alive())

    def rank_fields(self, ids: Sequence[str],
                    read: Callable[[list[str]], Iterable[KnowledgeChunk]]) -> dict[str, RankFields]:
        """``RankFields`` of held ids; ``read(ids)`` gives the records of slots never filled
        (not written since the index was built from the rows), read once."""
        slots = {i: s for i in dict.fromkeys(ids) if (s := self.slot_of.get(i)) is not None}
        unknown = self.rank.unknown(list(slots.values()))
        if unknown:
            names = list(slots)
            for c in read([names[j] for j in unknown]):
                if c.id in self.slot_of:
                    self.rank.set(self.slot_of[c.id], c)
        return dict(zip(slots, self.rank.fields(list(slots.values())), strict=False))

    def lexical_search(self, terms: Mapping[str, int], flt: Filter, k: int, *,
                       include: Sequence[str] = ()) -> list[tuple[str, float]]:
        qt = {self.term_ids[t]: c for t, c in terms.items() if t in self.term_ids}
        if not self.slot_of:
            return []
        sel = self.selection(flt)
        # The other retriever's candidates, to be scored too (0 without any query term).
        found = np.fromiter((s for cid in include if (s := self.slot_of.get(cid)) is not None), np.int64)
        extra = np.unique(found[sel.allows(found)])
        if not qt:
            top_slots, top_scores, extra_scores = np.zeros(0, np.int64), np.zeros(0), np.zeros(len(extra))
        elif sel.slots is not None:  # a few users
            if self.lex.prefers_documents(qt, len(sel.slots)):
                slots, scores = self.lex.score_documents(qt, sel.slots)  # no pass over every slot
            else:  # their postings are few: nothing to prune
                slots, scores = self.lex.score(qt, sel.mask(), sel.scope(lambda: self._scope(flt)))
            top_slots, top_scores = top_k(slots, scores, k)
            extra_scores = scores_at(slots, scores, extra)
        else:
            top_slots, top_scores, extra_scores = self.lex.search(
                qt, k, sel.mask(), sel.scope(lambda: self._scope(flt)), extra)
        out = {self.ids[s]: float(sc) for s, sc in zip(top_slots.tolist(), top_scores.tolist(), strict=False)}
        for s, sc in zip(extra.tolist(), extra_scores.tolist(), strict=False):
            out.setdefault(self.ids[s], float(sc))
        return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))

    def term_idf(self, terms: Iterable[str]) -> tuple[dict[str, float], float]:
        """``SearchIndex.term_idf``: each term's idf as ``lexical_search`` weighs it (those no
        live record holds left out), and the idf of a term one record holds."""
        asked = {t: self.term_ids[t] for t in terms if t in self.term_ids}
        idf = {t: w for t, w in zip(asked, self.lex.idf(asked.values()), strict=True) if w > 0.0}
        return idf, self.lex.rare_idf()

    def vector_search(self, vector: np.ndarray, flt: Filter, k: int, *, exact: bool = False) -> list[tuple[str, float]]:
        if self.vec is None or not self.slot_of:
            return []
        sel, query = self.selection(flt), np.asarray(vector, np.float32)
        if sel.slots is not None and (exact or len(sel.slots) <= self.vec.exact_limit):
            slots, scores = self.vec.search_slots(query, k, sel.slots)
        else:
            slots, scores = self.vec.search(query, k, sel.mask(), exact=exact)
        return [(self.ids[s], float(sc)) for s, sc in zip(slots.tolist(), scores.tolist(), strict=False)]

    def own_vector_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's own vector (no neighbours: what relevance reads)."""
        slots = np.array([self.slot_of[i] for i in ids if i in self.slot_of], np.int64)
        if self.vec is None or not len(slots):
            return {}
        scores = matvec(self.vec.vectors(slots).astype(np.float64), np.asarray(vector, np.float64))
        return {self.ids[s]: float(x) for s, x in zip(slots.tolist(), scores.tolist(), strict=False)}

    def vector_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each memory's context vector (own + weighted neighbours)."""
        slots = np.array([self.slot_of[i] for i in ids if i in self.slot_of], np.int64)
        if self.vec is None or not len(slots):
            return {}
        mat = self.vec.vectors(slots).astype(np.float64)
        w = self.config.vector_context_weight
        if w and self.config.context_radius:
            nb = self.lex.neighbours(slots)
            valid = nb >= 0
            nvec = self.vec.vectors(np.where(valid, nb, 0).ravel()).reshape(*nb.shape, -1)
            mat = mat + w * np.einsum("ijk,ij->ik", nvec, valid.astype(nvec.dtype))
            mat /= np.maximum(np.sqrt(np.einsum("ij,ij->i", mat, mat))[:, None], 1e-12)
        scores = matvec(mat, np.asarray(vector, np.float64))
        return {self.ids[s]: float(x) for s, x in zip(slots.tolist(), scores.tolist(), strict=False)}

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if self.vec is None:
            return {}
        held = [i for i in ids if i in self.slot_of]
        # one gather for all (a search's relevance reads its ~100 candidates' vectors), each row
        # a copy of its own, as one vector read alone is
        rows = self.vec.vectors(np.fromiter((self.slot_of[i] for i in held), np.int64, len(held)))
        return {i: row.copy() for i, row in zip(held, rows, strict=True)}

    # -- integrity ------------------------------------------------------------------
    def verify(self, rows: Sequence[tuple[str, bytes, bytes]], known_terms: set[int]) -> list[str]:
        """Problems of this index against every committed row ``(id, lex, vector)``, given the
        term ids the store knows."""
        problems: list[str] = []
        ids = {cid for cid, _, _ in rows}
        if ids != set(self.slot_of):
            problems.append(f"index ids differ from records: {len(ids - set(self.slot_of))} missing, "
                            f"{len(set(self.slot_of) - ids)} extra")
        df: dict[int, int] = {}
        postings = self.lex._postings
        for cid, lex, vec in rows:
            slot = self.slot_of.get(cid)
            if slot is None:
                continue
            pairs = np.frombuffer(lex, np.int32).reshape(-1, 2)
            for tid, tf in pairs.tolist():
                df[tid] = df.get(tid, 0) + 1
                if tid not in known_terms:
                    problems.append(f"{cid}: term id {tid} missing from the terms table")
                p = postings[tid] if tid < len(postings) else None
                i = -1 if p is None else int(np.searchsorted(p.slots[: p.n], slot))
                if p is None or i >= p.n or p.slots[i] != slot or p.tfs[i] != tf:
                    problems.append(f"{cid}: posting for term {tid} missing or wrong")
            if self.vec is None or not np.array_equal(self.vec.get(slot), np.frombuffer(vec, np.float32)):
                problems.append(f"{cid}: vector differs from the record")
        live_df = {t: int(c) for t, c in enumerate(self.lex._df[: len(postings)].tolist()) if c}
        if live_df != df:
            problems.append("document frequencies differ from the records")
        if self.lex.n_docs != len(rows) or (self.vec is not None and self.vec.n_alive != len(rows)):
            problems.append("live document counts differ from the records")
        stray = {t for t, i in self.term_ids.items() if i not in known_terms}
        if stray:
            problems.append(f"{len(stray)} indexed terms are missing from the terms table")
        return problems
