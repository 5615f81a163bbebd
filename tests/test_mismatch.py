"""A store remembers its embedder and tokenizer: reopening it with different ones is
refused with an error that says how to fix it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from beeweave_core import (
    DEFAULT_MODEL_NAME,
    BeeWeave,
    BeeWeaveError,
    EmbedderMismatchError,
    HashingEmbedder,
    TokenizerConfig,
    TokenizerMismatchError,
)
from tests.support import frozen_clock


@pytest.fixture
def store_path(db_path: Path) -> Path:
    m = BeeWeave(db_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=TokenizerConfig(stemmer="english"))
    m.add("running agents remember preferences", user_id="u", chunk_id="one")
    m.close()
    return db_path


@pytest.mark.parametrize("other", [HashingEmbedder(32), DEFAULT_MODEL_NAME], ids=["other-hashing", "default-model"])
def test_other_embedder_is_refused_with_a_fix(store_path: Path, other) -> None:
    with pytest.raises(EmbedderMismatchError) as info:
        BeeWeave(store_path, embedder=other)
    assert isinstance(info.value, BeeWeaveError)
    msg = str(info.value)
    assert "beeweave:hashing-16" in msg  # what the store was built with
    assert "embedder=" in msg  # how to open it
    assert "reembed" in msg  # how to move it to the new model
    other_name = other if isinstance(other, str) else other.name
    assert other_name in msg


def test_without_embedder_a_store_opens_with_the_model_it_recorded(store_path: Path) -> None:
    with BeeWeave(store_path, clock=frozen_clock) as m:
        assert m.embedder.name == "beeweave:hashing-16"
        assert [h.id for h in m.search("agent", k=1)] == ["one"]


def test_store_still_opens_with_its_own_embedder_after_a_refusal(store_path: Path) -> None:
    with pytest.raises(EmbedderMismatchError):
        BeeWeave(store_path, embedder=HashingEmbedder(32))
    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock) as m:
        assert [h.id for h in m.search("agent", k=1)] == ["one"]


@pytest.mark.model  # following the hint today makes sentence-transformers look for a model
def test_following_the_mismatch_hint_opens_a_working_store(store_path: Path) -> None:
    """The message says ``open it with embedder=<x>``; doing exactly that must work."""
    with pytest.raises(EmbedderMismatchError) as info:
        BeeWeave(store_path, embedder=HashingEmbedder(32))
    hinted = re.search(r"embedder=('[^']*'|\"[^\"]*\")", str(info.value))
    if hinted is None:
        pytest.skip("the message no longer proposes a literal embedder= value")
    m = BeeWeave(store_path, embedder=ast.literal_eval(hinted.group(1)))
    try:
        assert [h.id for h in m.search("agent", k=1)] == ["one"]
    finally:
        m.close()


def test_other_tokenizer_is_refused(store_path: Path) -> None:
    with pytest.raises(TokenizerMismatchError) as info:
        BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=TokenizerConfig(stemmer=None))
    assert isinstance(info.value, BeeWeaveError)
    assert "tokenizer" in str(info.value)
    with pytest.raises(TokenizerMismatchError):
        BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=TokenizerConfig(chinese=False))


def test_stored_tokenizer_is_used_when_none_is_given(store_path: Path) -> None:
    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock) as m:
        assert m.tokenizer.config == TokenizerConfig(stemmer="english")
        # Same config passed explicitly is fine.
    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=TokenizerConfig()) as m:
        assert m.search("run", k=1)[0].id == "one"


def test_new_store_remembers_a_custom_tokenizer(db_path: Path) -> None:
    cfg = TokenizerConfig(stemmer=None, stopwords=False)
    with BeeWeave(db_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=cfg) as m:
        m.add("the running dogs", user_id="u")
        assert m.tokenizer("the running dogs") == ["the", "running", "dogs"]
    with BeeWeave(db_path, embedder=HashingEmbedder(16), clock=frozen_clock) as m:
        assert m.tokenizer.config == cfg
    with pytest.raises(TokenizerMismatchError):
        BeeWeave(db_path, embedder=HashingEmbedder(16), clock=frozen_clock, tokenizer=TokenizerConfig())


def test_other_index_config_is_refused_with_a_fix(store_path: Path) -> None:
    from beeweave_core import IndexConfig

    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock) as m:
        stored = m.backend.index_config
        before = [(h.id, h.score) for h in m.search("agent", k=3)]
    with pytest.raises(BeeWeaveError) as info:
        BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock, index=IndexConfig(k1=stored.k1 + 0.5))
    # The fix names the argument the caller actually passed to BeeWeave.
    assert "index=" in str(info.value), str(info.value)
    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock) as m:
        assert m.backend.index_config == stored
        assert [(h.id, h.score) for h in m.search("agent", k=3)] == before
    with BeeWeave(store_path, embedder=HashingEmbedder(16), clock=frozen_clock, index=stored) as m:  # the same config is fine
        assert m.count() == 1
