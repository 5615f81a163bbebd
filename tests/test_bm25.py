"""BM25 parity with a reference implementation of Lucene's BM25, bm25s's ``method="lucene"``.

``BM25Index`` promises bm25s's scores on the same tokens (Lucene's idf
``log(1 + (N - df + .5) / (df + .5))``, the same k1, b and length normalisation over every
live document), to 1e-6, for every live document containing a query term, and keeps that
promise after incremental adds and deletes (compared with bm25s rebuilt on the surviving
documents). bm25s, as Lucene, leaves Okapi's constant ``k1 + 1`` out of the numerator of the
term-frequency saturation, ``tf / (tf + k1 * (1 - b + b * dl / avgdl))``; BM25Index keeps it
(as rank_bm25 and the Okapi papers do), so the reference is bm25s's scores times ``k1 + 1``.
``test_reference_is_the_definition`` checks that relation against the formula written out,
so a bm25s release that changed its definition could not pass unnoticed.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3

import bm25s
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from beeweave_core import BeeWeave, HashingEmbedder, IndexConfig
from beeweave_core.filters import build_filter
from beeweave_core.index.bm25 import BM25Index, bm25_idf, count_terms, top_k
from tests.support import WORDS, sentence, term_counts

ATOL = 1e-6
K1, B = 1.5, 0.75  # BM25Index's defaults


def reference(corpus: list[list[str]], query: list[str], k1: float = K1, b: float = B) -> np.ndarray:
    """Each document's score for ``query`` by bm25s (Lucene's BM25, in float64), times the
    ``k1 + 1`` it leaves out. Repeated query tokens count again, as in BM25Index."""
    ref = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
    ref.index(corpus, show_progress=False)
    return (k1 + 1) * ref.get_scores_from_ids(ref.get_tokens_ids(query))


def definition(corpus: list[list[str]], query: list[str], k1: float = K1, b: float = B) -> list[float]:
    """The formula written out, slowly: the sum over the query's tokens (a repeated one
    again) of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))."""
    n = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n
    out = []
    for doc in corpus:
        total = 0.0
        for term in query:
            tf = doc.count(term)
            if tf:
                df = sum(term in d for d in corpus)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        out.append(total)
    return out


class Vocab:
    """Maps string tokens (what bm25s sees) to term ids (what BM25Index sees)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, tokens: list[str]) -> dict[int, int]:
        out: dict[int, int] = {}
        for t in tokens:
            tid = self.ids.setdefault(t, len(self.ids))
            out[tid] = out.get(tid, 0) + 1
        return out

    def query(self, tokens: list[str]) -> dict[int, int]:
        # A query never creates terms; unknown tokens get an id no document has.
        out: dict[int, int] = {}
        for t in tokens:
            tid = self.ids.get(t, 10_000_000 + len(t))
            out[tid] = out.get(tid, 0) + 1
        return out


def assert_parity(index: BM25Index, vocab: Vocab, docs: dict[int, list[str]], query: list[str],
                  allowed: np.ndarray | None = None) -> int:
    """Compare index.score with the reference over the live docs; return how many scores were compared."""
    slots, scores = index.score(vocab.query(query), allowed)
    got = dict(zip(slots.tolist(), scores.tolist()))
    assert len(got) == len(slots), "a slot was returned twice"
    qset = set(query)
    expected = {s for s, toks in docs.items() if qset & set(toks)}
    if allowed is not None:
        expected = {s for s in expected if allowed[s]}
    assert set(got) == expected, "returned slots must be exactly the allowed live docs containing a query term"
    if not expected:
        return 0
    order = sorted(docs)
    ref = reference([docs[s] for s in order], query)
    want = {s: ref[i] for i, s in enumerate(order)}
    for s in expected:
        assert got[s] == pytest.approx(want[s], abs=ATOL), (s, docs[s], query)
    return len(expected)


def random_corpus(rnd: random.Random, n_docs: int, vocab_size: int, *, ensure_terms: bool = True) -> list[list[str]]:
    """Zipf-like term frequencies, ~10% empty docs, and one term in ~75% of the docs (where
    rank_bm25's idf was negative: Lucene's must stay positive there)."""
    terms = [f"t{i}" for i in range(vocab_size)]
    weights = [1.0 / (i + 1) for i in range(vocab_size)]
    docs = []
    for _ in range(n_docs):
        if rnd.random() < 0.1:
            docs.append([])
            continue
        doc = rnd.choices(terms, weights, k=rnd.randint(1, 18))
        if rnd.random() < 0.75:
            doc += ["common"] * rnd.randint(1, 3)
        rnd.shuffle(doc)
        docs.append(doc)
    if ensure_terms and not any(docs):
        docs[0] = ["t0"]
    return docs


def random_query(rnd: random.Random, docs: list[list[str]]) -> list[str]:
    pool = sorted({t for d in docs for t in d}) or ["t0"]
    q = rnd.choices(pool, k=rnd.randint(1, 5))
    q += rnd.sample(q, k=rnd.randint(0, len(q)))  # repeated query tokens count again
    if rnd.random() < 0.5:
        q.append("common")
    if rnd.random() < 0.3:
        q.append("never-seen")
    rnd.shuffle(q)
    return q


def build(docs: list[list[str]]) -> tuple[BM25Index, Vocab, dict[int, list[str]]]:
    index, vocab = BM25Index(), Vocab()
    for slot, d in enumerate(docs):
        index.add(slot, vocab(d))
    return index, vocab, dict(enumerate(docs))


# -- static corpora ------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(25))
def test_parity_on_random_corpus(seed: int) -> None:
    rnd = random.Random(seed)
    docs = random_corpus(rnd, rnd.randint(2, 80), rnd.randint(3, 60))
    index, vocab, live = build(docs)
    compared = sum(assert_parity(index, vocab, live, random_query(rnd, docs)) for _ in range(15))
    assert compared > 0


def test_corpus_really_has_common_terms_and_empty_docs() -> None:
    """Guards the generator: the parity tests must cover terms in most documents (where
    rank_bm25's idf was negative) and empty docs."""
    rnd = random.Random(0)
    docs = random_corpus(rnd, 60, 20)
    assert any(not d for d in docs)
    df_common = sum("common" in d for d in docs)
    assert df_common > len(docs) / 2
    assert math.log((len(docs) - df_common + 0.5) / (df_common + 0.5)) < 0  # rank_bm25's idf
    index, vocab, live = build(docs)
    assert assert_parity(index, vocab, live, ["common", "common", "t1"]) > 0
    _, scores = index.score(vocab.query(["common"]))
    assert len(scores) == df_common and (scores > 0).all()


def test_reference_is_the_definition() -> None:
    """bm25s times k1 + 1 is the formula written out (and so is BM25Index), with the
    parameters of the store's IndexConfig as well as BM25Index's defaults."""
    docs = [["a", "b", "c"], ["a", "b", "c", "c"], [], ["a", "b"], ["a", "c", "d"], ["b", "c"], ["e"] * 4]
    for k1, b in ((K1, B), (1.2, 0.3), (0.9, 1.0), (2.0, 0.0)):
        index = BM25Index(k1, b)
        vocab = Vocab()
        for slot, d in enumerate(docs):
            index.add(slot, vocab(d))
        for q in (["a"], ["a", "b", "c"], ["d", "a", "a"], ["c", "c", "b"], ["e", "zz"], ["zz"]):
            want = definition(docs, q, k1, b)
            assert reference(docs, q, k1, b).tolist() == pytest.approx(want, abs=1e-12)
            slots, scores = index.score(vocab.query(q))
            got = dict(zip(slots.tolist(), scores.tolist()))
            assert [got.get(s, 0.0) for s in range(len(docs))] == pytest.approx(want, abs=1e-12)


def test_idf_is_positive_in_the_smallest_stores() -> None:
    """rank_bm25's idf is 0 for a term in half the documents (one of two) and negative above;
    Lucene's is positive for every df, falling as df grows."""
    for n in range(1, 8):
        idf = bm25_idf(n, np.arange(1, n + 1, dtype=np.float64))
        assert (idf > 0).all() and (np.diff(idf) < 0).all(), (n, idf)
    assert bm25_idf(2, np.array([1.0]))[0] == pytest.approx(math.log(2))


def test_a_stored_configuration_with_rank_bm25s_floor_still_opens(tmp_path) -> None:
    """Stores saved before Lucene's idf hold ``epsilon`` in their IndexConfig: it is read back
    and ignored, and the store opens (with or without asking for its configuration)."""
    old = {**IndexConfig(k1=1.5, b=0.75).to_dict(), "epsilon": 0.25}
    assert "epsilon" not in IndexConfig().to_dict()
    assert IndexConfig.from_dict(old) == IndexConfig(k1=1.5, b=0.75)
    path = tmp_path / "old.db"
    with BeeWeave(path, embedder=HashingEmbedder(16), index=IndexConfig(k1=1.5, b=0.75)) as m:
        m.add("the staging database listens on port 5433", user_id="u")
    db = sqlite3.connect(path)
    with db:  # as a store of before wrote it
        db.execute("UPDATE meta SET value = ? WHERE key = 'index_config'", (json.dumps(old),))
    db.close()
    for index in (None, IndexConfig(k1=1.5, b=0.75)):
        with BeeWeave(path, embedder=HashingEmbedder(16), index=index) as m:
            assert m.backend.index_config == IndexConfig(k1=1.5, b=0.75)
            assert m.search("staging port", user_id="u", k=1)[0].sources["lexical"].score > 0


def test_terms_in_most_documents_weigh_positively() -> None:
    """When most terms are in most docs rank_bm25's mean idf, and so its floor, was negative:
    a document matching the query scored below one matching nothing."""
    docs = [["a", "b", "c"], ["a", "b", "c", "c"], ["a", "b"], ["a", "c", "d"], ["b", "c"]]
    index, vocab, live = build(docs)
    for q in (["a"], ["a", "b", "c"], ["d", "a", "a"], ["c", "c", "b"]):
        assert assert_parity(index, vocab, live, q) > 0
        _, scores = index.score(vocab.query(q))
        assert (scores > 0).all()


@given(
    docs=st.lists(st.lists(st.sampled_from(["x", "y", "z", "w", "v", "u"]), max_size=8), min_size=1, max_size=25)
    .filter(lambda ds: any(ds)),
    query=st.lists(st.sampled_from(["x", "y", "z", "w", "v", "u", "unknown"]), min_size=1, max_size=6),
)
def test_parity_hypothesis(docs: list[list[str]], query: list[str]) -> None:
    index, vocab, live = build(docs)
    assert_parity(index, vocab, live, query)


def test_add_bulk_matches_incremental_adds() -> None:
    """A store that opens loads postings with add_bulk; it must score like add()."""
    rnd = random.Random(7)
    docs = random_corpus(rnd, 50, 30)
    vocab = Vocab()
    counts = [vocab(d) for d in docs]
    slots, terms, tfs = [], [], []
    for s, c in enumerate(counts):
        for t, n in c.items():
            slots.append(s), terms.append(t), tfs.append(n)
    bulk = BM25Index()
    bulk.add_bulk(np.array(slots, np.int32), np.array(terms, np.int64), np.array(tfs, np.float32),
                  np.arange(len(docs)), np.array([len(d) for d in docs]))
    live = dict(enumerate(docs))
    for _ in range(20):
        assert_parity(bulk, vocab, live, random_query(rnd, docs))


def test_allowed_mask_restricts_but_keeps_global_statistics() -> None:
    rnd = random.Random(3)
    docs = random_corpus(rnd, 40, 15)
    index, vocab, live = build(docs)
    allowed = np.array([rnd.random() < 0.3 for _ in docs])
    for _ in range(10):
        q = random_query(rnd, docs)
        assert_parity(index, vocab, live, q, allowed=allowed)


def test_top_k_is_best_first_with_ties_by_slot() -> None:
    rnd = random.Random(5)
    docs = random_corpus(rnd, 60, 10)
    index, vocab, _ = build(docs)
    q = vocab.query(["t0", "common"])
    slots, scores = index.score(q)
    full = sorted(zip(slots.tolist(), scores.tolist()), key=lambda p: (-p[1], p[0]))
    for k in (1, 3, 10, len(full), len(full) + 5):
        ks, kv = index.top_k(q, k)
        assert list(zip(ks.tolist(), kv.tolist())) == full[:k]
    ks, _ = index.top_k(q, 0)
    assert len(ks) == 0
    ids, sc = top_k(np.array([4, 2, 9, 1]), np.array([1.0, 2.0, 1.0, 2.0]), 3)
    assert ids.tolist() == [1, 2, 4] and sc.tolist() == [2.0, 2.0, 1.0]


def test_empty_index_and_unknown_terms() -> None:
    index = BM25Index()
    slots, scores = index.score({0: 1})
    assert len(slots) == 0 and len(scores) == 0
    index.add(0, {0: 2})
    index.add(1, {})
    assert len(index.score({5: 1})[0]) == 0
    assert index.n_docs == 2 and index.avgdl == 1.0


def test_adding_a_live_slot_twice_is_refused() -> None:
    index = BM25Index()
    index.add(0, {0: 1})
    with pytest.raises(ValueError):
        index.add(0, {1: 1})


# -- incremental adds and deletes ------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_parity_after_incremental_adds_and_deletes(seed: int) -> None:
    rnd = random.Random(1000 + seed)
    docs = random_corpus(rnd, rnd.randint(5, 40), rnd.randint(4, 30))
    index, vocab, live = build(docs)
    next_slot = len(docs)
    counts = {s: count_terms([vocab.ids[t] for t in d]) for s, d in live.items()}
    for _step in range(60):
        if live and rnd.random() < 0.45:
            slot = rnd.choice(sorted(live))
            index.remove(slot, counts.pop(slot))
            del live[slot]
        else:
            doc = random_corpus(rnd, 1, rnd.randint(4, 40), ensure_terms=False)[0]
            counts[next_slot] = vocab(doc)
            index.add(next_slot, counts[next_slot])
            live[next_slot] = doc
            next_slot += 1
        assert index.n_docs == len(live)
        if any(live.values()):
            assert index.avgdl == pytest.approx(sum(map(len, live.values())) / len(live))
            assert_parity(index, vocab, live, random_query(rnd, list(live.values())))
        else:
            assert len(index.score(vocab.query(["common", "t0"]))[0]) == 0


def test_parity_after_deleting_most_docs_of_a_term() -> None:
    """Deleting most docs of a term (dead postings, however the index handles them)."""
    rnd = random.Random(11)
    docs = [["hot"] + rnd.choices(["a", "b", "c", "d"], k=rnd.randint(0, 5)) for _ in range(200)]
    index, vocab, live = build(docs)
    counts = {s: vocab(d) for s, d in live.items()}
    # vocab() above re-counts tokens without creating ids: they all exist already.
    for slot in rnd.sample(sorted(live), 180):
        index.remove(slot, counts.pop(slot))
        del live[slot]
    assert_parity(index, vocab, live, ["hot", "a"])
    assert_parity(index, vocab, live, ["hot", "a"])  # a second scoring sees the same
    for slot in range(200, 230):
        doc = ["hot", "e"] if slot % 2 else ["a", "e", "e"]
        index.add(slot, vocab(doc))
        live[slot] = doc
    for q in (["hot"], ["e", "a", "a"], ["hot", "b", "e"]):
        assert_parity(index, vocab, live, q)


def test_deleting_every_doc_then_adding_again() -> None:
    index, vocab, live = build([["a", "b"], ["b", "c"], ["c"]])
    for slot, d in list(live.items()):
        index.remove(slot, vocab(d))
        del live[slot]
    assert index.n_docs == 0 and index.avgdl == 0.0
    assert len(index.score(vocab.query(["a", "b", "c"]))[0]) == 0
    for slot, d in ((3, ["a", "a"]), (4, ["c"]), (5, ["d", "a"])):
        index.add(slot, vocab(d))
        live[slot] = d
    assert assert_parity(index, vocab, live, ["a", "c", "b"]) == 3


def test_readding_a_removed_slot_does_not_resurrect_its_old_postings() -> None:
    """``add`` accepts a removed slot again; the old document's postings must not come
    back to life under the new one."""
    index, vocab, live = build([["apple", "pear"], ["pear", "pear"], ["fig"]])
    index.remove(0, vocab(live.pop(0)))
    index.add(0, vocab(["fig", "fig", "fig"]))
    live[0] = ["fig", "fig", "fig"]
    assert_parity(index, vocab, live, ["pear"])


# -- end to end, through the store and its tokenizer -------------------------------
def _store_reference(m: BeeWeave, corpus: list[list[str]], query: list[str]) -> np.ndarray:
    """The reference with the store's BM25 constants (its IndexConfig, when it has one).

    The memories in these tests have no session, so session context adds nothing."""
    cfg = getattr(m.backend, "index_config", None)
    return reference(corpus, query) if cfg is None else reference(corpus, query, cfg.k1, cfg.b)


def _store_parity(m: BeeWeave, texts: dict[str, str], query: str, flt=None) -> int:
    terms = term_counts(m.tokenizer(query))
    ranked = m.backend.lexical_search(terms, flt or build_filter(None), 100_000)
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True), "lexical_search must be best first"
    got = dict(ranked)
    assert len(got) == len(ranked), "an id was returned twice"
    order = sorted(texts)
    corpus = [m.tokenizer(texts[i]) for i in order]
    q = m.tokenizer(query)
    allowed = None if flt is None else {c.id for c in m.backend.scan(flt)}
    expected = {i for i, toks in zip(order, corpus) if set(q) & set(toks) and (allowed is None or i in allowed)}
    assert set(got) == expected
    if expected:
        ref = dict(zip(order, _store_reference(m, corpus, q)))
        for i in expected:
            assert got[i] == pytest.approx(ref[i], abs=ATOL), (texts[i], query)
    return len(expected)


def test_store_lexical_search_matches_the_reference_with_its_tokenizer() -> None:
    rnd = random.Random(42)
    m = BeeWeave(embedder=HashingEmbedder(16))
    try:
        texts: dict[str, str] = {}
        for _i in range(120):
            text = sentence(rnd)
            if not m.tokenizer(text):
                text += " honey"  # only stop words: still a doc, but give it a term
            texts[m.add(text, user_id=rnd.choice(["ann", "bob"]))] = text
        queries = [sentence(rnd, 1, 6) for _ in range(25)] + ["running runs ran", "the memory memory", "honey"]
        assert sum(_store_parity(m, texts, q) for q in queries) > 0

        for cid in rnd.sample(sorted(texts), 40):
            assert m.delete(cid)
            del texts[cid]
        for _i in range(30):
            text = sentence(rnd) + " honey"
            texts[m.add(text, user_id="ann")] = text
        assert sum(_store_parity(m, texts, q) for q in queries) > 0

        # A filter restricts the hits; the statistics stay over every live doc.
        flt = build_filter(None, user_id="bob")
        assert sum(_store_parity(m, texts, q, flt) for q in queries) > 0
    finally:
        m.close()


def test_search_reports_the_bm25_score_as_lexical_source() -> None:
    rnd = random.Random(9)
    m = BeeWeave(embedder=HashingEmbedder(16))
    try:
        texts = {}
        for _ in range(40):
            t = sentence(rnd)
            texts[m.add(t + " garden", user_id="u")] = t + " garden"
        order = sorted(texts)
        corpus = [m.tokenizer(texts[i]) for i in order]
        q = "garden coffee meeting"
        ref = dict(zip(order, _store_reference(m, corpus, m.tokenizer(q))))
        hits = m.search(q, user_id="u", k=10)
        assert hits
        lexical = [h for h in hits if "lexical" in h.sources]
        assert lexical
        for h in lexical:
            assert h.sources["lexical"].score == pytest.approx(ref[h.id], abs=ATOL)
    finally:
        m.close()


def test_words_vocabulary_has_stop_words_and_inflections() -> None:
    """Guards the end-to-end corpus: stop words drop and inflections share a stem."""
    m = BeeWeave(embedder=HashingEmbedder(16))
    try:
        assert m.tokenizer("the running runs") == ["run", "run"]
        assert {"the", "a", "of"} <= set(WORDS)
    finally:
        m.close()


def test_top_k_breaks_ties_at_the_cut_by_id_whatever_the_input_order() -> None:
    rnd = np.random.default_rng(3)
    ids = np.arange(200, dtype=np.int64)
    scores = rnd.integers(0, 6, 200).astype(np.float64)  # many ties everywhere
    want = sorted(range(200), key=lambda i: (-scores[i], i))
    for _ in range(20):
        perm = rnd.permutation(200)
        for k in (1, 7, 40, 199, 200, 300):
            got_ids, got_scores = top_k(ids[perm], scores[perm], k)
            assert got_ids.tolist() == want[:k]
            assert got_scores.tolist() == scores[want[:k]].tolist()
