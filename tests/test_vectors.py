"""Vector search: the exact scan equals brute-force numpy, and the HNSW path keeps
recall@10 >= 0.95 against it, with filters of varying selectivity and deleted slots."""

from __future__ import annotations

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.filters import build_filter
from beeweave_core.index.vectors import VectorIndex
from tests.support import faiss_single_thread, unit_vectors

DIM = 32


def brute_force(mat: np.ndarray, alive: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (slots, scores) by float64 inner product, ties broken by slot."""
    cand = np.flatnonzero(alive)
    scores = mat[cand].astype(np.float64) @ query.astype(np.float64)
    order = np.lexsort((cand, -scores))[:k]
    return cand[order], scores[order]


def assert_same_topk(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    gs, gv = got
    ws, wv = want
    assert len(gs) == len(ws)
    np.testing.assert_allclose(gv, wv, atol=1e-5)
    assert np.all(np.diff(gv) <= 0), "best first"
    # Ids must agree except where two scores are too close to order in float32.
    for i, (a, b) in enumerate(zip(gs.tolist(), ws.tolist())):
        if a != b:
            assert abs(gv[i] - wv[i]) < 1e-5 and abs(wv[i] - (wv[i + 1] if i + 1 < len(wv) else -9)) < 1e-5, (i, a, b)


# -- exact search ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_exact_search_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 700
    mat = unit_vectors(rng, n, DIM)
    vi = VectorIndex(DIM)
    vi.set(np.arange(n), mat)
    dead = rng.choice(n, 150, replace=False)
    for s in dead:
        vi.remove(int(s))
    alive = np.ones(n, bool)
    alive[dead] = False
    assert vi.n_alive == n - 150
    for q in unit_vectors(rng, 10, DIM):
        for k in (1, 10, 100):
            assert_same_topk(vi.search(q, k, exact=True), brute_force(mat, alive, q, k))
        mask = rng.random(n) < 0.2
        assert_same_topk(vi.search(q, 10, mask, exact=True), brute_force(mat, alive & mask, q, 10))
        # Below exact_limit the default path is the same scan.
        assert_same_topk(vi.search(q, 10, mask), brute_force(mat, alive & mask, q, 10))


def test_exact_search_edge_cases() -> None:
    rng = np.random.default_rng(1)
    vi = VectorIndex(8)
    q = unit_vectors(rng, 1, 8)[0]
    assert len(vi.search(q, 5)[0]) == 0  # empty index
    mat = unit_vectors(rng, 5, 8)
    vi.set(np.arange(5), mat)
    assert len(vi.search(q, 0)[0]) == 0
    slots, _ = vi.search(q, 50)
    assert sorted(slots.tolist()) == [0, 1, 2, 3, 4]  # k larger than the index
    assert len(vi.search(q, 3, np.zeros(5, bool))[0]) == 0  # nothing allowed
    vi.remove(2)
    vi.remove(2)  # removing twice is harmless
    assert vi.n_alive == 4
    assert 2 not in vi.search(q, 50)[0].tolist()
    np.testing.assert_array_equal(vi.get(3), mat[3])


def test_store_exact_vector_search_equals_brute_force() -> None:
    rng = np.random.default_rng(5)
    m = BeeWeave(embedder=HashingEmbedder(DIM))
    try:
        raw = rng.standard_normal((300, DIM)) * rng.uniform(0.1, 10, (300, 1))  # unnormalised on purpose
        users = rng.choice(["ann", "bob", "cid"], 300)
        ids = m.add_many([{"content": f"memory {i}", "user_id": str(u), "embedding": v.tolist()}
                          for i, (u, v) in enumerate(zip(users, raw))])
        for cid in ids[::7]:
            m.delete(cid)
        live = [i for j, i in enumerate(ids) if j % 7]
        stored = m.backend.get_vectors(live)
        assert set(stored) == set(live)
        by_id = dict(zip(ids, raw))
        for cid in live:  # vectors are stored L2-normalised
            np.testing.assert_allclose(stored[cid], by_id[cid] / np.linalg.norm(by_id[cid]), atol=1e-6)
        mat = np.stack([stored[i] for i in live])
        user_of = dict(zip(ids, users))
        for q in unit_vectors(rng, 8, DIM):
            for user in (None, "bob"):
                flt = build_filter(None, user_id=user)
                keep = np.array([user is None or user_of[i] == user for i in live])
                want_slots, want_scores = brute_force(mat, keep, q, 15)
                for exact in (True, False):
                    got = m.backend.vector_search(q, flt, 15, exact=exact)
                    assert [i for i, _ in got] == [live[s] for s in want_slots]
                    np.testing.assert_allclose([s for _, s in got], want_scores, atol=1e-5)
    finally:
        m.close()


# -- approximate (HNSW) search -----------------------------------------------------------
N_HNSW = 3000


def _recall(vi: VectorIndex, mat: np.ndarray, alive: np.ndarray, queries: np.ndarray,
            mask: np.ndarray | None, k: int = 10) -> float:
    allowed = alive if mask is None else alive & mask
    recalls = []
    for q in queries:
        slots, scores = vi.search(q, k, mask)
        slots = slots.tolist()
        assert len(set(slots)) == len(slots), "a slot was returned twice"
        assert all(allowed[s] for s in slots), "HNSW returned a dead or filtered-out slot"
        # Scores come from the stored vectors, whatever path found them.
        np.testing.assert_allclose(scores, mat[slots] @ q, atol=1e-4)
        truth, _ = brute_force(mat, allowed, q, k)
        recalls.append(len(set(slots) & set(truth.tolist())) / len(truth))
    return float(np.mean(recalls))


@pytest.fixture(scope="module")
def hnsw_data():
    rng = np.random.default_rng(2024)
    mat = unit_vectors(rng, N_HNSW, DIM)
    queries = unit_vectors(rng, 40, DIM)
    return rng, mat, queries


def _hnsw_index(mat: np.ndarray) -> VectorIndex:
    vi = VectorIndex(DIM, exact_limit=0)  # every search takes the HNSW path
    vi.set(np.arange(len(mat)), mat)
    return vi


@pytest.mark.parametrize("selectivity", [None, 0.5, 0.1, 0.02])
def test_hnsw_recall_against_brute_force(hnsw_data, selectivity) -> None:
    rng, mat, queries = hnsw_data
    with faiss_single_thread():
        vi = _hnsw_index(mat)
        alive = np.ones(N_HNSW, bool)
        mask = None if selectivity is None else np.random.default_rng(7).random(N_HNSW) < selectivity
        assert _recall(vi, mat, alive, queries, mask) >= 0.95
    assert vi.has_graph, "the HNSW path was not taken"


def test_hnsw_recall_with_deleted_slots(hnsw_data) -> None:
    rng, mat, queries = hnsw_data
    with faiss_single_thread():
        vi = _hnsw_index(mat)
        vi.search(queries[0], 10)  # build the graph before deleting: deletes are tombstones
        assert vi.has_graph
        alive = np.ones(N_HNSW, bool)
        dead = np.random.default_rng(8).choice(N_HNSW, N_HNSW // 3, replace=False)
        for s in dead:
            vi.remove(int(s))
        alive[dead] = False
        assert _recall(vi, mat, alive, queries, None) >= 0.95
        for sel in (0.3, 0.05):
            mask = np.random.default_rng(9).random(N_HNSW) < sel
            assert _recall(vi, mat, alive, queries, mask) >= 0.95
        # A query equal to a deleted vector must not find it.
        for s in dead[:20]:
            assert int(s) not in vi.search(mat[s], 10)[0].tolist()


def test_hnsw_sees_vectors_added_after_the_graph_was_built(hnsw_data) -> None:
    rng, mat, queries = hnsw_data
    half = N_HNSW // 2
    with faiss_single_thread():
        vi = _hnsw_index(mat[:half])
        vi.search(queries[0], 10)
        assert vi.has_graph and vi._hnsw.ntotal == half
        vi.set(np.arange(half, N_HNSW), mat[half:])
        alive = np.ones(N_HNSW, bool)
        assert _recall(vi, mat, alive, queries, None) >= 0.95
        for s in range(half, N_HNSW, 150):
            assert vi.search(mat[s], 1)[0].tolist() == [s]
        with pytest.raises(ValueError):
            vi.set(np.array([3]), mat[:1])  # a slot in the graph cannot be overwritten


def test_graph_grows_in_batches_and_the_tail_is_searched_exactly(hnsw_data) -> None:
    """Inserts wait in the tail (scanned exactly) and join the graph tail_limit at a time;
    every vector is held once, in the graph's storage or in the tail."""
    rng, mat, queries = hnsw_data
    with faiss_single_thread():
        vi = VectorIndex(DIM, exact_limit=100, tail_limit=64)
        for lo in range(0, 1000, 10):
            vi.set(np.arange(lo, lo + 10), mat[lo : lo + 10])
            vi.maybe_extend_graph()
            assert vi.graph_size == 0 or 1000 >= vi.graph_size > lo + 10 - 64
        assert vi.has_graph and 1000 - vi.graph_size < 64
        np.testing.assert_array_equal(vi.vectors(np.arange(1000)), mat[:1000])
        assert len(vi._tail) < 1000  # the graph's vectors are not copied into the tail
        for s in range(vi.graph_size, 1000):  # tail vectors are found by the exact scan
            assert vi.search(mat[s], 1)[0].tolist() == [s]
        assert _recall(vi, mat[:1000], np.ones(1000, bool), queries, None) >= 0.95


def test_drop_graph_keeps_live_vectors_and_zeroes_deleted_ones(hnsw_data) -> None:
    rng, mat, queries = hnsw_data
    with faiss_single_thread():
        vi = _hnsw_index(mat[:500])
        vi.search(queries[0], 10)
        assert vi.has_graph
        vi.remove(7)
        vi.drop_graph()
        assert not vi.has_graph and vi.graph_size == 0
        got = vi.vectors(np.arange(500))
        np.testing.assert_array_equal(np.delete(got, 7, axis=0), np.delete(mat[:500], 7, axis=0))
        assert not got[7].any()
        assert vi.search(mat[3], 1)[0].tolist() == [3]  # the graph comes back when a search needs it
        assert vi.has_graph and 7 not in vi.search(mat[7], 10)[0].tolist()


def test_a_graph_read_from_disk_grows_and_is_saved_again(hnsw_data, tmp_path) -> None:
    """A saved graph is read back with its vectors mapped from the file (read-only); adding to
    it must take an owned copy first, and saving over the mapped file must not disturb it."""
    rng, mat, queries = hnsw_data
    path = tmp_path / "g.hnsw"
    keys = np.arange(N_HNSW, dtype=np.int64)
    with faiss_single_thread():
        vi = VectorIndex(DIM, exact_limit=100, tail_limit=200)
        vi.set(np.arange(1000), mat[:1000])
        vi.maybe_extend_graph()
        vi.save_graph(path, keys)
        back = VectorIndex(DIM, exact_limit=100, tail_limit=200)
        back.set(np.arange(1000), mat[:1000])
        assert back.load_graph(path, keys) and back.graph_size == 1000
        import faiss
        assert not faiss.downcast_index(back._hnsw.storage).codes.is_owned  # mapped, not read
        np.testing.assert_array_equal(back.vectors(np.arange(1000)), mat[:1000])
        for lo in range(1000, N_HNSW, 100):
            back.set(np.arange(lo, lo + 100), mat[lo : lo + 100])
            back.maybe_extend_graph()
        assert back.graph_size > 1000
        back.save_graph(path, keys)  # replaces the file the first graph was mapped from
        np.testing.assert_array_equal(back.vectors(np.arange(N_HNSW)), mat)
        assert _recall(back, mat, np.ones(N_HNSW, bool), queries, None) >= 0.95
        again = VectorIndex(DIM, exact_limit=100, tail_limit=200)
        again.set(np.arange(N_HNSW), mat)
        assert again.load_graph(path, keys) and again.graph_size == back.graph_size
        assert _recall(again, mat, np.ones(N_HNSW, bool), queries, None) >= 0.95


@pytest.mark.parametrize("kernel", ["vecdot", "einsum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [0, 1, 7, 3000])
def test_matvec_equals_the_float64_product(monkeypatch: pytest.MonkeyPatch, kernel: str, dtype: type,
                                           rows: int) -> None:
    """The exact scan's kernel (numpy's vecdot, or einsum where numpy has no vecdot) against
    the plain float64 product, on contiguous matrices and on a strided view."""
    import beeweave_core.index.vectors as vectors

    if kernel == "einsum":
        monkeypatch.setattr(vectors, "_vecdot", None)
    elif vectors._vecdot is None:
        pytest.skip("numpy < 2.0 has no vecdot")
    rng = np.random.default_rng(rows)
    mat = rng.standard_normal((rows, 384)).astype(dtype)
    vec = rng.standard_normal(384)
    for m in (mat, mat[::2], mat[:, :200]):
        got = vectors.matvec(m, vec[: m.shape[1]])
        assert got.dtype == dtype and got.shape == (m.shape[0],)
        np.testing.assert_allclose(got, m.astype(np.float64) @ vec[: m.shape[1]], rtol=1e-5, atol=1e-4)
