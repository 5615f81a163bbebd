"""Language-aware fusion: an embedder's declared languages and the query's scripts decide
how much the vector side weighs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.embedders import SentenceTransformerEmbedder, as_embedder
from beeweave_core.errors import InvalidInputError
from beeweave_core.filters import build_filter
from beeweave_core.language import (
    ANY_LANGUAGE,
    FusionPolicy,
    Script,
    coverage,
    embedder_languages,
    model_languages,
    retriever_weights,
    script_shares,
)

BASE = {"lexical": 1.0, "vector": 1.0}


def test_script_shares() -> None:
    assert script_shares("金融科技论坛") == {Script.HAN: 1.0}
    assert script_shares("Hello 世界") == {Script.LATIN: 5 / 7, Script.HAN: 2 / 7}
    assert script_shares("12:30 !?") == {}  # digits and punctuation are no script
    assert set(script_shares("こんにちは東京 Привет 안녕")) == {Script.KANA, Script.HAN, Script.CYRILLIC, Script.HANGUL}


def test_coverage() -> None:
    assert coverage("金融科技论坛的主要内容是什么", {"en"}) == 0.0
    assert coverage("What did Caroline paint?", {"en"}) == 1.0
    assert coverage("Où est la gare ?", {"en"}) == 1.0  # Latin script: closer to English than Chinese is
    assert coverage("项目使用 PostgreSQL", {"en"}) == pytest.approx(10 / 14)
    assert coverage("金融科技", {"zh"}) == 1.0
    assert coverage("東京へ行く", {"zh"}) == 0.0  # kana: the Chinese characters are Japanese here
    assert coverage("東京へ行く", {"ja"}) == 1.0
    assert coverage("金融科技", None) == 1.0  # unknown languages: no change
    assert coverage("金融科技", {ANY_LANGUAGE}) == 1.0
    assert coverage("123", {"en"}) == 1.0


def test_weights_lean_on_lexical_outside_the_languages() -> None:
    policy = FusionPolicy(uncovered_vector_weight=0.25)
    assert retriever_weights("金融科技论坛", {"en"}, BASE, policy) == {"lexical": 1.0, "vector": 0.25}
    assert retriever_weights("the forum", {"en"}, BASE, policy) == BASE
    half = retriever_weights("论坛 forum", {"en"}, {"lexical": 1.0, "vector": 2.0}, policy)
    assert half["vector"] == pytest.approx(2.0 * (5 / 7 + 2 / 7 * 0.25)) and half["lexical"] == 1.0  # 5 of 7 letters
    assert retriever_weights("金融科技论坛", {"zh", "en"}, BASE, policy) == BASE
    assert retriever_weights("金融科技论坛", None, BASE, policy) == BASE
    with pytest.raises(InvalidInputError):
        FusionPolicy(uncovered_vector_weight=1.5)


def test_model_languages_by_name() -> None:
    assert model_languages("BAAI/bge-small-zh-v1.5") == {"zh", "en"}
    assert model_languages("shibing624/text2vec-base-chinese") == {"zh", "en"}
    assert model_languages("BAAI/bge-m3") == {ANY_LANGUAGE}
    assert model_languages("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2") == {ANY_LANGUAGE}
    assert model_languages("intfloat/multilingual-e5-small") == {ANY_LANGUAGE}
    assert model_languages("sentence-transformers/all-MiniLM-L6-v2") == {"en"}
    assert model_languages("BAAI/bge-small-en-v1.5") == {"en"}
    assert model_languages("someone/my-model") is None  # unknown: used at full weight


def test_model_languages_from_a_card(tmp_path) -> None:
    for text, want in (("---\nlanguage:\n- zh\n- en\ntags:\n- x\n---\n# m", {"zh", "en"}),
                       ("---\nlanguage: en\n---\n", {"en"}),
                       ("---\nlanguage: [fr, de]\n---\n", {"fr", "de"}),
                       ("---\nlanguage: multilingual\n---\n", {ANY_LANGUAGE}),
                       ("no front matter", None)):
        d = tmp_path / str(abs(hash(text)))
        d.mkdir()
        (d / "README.md").write_text(text, encoding="utf-8")
        assert model_languages(str(d)) == want, text


def test_embedders_declare_their_languages() -> None:
    assert SentenceTransformerEmbedder().languages == {"en"}  # the bundled MiniLM; nothing is loaded
    assert as_embedder("BAAI/bge-small-zh-v1.5").languages == {"zh", "en"}  # type: ignore[attr-defined]
    assert SentenceTransformerEmbedder("x/y", languages=["zh"]).languages == {"zh"}
    assert SentenceTransformerEmbedder("x/y", languages="zh").languages == {"zh"}
    assert embedder_languages(object()) is None


class _OneDirection:
    """Sends every text but the ``pet`` text to one direction, and the queries there too: its
    vector side ranks the pet memory last whatever is asked (a model that understands none of it)."""

    name = "test:one-direction"

    def __init__(self, languages: set[str] | None, pet: str) -> None:
        self.languages = languages
        self._pet = pet

    @property
    def dim(self) -> int:
        return 4

    def _vec(self, text: str) -> np.ndarray:
        v = np.array([0.0, 1.0, 0.0, 0.0] if text == self._pet else [1.0, 0.0, 0.0, 0.0], np.float32)
        return v

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vec(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec("")


MEMORIES = ["旺财是用户养的狗，旺财今年三岁", "邻居家的猫偶尔和旺财一起在院子里晒太阳，下午回家吃鱼", "明天下午三点和客户开会", "他最喜欢的水果是苹果", "北京今天很冷", "周末去爬山",
            "项目使用PostgreSQL数据库", "每周四早上开例会"]


@pytest.mark.parametrize(("languages", "lexical_wins"), [({"en"}, True), ({"zh", "en"}, False)])
def test_fusion_follows_the_declared_languages(languages: set[str], lexical_wins: bool) -> None:
    emb = _OneDirection(languages, pet=MEMORIES[0])
    with BeeWeave(embedder=emb) as m:
        for i, text in enumerate(MEMORIES):
            m.add(text, user_id="u", chunk_id=f"m{i}")
        hits = m.search("旺财是什么", user_id="u", k=3)
        assert m.backend.lexical_search({"旺财": 1}, build_filter(None), 1)[0][0] == "m0"
        # BM25's best match, although the vectors rank it last; a model said to cover Chinese
        # is trusted at full weight, and then its favourite of the two matches wins.
        assert hits[0].id == ("m0" if lexical_wins else "m1")


@pytest.mark.model
def test_a_chinese_model_built_here_is_used_at_full_weight(tmp_path) -> None:
    from sentence_transformers import SentenceTransformer, SentenceTransformerModelCardData
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer, models, pre_tokenizers

    chars = sorted(set("".join(MEMORIES)) | set("旺财是什么"))
    vocab = {"[UNK]": 0, "[PAD]": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")  # one token per character
    model = SentenceTransformer(modules=[StaticEmbedding(tok, embedding_dim=16)],
                                model_card_data=SentenceTransformerModelCardData(language=["zh"]))
    path = tmp_path / "tiny-static"  # a name that says nothing: the card says Chinese
    model.save(str(path))
    emb = as_embedder(str(path))
    assert emb.languages == {"zh"}  # type: ignore[attr-defined]
    with BeeWeave(embedder=emb) as m:
        for i, text in enumerate(MEMORIES):
            m.add(text, user_id="u", chunk_id=f"m{i}")
        assert m.dim == 16
        q = "旺财是什么"
        assert retriever_weights(q, embedder_languages(m.embedder), m.config.weights) == m.config.weights
        assert m.search(q, user_id="u", k=1)[0].id == "m0"
