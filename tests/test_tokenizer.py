"""The tokenizer's Chinese handling (version 2) and the stored-configuration contract: a
store keeps the tokenizer it was built with, new defaults apply to new stores only."""

from __future__ import annotations

import json

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import InvalidInputError, TokenizerMismatchError
from beeweave_core.tokenizer import BIGRAM_PREFIX, Tokenizer, TokenizerConfig

V1 = {"lowercase": True, "stopwords": True, "stemmer": "english", "chinese": True, "version": 1}


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer()


def words(tokens: list[str]) -> list[str]:
    return [t for t in tokens if not t.startswith(BIGRAM_PREFIX)]


def test_full_width_and_traditional_fold_to_one_term(tok: Tokenizer) -> None:
    assert words(tok("ＡＢＣ　１２３")) == words(tok("abc 123"))
    assert "记忆" in tok("我們的記憶") and "记忆" in tok("我们的记忆")
    assert words(tok("電腦軟體")) == words(tok("电脑软体"))


def test_stop_words_are_dropped_from_words_and_bigrams(tok: Tokenizer) -> None:
    out = tok("他的电脑是什么牌子的？")
    assert not {"的", "是", "什么", "他"} & set(out)
    assert "电脑" in out and "牌子" in out
    assert BIGRAM_PREFIX + "的电" not in out  # a bigram with a stop character is noise
    assert BIGRAM_PREFIX + "电脑" in out


def test_bigrams_bridge_a_segmentation_mismatch(tok: Tokenizer) -> None:
    # jieba cuts the same name differently alone and in a sentence; the bigrams still meet.
    doc, query = set(tok("户外徒步模型创作之旅的主要内容")), set(tok("徒步模型"))
    assert BIGRAM_PREFIX + "徒步" in doc & query and BIGRAM_PREFIX + "步模" in doc & query


def test_numbers_match_in_either_form(tok: Tokenizer) -> None:
    assert "3000" in tok("规模是三千人") and "3000" in tok("规模是3000人")
    assert {"2024", "4", "1"} <= set(tok("二零二四年四月一号")) & set(tok("2024年04月01日"))
    assert "11" in tok("十一月") and "4" in tok("04月")
    assert "3" in tok("下午三点") and "3" in tok("下午3点")
    # ordinary words with a numeral character are no numbers
    assert not {"1", "10", "10001"} & set(tok("一起去十分好，万一下雨"))


def test_english_is_unchanged_but_for_leading_zeros(tok: Tokenizer) -> None:
    v1 = Tokenizer(TokenizerConfig.from_dict(V1))
    text = "Caroline went to the LGBTQ support group on 7 May 2023 at 09:30"
    assert tok(text) == [t.lstrip("0") or "0" if t.isdigit() else t for t in v1(text)]
    assert tok("007") == ["7"] and tok("0") == ["0"]


def test_a_stored_v1_configuration_reloads_as_v1() -> None:
    cfg = TokenizerConfig.from_dict(V1)
    assert cfg.version == 1 and not cfg.cjk_bigrams and not cfg.traditional_to_simplified and not cfg.numbers
    assert cfg.chinese_stopwords == "v1"
    old = Tokenizer(cfg)
    assert old("我們的記憶三千") == ["我們", "記憶", "三千"]  # cut exactly as version 1 did
    assert TokenizerConfig.from_dict(TokenizerConfig().to_dict()) == TokenizerConfig()


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        TokenizerConfig.from_dict({**V1, "nonsense": 1})
    with pytest.raises(InvalidInputError):
        TokenizerConfig.from_dict(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Tokenizer(TokenizerConfig(chinese_stopwords="v9"))


def test_an_existing_v1_store_keeps_its_tokenizer(tmp_path) -> None:
    path = tmp_path / "old.db"
    with BeeWeave(path, embedder=HashingEmbedder(16)) as m:
        m.add("三千人的會議", user_id="u", chunk_id="a")
    # Make the store look like one saved by a release with the version-1 tokenizer.
    import sqlite3

    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        meta = next(r[0] for r in rows if "meta" in r[0])
        cols = [c[1] for c in con.execute(f"PRAGMA table_info({meta})")]
        con.execute(f"UPDATE {meta} SET {cols[1]} = ? WHERE {cols[0]} = 'tokenizer'", (json.dumps(V1),))
        con.commit()
    finally:
        con.close()
    with BeeWeave(path, embedder=HashingEmbedder(16)) as m:
        assert m.tokenizer.config == TokenizerConfig.from_dict(V1)
        m.repair()  # the index is rebuilt with the stored (v1) tokenizer
        assert m.search("會議", user_id="u", k=1)[0].id == "a"
    with pytest.raises(TokenizerMismatchError):
        BeeWeave(path, embedder=HashingEmbedder(16), tokenizer=TokenizerConfig())


def test_a_new_store_gets_the_new_defaults(tmp_path) -> None:
    with BeeWeave(tmp_path / "new.db", embedder=HashingEmbedder(16)) as m:
        assert m.tokenizer.config == TokenizerConfig() and m.tokenizer.config.version == 2
        m.add("金融科技精英论坛的规模是三千人。", user_id="u", chunk_id="a")
        for i, text in enumerate(["银行柜员招聘会在深圳举行。", "明天下午和客户开会", "他最喜欢的水果是苹果",
                                  "北京今天很冷", "周末去爬山"]):
            m.add(text, user_id="u", chunk_id=f"other{i}")
        assert m.search("論壇有多少人，3000嗎", user_id="u", k=1)[0].id == "a"
