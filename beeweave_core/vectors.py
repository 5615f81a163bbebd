"""Dense vectors over integer slots: an exact scan for small candidate sets and a
FAISS HNSW graph for large ones.

Vectors are L2-normalised, so inner product is cosine similarity. Deleted slots are
tombstones (FAISS HNSW cannot remove points); searches pass the live/filter mask to
FAISS as an ``IDSelectorBitmap``, so a filter restricts the search itself instead of
trimming its output, and a selective filter costs no recall.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .bm25 import top_k

__all__ = ["VectorIndex", "normalize", "matvec"]

# Below this many candidates an exact scan is both faster and exact.
EXACT_LIMIT = 10_000


def matvec(mat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """mat @ vec without BLAS threads: one query is too small to split, and a threaded
    BLAS on a busy machine is several times slower than one core (measured here)."""
    return np.einsum("ij,j->i", mat, np.asarray(vec, dtype=mat.dtype))


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


class VectorIndex:
    def __init__(self, dim: int, *, hnsw_m: int = 32, ef_construction: int = 40, ef_search: int = 96,
                 exact_limit: int = EXACT_LIMIT) -> None:
        self.dim = dim
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self.exact_limit = exact_limit
        self._mat = np.zeros((0, dim), dtype=np.float32)
        self._n = 0  # slots used (live and dead)
        self._alive = np.zeros(0, dtype=bool)
        self._n_alive = 0
        self._hnsw = None  # faiss.IndexHNSWFlat over slots [0, _hnsw_n)
        self._hnsw_n = 0

    @property
    def has_graph(self) -> bool:
        return self._hnsw is not None

    @property
    def n_alive(self) -> int:
        return self._n_alive

    def _grow(self, need: int) -> None:
        if need > len(self._mat):
            cap = max(need, 2 * len(self._mat), 64)
            mat = np.zeros((cap, self.dim), dtype=np.float32)
            mat[: self._n] = self._mat[: self._n]
            self._mat = mat
            alive = np.zeros(cap, dtype=bool)
            alive[: self._n] = self._alive[: self._n]
            self._alive = alive

    def set(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        """Store vectors at the given slots (new slots at or after the end)."""
        if not len(slots):
            return
        self._grow(int(slots.max()) + 1)
        if self._hnsw is not None and int(slots.min()) < self._hnsw_n:
            raise ValueError("a slot already in the HNSW graph cannot be overwritten")
        self._mat[slots] = vectors
        newly = ~self._alive[slots]
        self._alive[slots] = True
        self._n_alive += int(newly.sum())
        self._n = max(self._n, int(slots.max()) + 1)

    def remove(self, slot: int) -> None:
        if slot < self._n and self._alive[slot]:
            self._alive[slot] = False
            self._n_alive -= 1

    def get(self, slot: int) -> np.ndarray:
        return self._mat[slot].copy()

    def vectors(self, slots: np.ndarray) -> np.ndarray:
        return self._mat[slots]

    def alive_mask(self) -> np.ndarray:
        return self._alive[: self._n]

    # -- search --------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None,
               exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (slots, cosine scores) among live slots allowed by the mask."""
        if k <= 0 or self._n_alive == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        mask = self._alive[: self._n]
        if allowed is not None:
            mask = mask & allowed[: self._n]
            n_cand = int(mask.sum())
        else:
            n_cand = self._n_alive
        if n_cand == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        if exact or n_cand <= self.exact_limit:
            cand = np.flatnonzero(mask)
            scores = matvec(self._mat[cand], query)
            return top_k(cand.astype(np.int64), scores.astype(np.float64), k)
        return self._search_hnsw(query, k, mask)

    def _sync_hnsw(self) -> None:
        import faiss

        if self._hnsw is None:
            self._hnsw = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._hnsw.hnsw.efConstruction = self.ef_construction
            self._hnsw_n = 0
        if self._hnsw_n < self._n:
            self._hnsw.add(np.ascontiguousarray(self._mat[self._hnsw_n : self._n]))
            self._hnsw_n = self._n

    def _search_hnsw(self, query: np.ndarray, k: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        self._sync_hnsw()
        bits = np.packbits(mask, bitorder="little")
        sel = faiss.IDSelectorBitmap(self._n, faiss.swig_ptr(bits))
        # The filter narrows what the graph walk may return, so widen the beam as it
        # gets more selective to keep recall.
        selectivity = max(int(mask.sum()), 1) / self._n
        ef = int(min(4096, max(self.ef_search, 2 * k) / max(selectivity, 0.05) ** 0.5))
        params = faiss.SearchParametersHNSW(sel=sel, efSearch=ef)
        scores, ids = self._hnsw.search(query.reshape(1, -1).astype(np.float32), k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float64)

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

    def load_graph(self, path: Path, slot_keys: np.ndarray) -> bool:
        """Adopt a saved graph if it covers a prefix of the current slots; else ignore it."""
        import faiss

        keys_path = Path(str(path) + ".keys.npy")
        if not path.exists() or not keys_path.exists():
            return False
        try:
            keys = np.load(keys_path)
            if len(keys) > self._n or not np.array_equal(keys, slot_keys[: len(keys)]):
                return False
            index = faiss.read_index(str(path))
        except Exception:  # a torn or foreign file is only a cache miss
            return False
        if index.ntotal != len(keys) or index.d != self.dim:
            return False
        self._hnsw, self._hnsw_n = index, len(keys)
        return True
