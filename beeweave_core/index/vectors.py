"""Dense vectors over integer slots: an exact scan for small candidate sets and a
FAISS HNSW graph for large ones.

Vectors are L2-normalised, so inner product is cosine similarity. Deleted slots are
tombstones (FAISS HNSW cannot remove points); searches pass the live/filter mask to
FAISS as an ``IDSelectorBitmap``, so a filter restricts the search itself instead of
trimming its output, and a selective filter costs no recall.

Slots ``[0, graph_n)`` are in the graph and their vectors live only in FAISS's storage
(read through a numpy view, never copied: a second copy would cost 1.5 KB per memory).
Newer slots wait in a *tail* array that every search scans exactly, and join the graph
in batches of ``tail_limit``: one insert never pays for a graph insertion, and a bulk
load builds the graph as it goes instead of at the first search.

``background=True`` (a PostgreSQL store's local index, loaded whole by a process's first
search) builds the first graph in a thread instead: until it is built, searches that need
it scan exactly, so a short-lived process answers without waiting for a graph it may never
use. The graph is taken in by the next search or add once built (their caller's lock
serialises them); slots added meanwhile stay in the tail.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from .bm25 import top_k

__all__ = ["VectorIndex", "normalize", "matvec"]

# Below this many candidates an exact scan is both faster and exact.
EXACT_LIMIT = 10_000
# Vectors not yet in the graph; few enough that an exact scan of them costs little beside a walk.
TAIL_LIMIT = 2_048


# numpy >= 2.0: a ufunc whose inner loop is a SIMD dot product, on one thread.
_vecdot = getattr(np, "vecdot", None)


def matvec(mat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """mat @ vec without BLAS threads: one query is too small to split, and a threaded
    BLAS on a busy machine has a long tail, one core does not. ``np.vecdot`` is faster than
    ``einsum`` (benchmarks/history/scale.md, "The exact scan's kernel"); older numpy takes
    ``einsum``."""
    vec = np.asarray(vec, dtype=mat.dtype)
    if _vecdot is not None:
        return _vecdot(mat, vec)
    return np.einsum("ij,j->i", mat, vec)


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


class _GraphBuild:
    """A FAISS graph of some vectors, built in a thread (``VectorIndex(background=True)``)."""

    def __init__(self, vectors: np.ndarray, hnsw_m: int, ef_construction: int) -> None:
        self.n = len(vectors)
        self.graph: Any = None  # the built graph; None until built, or if the build failed
        self._thread = threading.Thread(target=self._build, args=(vectors, hnsw_m, ef_construction), daemon=True,
                                        name="beeweave-graph")
        self._thread.start()

    def _build(self, vectors: np.ndarray, hnsw_m: int, ef_construction: int) -> None:
        import faiss

        graph = faiss.IndexHNSWFlat(vectors.shape[1], hnsw_m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = ef_construction
        graph.add(np.ascontiguousarray(vectors))
        self.graph = graph

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> None:
        self._thread.join()


class VectorIndex:
    def __init__(self, dim: int, *, hnsw_m: int = 32, ef_construction: int = 80, ef_search: int | None = None,
                 exact_limit: int = EXACT_LIMIT, tail_limit: int | None = None, background: bool = False) -> None:
        self.dim = dim
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self.exact_limit = exact_limit
        self.tail_limit = max(1, min(TAIL_LIMIT, exact_limit)) if tail_limit is None else tail_limit
        self._tail = np.zeros((0, dim), dtype=np.float32)  # vectors of slots [_hnsw_n, _n)
        self._n = 0  # slots used (live and dead)
        self._alive = np.zeros(0, dtype=bool)
        self._n_alive = 0
        self._hnsw: Any = None  # faiss.IndexHNSWFlat over slots [0, _hnsw_n)
        self._hnsw_n = 0
        self._graph_vecs = np.zeros((0, dim), dtype=np.float32)  # view of the graph's storage
        self.background = background
        self._pending: _GraphBuild | None = None  # the first graph, being built (background)

    @property
    def has_graph(self) -> bool:
        return self._hnsw is not None

    @property
    def n_alive(self) -> int:
        return self._n_alive

    @property
    def graph_size(self) -> int:
        return self._hnsw_n

    def _grow(self, need: int) -> None:
        if need > len(self._alive):
            cap = max(need, 2 * len(self._alive), 64)
            alive = np.zeros(cap, dtype=bool)
            alive[: self._n] = self._alive[: self._n]
            self._alive = alive
        rows = need - self._hnsw_n
        if rows > len(self._tail):
            cap = max(rows, 2 * len(self._tail), 64)
            tail = np.zeros((cap, self.dim), dtype=np.float32)
            tail[: self._n - self._hnsw_n] = self._tail[: self._n - self._hnsw_n]
            self._tail = tail

    def set(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        """Store vectors at the given slots (new slots at or after the end)."""
        if not len(slots):
            return
        if int(slots.min()) < self._hnsw_n:
            raise ValueError("a slot already in the HNSW graph cannot be overwritten")
        self._grow(int(slots.max()) + 1)
        self._tail[slots - self._hnsw_n] = vectors
        newly = ~self._alive[slots]
        self._alive[slots] = True
        self._n_alive += int(newly.sum())
        self._n = max(self._n, int(slots.max()) + 1)

    def maybe_extend_graph(self) -> None:
        """Move a full tail into the graph once the index is large enough to need one."""
        if self._n - self._hnsw_n >= self.tail_limit and self._n_alive > self.exact_limit:
            self._extend()

    def _extend(self) -> bool:
        """Bring the graph up to the tail; with ``background``, a first graph is built in a
        thread instead: False while it is (searches then scan exactly)."""
        if self._building():
            return False
        if self.background and self._hnsw is None:
            # The tail's first _n rows never change but for a removed slot's zeros, which the
            # graph may or may not see: the slot is dead either way.
            self._pending = _GraphBuild(self._tail[: self._n], self.hnsw_m, self.ef_construction)
            return False
        self._sync_hnsw()
        return True

    def _building(self) -> bool:
        """Whether a first graph is being built in the background; a built one is taken in."""
        job = self._pending
        if job is None:
            return False
        if not job.done():
            return True
        self._pending = None
        if job.graph is not None and self._hnsw is None:
            self._hnsw, self._hnsw_n = job.graph, job.n
            self._tail = self._tail[job.n : max(self._n, job.n + 64)].copy()
            self._refresh_view()
        return False

    def wait_for_graph(self) -> None:
        """Wait for a first graph being built in the background and take it in (a benchmark
        or test; the caller holds whatever lock serialises this index)."""
        if self._pending is not None:
            self._pending.join()
            self._building()

    def remove(self, slot: int) -> None:
        if slot < self._n and self._alive[slot]:
            self._alive[slot] = False
            self._n_alive -= 1
            if slot >= self._hnsw_n:
                self._tail[slot - self._hnsw_n] = 0  # a deleted vector leaves no copy (e.g. in a snapshot)

    def get(self, slot: int) -> np.ndarray:
        return self.vectors(np.array([slot]))[0].copy()

    def vectors(self, slots: np.ndarray) -> np.ndarray:
        slots = np.asarray(slots, np.int64)
        if not self._hnsw_n:
            return self._tail[slots]
        if len(slots) and int(slots.max()) < self._hnsw_n:  # all in the graph (usual): one gather
            return self._graph_vecs[slots]
        out = np.empty((len(slots), self.dim), np.float32)
        in_graph = slots < self._hnsw_n
        out[in_graph] = self._graph_vecs[slots[in_graph]]
        out[~in_graph] = self._tail[slots[~in_graph] - self._hnsw_n]
        return out

    def alive_mask(self) -> np.ndarray:
        return self._alive[: self._n]

    # -- search --------------------------------------------------------------
    def _exact(self, query: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """Cosine scores of the candidate slots (ascending)."""
        g = int(np.searchsorted(cand, self._hnsw_n))
        parts = []
        if g:
            graph_cand = cand[:g]
            if g > self._hnsw_n // 4:  # most of the graph: one pass over the storage, no gather
                parts.append(matvec(self._graph_vecs, query)[graph_cand])
            else:
                parts.append(matvec(self._graph_vecs[graph_cand], query))
        if g < len(cand):
            rows = self._n - self._hnsw_n
            if len(cand) - g == rows:  # the whole tail (candidates are unique): no gather copy
                parts.append(matvec(self._tail[:rows], query))
            else:
                parts.append(matvec(self._tail[cand[g:] - self._hnsw_n], query))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def search_slots(self, query: np.ndarray, k: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (slots, cosine scores) among the given sorted slots (dead ones skipped), by an
        exact scan: for a narrow filter whose slots the caller already has."""
        cand = np.asarray(cand, np.int64)
        cand = cand[cand < self._n]
        cand = cand[self._alive[cand]]
        if k <= 0 or not len(cand):
            return np.zeros(0, np.int64), np.zeros(0)
        return top_k(cand, self._exact(np.asarray(query, np.float32), cand).astype(np.float64), k)

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None,
               exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (slots, cosine scores) among live slots allowed by the mask."""
        if k <= 0 or self._n_alive == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        query = np.asarray(query, np.float32)
        self._building()
        mask = self._alive[: self._n]
        if allowed is not None and (exact or np.count_nonzero(allowed[: self._n]) <= self.exact_limit):
            # A narrow filter (one user of many): its few slots, without a pass over every slot
            # to combine masks.
            return self.search_slots(query, k, np.flatnonzero(allowed[: self._n]))
        if allowed is not None:
            mask = mask & allowed[: self._n]
            if not mask.any():
                return np.zeros(0, np.int64), np.zeros(0)
        elif exact or self._n_alive <= self.exact_limit:
            return self.search_slots(query, k, np.flatnonzero(mask))
        if self._n - self._hnsw_n > self.tail_limit and not self._extend():
            # e.g. a store reopened with many vectors not in its saved graph, or (background)
            # a first graph still being built: exact until it is in
            return self.search_slots(query, k, np.flatnonzero(mask))
        slots, scores = self._search_hnsw(query, k, mask[: self._hnsw_n])
        tail = self._hnsw_n + np.flatnonzero(mask[self._hnsw_n :])
        if len(tail):
            slots = np.concatenate([slots, tail])
            scores = np.concatenate([scores, self._exact(query, tail).astype(np.float64)])
        return top_k(slots, scores, k)

    def _sync_hnsw(self) -> None:
        import faiss

        if self._hnsw is None:
            self._hnsw = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._hnsw.hnsw.efConstruction = self.ef_construction
            self._hnsw_n = 0
        if self._hnsw_n < self._n:
            new = self._n - self._hnsw_n
            if not faiss.downcast_index(self._hnsw.storage).codes.is_owned:
                # A graph read from disk maps its vectors read-only (see _read_graph); FAISS aborts
                # the process if it is asked to grow them, so take an owned copy first (once).
                self._hnsw = faiss.deserialize_index(faiss.serialize_index(self._hnsw))
            self._hnsw.add(np.ascontiguousarray(self._tail[:new]))
            self._hnsw_n = self._n
            self._tail = np.zeros((64, self.dim), np.float32)
            self._refresh_view()

    def _refresh_view(self) -> None:
        """Re-take the numpy view of the graph's vectors: FAISS may move them when it grows."""
        import faiss

        storage = faiss.downcast_index(self._hnsw.storage)
        self._graph_vecs = faiss.rev_swig_ptr(storage.get_xb(), self._hnsw_n * self.dim).reshape(
            self._hnsw_n, self.dim)

    def drop_graph(self) -> None:
        """Forget the graph (e.g. so that deleted vectors leave no trace in it); every live
        vector goes back to the tail and the graph is rebuilt when a search needs it."""
        self._pending = None  # a graph being built would hold them too
        if self._hnsw is None:
            return
        vecs = self.vectors(np.arange(self._n))
        vecs[~self._alive[: self._n]] = 0  # tombstones keep no content
        self._hnsw, self._hnsw_n = None, 0
        self._graph_vecs = np.zeros((0, self.dim), np.float32)
        self._tail = vecs

    def effective_ef(self, k: int) -> int:
        """The HNSW search beam for k results over the whole graph: ``ef_search`` if set, else
        one per thousand vectors in the graph and at least 96. A fixed beam loses recall as the
        graph grows (benchmarks/RESULTS.md, "Scale: embedded store", dense search alone)."""
        base = self.ef_search if self.ef_search is not None else max(96, self._hnsw_n // 1000)
        return max(base, 2 * k)

    def _search_hnsw(self, query: np.ndarray, k: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        n_graph = int(mask.sum())
        if not n_graph:
            return np.zeros(0, np.int64), np.zeros(0)
        # The filter narrows what the graph walk may return, so widen the beam as it
        # gets more selective to keep recall.
        selectivity = n_graph / self._hnsw_n
        ef = int(min(4096, self.effective_ef(k) / max(selectivity, 0.05) ** 0.5))
        if n_graph == self._hnsw_n:  # every graph vector allowed (e.g. one user's whole store)
            params = faiss.SearchParametersHNSW(efSearch=ef)
        else:
            bits = np.packbits(mask, bitorder="little")
            sel = faiss.IDSelectorBitmap(self._hnsw_n, faiss.swig_ptr(bits))
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=ef)
        scores, ids = self._hnsw.search(query.reshape(1, -1), k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float64)

    # -- snapshot (see store/snapshot.py) ---------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Everything but the graph, which is saved on its own (``save_graph``)."""
        return {"vec_alive": self._alive[: self._n], "vec_tail": self._tail[: self._n - self._hnsw_n],
                "vec_graph_n": np.array([self._hnsw_n], np.int64)}

    def restore(self, st: dict[str, np.ndarray], graph: Path | None, slot_keys: np.ndarray) -> bool:
        """Adopt a saved state whose graph is at ``graph``; False (and nothing changed) when the
        graph is missing or does not cover exactly the slots the state expects."""
        graph_n = int(st["vec_graph_n"][0])
        alive, tail = st["vec_alive"], st["vec_tail"]
        if self._n or tail.shape[1:] != (self.dim,) or graph_n + len(tail) != len(alive):
            return False
        index = None
        if graph_n:
            index = None if graph is None else self._read_graph(graph, slot_keys, len(alive))
            if index is None or index.ntotal != graph_n:
                return False
        self._n, self._alive, self._n_alive = len(alive), alive.copy(), int(alive.sum())
        self._tail = tail
        if index is not None:
            self._hnsw, self._hnsw_n = index, graph_n
            self._refresh_view()
        return True

    # -- persistence of the graph (the vectors themselves live in the store) -----
    def save_graph(self, path: Path, slot_keys: np.ndarray) -> None:
        """Write the HNSW graph and the keys of the slots it covers (atomically)."""
        import faiss

        if self._hnsw is None:
            return
        self._sync_hnsw()
        tmp = path.with_suffix(path.suffix + ".tmp")
        faiss.write_index(self._hnsw, str(tmp))
        np.save(str(tmp) + ".keys.npy", slot_keys[: self._hnsw_n])
        os.replace(str(tmp) + ".keys.npy", str(path) + ".keys.npy")
        os.replace(tmp, path)

    def _read_graph(self, path: Path, slot_keys: np.ndarray, n: int) -> Any:
        """The saved graph at ``path`` if it covers a prefix of the ``n`` current slots."""
        import faiss

        keys_path = Path(str(path) + ".keys.npy")
        if not path.exists() or not keys_path.exists():
            return None
        try:
            keys = np.load(keys_path)
            if len(keys) > n or not np.array_equal(keys, slot_keys[: len(keys)]):
                return None
            # Map the graph's vectors instead of reading them: at 1M memories they are 1.5 GB
            # and reading them was most of the time to open a store (benchmarks/history/scale.md);
            # a search touches only the pages of the vectors its walk visits. The file is only
            # ever replaced (save_graph), never written in place, so the mapping stays valid.
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except Exception:  # a torn or foreign file is only a cache miss
            return None
        if index.ntotal != len(keys) or index.d != self.dim:
            return None
        return index

    def load_graph(self, path: Path, slot_keys: np.ndarray) -> bool:
        """Adopt a saved graph if it covers a prefix of the current slots; else ignore it."""
        if self._hnsw is not None:
            return False
        index = self._read_graph(path, slot_keys, self._n)
        if index is None:
            return False
        g = int(index.ntotal)
        self._tail = self._tail[g : self._n].copy()  # the graph holds the vectors of its slots
        self._hnsw, self._hnsw_n = index, g
        self._refresh_view()
        return True
