"""Chinese and mixed Chinese/English memories are found through the lexical (BM25)
path from either language's keywords."""

from __future__ import annotations

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.filters import build_filter
from tests.support import term_counts

MEMORIES = {
    "zh": "用户喜欢用中文回答问题，尤其是技术问题",
    "mixed": "项目使用 PostgreSQL 数据库存储 embeddings，部署在 Kubernetes 集群",
    "en1": "The user prefers concise answers about Python programming",
    "en2": "Weekly meeting moved to Thursday morning at ten",
    "en3": "Deploy the web server behind a load balancer",
    "zh2": "明天下午三点和客户开会讨论预算",
    "zh3": "他最喜欢的水果是苹果和香蕉",
    "en4": "Coffee with extra milk, no sugar",
    "en5": "The invoice for the hotel stay is due next Friday",
    "zh4": "北京的天气今天很冷，记得带外套",
}

CASES = [
    ("中文回答", "zh"),
    ("用户喜欢什么语言的回答", "zh"),
    ("技术问题", "zh"),
    ("数据库", "mixed"),
    ("集群部署", "mixed"),
    ("PostgreSQL", "mixed"),
    ("postgresql embeddings", "mixed"),
    ("kubernetes", "mixed"),
    ("客户开会", "zh2"),
    ("预算", "zh2"),
    ("苹果", "zh3"),
    ("北京天气", "zh4"),
    ("Python programming", "en1"),
]


@pytest.fixture(scope="module")
def zh_memory():
    # One store for the module: the Chinese segmenter takes a while to load.
    m = BeeWeave(embedder=HashingEmbedder(32))
    ids = {key: m.add(text, user_id="u", chunk_id=key) for key, text in MEMORIES.items()}
    assert ids == {k: k for k in MEMORIES}
    yield m
    m.close()


def test_tokenizer_segments_chinese_and_keeps_english(zh_memory) -> None:
    tok = zh_memory.tokenizer
    toks = tok(MEMORIES["mixed"])
    assert "数据库" in toks and "postgresql" in toks and "kubernet" in toks and "集群" in toks
    assert "的" not in tok("北京的天气")  # Chinese stop word
    assert "中华" in tok("中华人民共和国")  # search mode also yields the words inside long words


@pytest.mark.parametrize(("query", "want"), CASES)
def test_lexical_path_finds_the_memory(zh_memory, query: str, want: str) -> None:
    m = zh_memory
    ranked = m.backend.lexical_search(term_counts(m.tokenizer(query)), build_filter(None), 5)
    assert ranked, f"no lexical match for {query!r}"
    assert ranked[0][0] == want
    assert ranked[0][1] > 0
    hits = m.search(query, user_id="u", k=3)
    assert hits[0].id == want
    assert hits[0].sources["lexical"].rank == 1


def test_mixed_memory_found_from_either_language(zh_memory) -> None:
    m = zh_memory
    for query in ("数据库", "PostgreSQL", "Kubernetes 集群"):
        assert m.search(query, user_id="u", k=1)[0].id == "mixed"


def test_chinese_query_does_not_match_unrelated_chinese(zh_memory) -> None:
    m = zh_memory
    ranked = m.backend.lexical_search(term_counts(m.tokenizer("苹果")), build_filter(None), 10)
    assert [i for i, _ in ranked] == ["zh3"]


@pytest.mark.slow
@pytest.mark.model
def test_chinese_with_the_real_model() -> None:
    m = BeeWeave()  # the bundled all-MiniLM-L6-v2
    try:
        for key, text in MEMORIES.items():
            m.add(text, user_id="u", chunk_id=key)
        assert m.dim == 384
        for query, want in (("中文回答", "zh"), ("数据库", "mixed"), ("PostgreSQL database", "mixed"),
                            ("客户开会讨论预算", "zh2")):
            hits = m.search(query, user_id="u", k=3)
            assert hits[0].id == want, (query, [h.id for h in hits])
            assert "lexical" in hits[0].sources and "vector" in hits[0].sources
    finally:
        m.close()
