"""Bad inputs are rejected with a BeeWeaveError and leave the store unchanged:
same count, same records, same search results before and after."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import (
    BeeWeave,
    BeeWeaveError,
    DimensionMismatchError,
    DuplicateIdError,
    EmptyContentError,
    HashingEmbedder,
    InvalidInputError,
    InvalidVectorError,
    KnowledgeChunk,
    NotFoundError,
    StoreClosedError,
    UnknownFilterError,
)
from tests.support import frozen_clock, sentence, snapshot

DIM = 32


def _seed(m: BeeWeave) -> list[str]:
    rnd = random.Random(5)
    ids = [m.add(sentence(rnd) + " python memory", user_id="ann", chunk_id=f"id{i}") for i in range(15)]
    ids += [m.add(sentence(rnd) + " deploy kubernetes coffee", user_id="bob") for _ in range(10)]
    return ids


@pytest.fixture
def seeded(embedder):
    # A frozen clock: weights decay from timestamps, so "changes nothing" compares at one instant.
    memory = BeeWeave(embedder=embedder, clock=frozen_clock)
    _seed(memory)
    yield memory
    memory.close()


def good(**kw):
    return {"content": "a perfectly fine memory", "user_id": "ann", **kw}


V = np.ones(DIM).tolist()

# (name, call, expected error). Each call is made against a seeded store.
ADD_CASES = [
    ("empty content", lambda m: m.add("", user_id="ann"), EmptyContentError),
    ("whitespace content", lambda m: m.add(" \n\t\u3000 ", user_id="ann"), EmptyContentError),
    ("int content", lambda m: m.add(42, user_id="ann"), InvalidInputError),
    ("bytes content", lambda m: m.add(b"bytes", user_id="ann"), InvalidInputError),
    ("None content", lambda m: m.add(None, user_id="ann"), InvalidInputError),
    ("no user", lambda m: m.add("text", user_id=None), InvalidInputError),
    ("empty user", lambda m: m.add("text", user_id=" "), InvalidInputError),
    ("int user", lambda m: m.add("text", user_id=7), InvalidInputError),
    ("short vector", lambda m: m.add("text", user_id="ann", embedding=[1.0] * (DIM - 1)), DimensionMismatchError),
    ("long vector", lambda m: m.add("text", user_id="ann", embedding=[1.0] * (DIM + 1)), DimensionMismatchError),
    ("2-d vector", lambda m: m.add("text", user_id="ann", embedding=[V]), DimensionMismatchError),
    ("NaN vector", lambda m: m.add("text", user_id="ann", embedding=[math.nan] + V[1:]), InvalidVectorError),
    ("inf vector", lambda m: m.add("text", user_id="ann", embedding=[math.inf] + V[1:]), InvalidVectorError),
    ("zero vector", lambda m: m.add("text", user_id="ann", embedding=[0.0] * DIM), InvalidVectorError),
    ("text vector", lambda m: m.add("text", user_id="ann", embedding=["a"] * DIM), InvalidVectorError),
    ("int id", lambda m: m.add("text", user_id="ann", chunk_id=123), InvalidInputError),
    ("empty id", lambda m: m.add("text", user_id="ann", chunk_id=""), InvalidInputError),
    ("chunk int id", lambda m: m.add_many([KnowledgeChunk("text", "ann", id=5)]), InvalidInputError),
    ("existing id", lambda m: m.add("text", user_id="ann", chunk_id="id3"), DuplicateIdError),
    ("existing id in batch", lambda m: m.add_many([good(chunk_id="new1"), good(chunk_id="id3")]), DuplicateIdError),
    ("duplicate in batch", lambda m: m.add_many([good(chunk_id="n1"), good(chunk_id="n2"), good(chunk_id="n1")]),
     DuplicateIdError),
    ("duplicate across batches", lambda m: m.add_many([good(chunk_id=f"b{i}") for i in range(5)] + [good(chunk_id="b0")],
                                                      batch_size=2), DuplicateIdError),
    ("duplicate chunks", lambda m: m.add_many([KnowledgeChunk("a", "ann", id="k"), KnowledgeChunk("b", "ann", id="k")]),
     DuplicateIdError),
    ("surrogate content", lambda m: m.add("bad \ud800 text", user_id="ann"), InvalidInputError),
    ("surrogate user", lambda m: m.add("text", user_id="a\udfff"), InvalidInputError),
    ("surrogate tag", lambda m: m.add("text", user_id="ann", tags=["ok", "\ud83d"]), InvalidInputError),
    ("surrogate metadata value", lambda m: m.add("text", user_id="ann", metadata={"k": "\ud800"}), InvalidInputError),
    ("surrogate metadata key", lambda m: m.add("text", user_id="ann", metadata={"\ud800": 1}), InvalidInputError),
    ("metadata object", lambda m: m.add("text", user_id="ann", metadata={"o": object()}), InvalidInputError),
    ("metadata set", lambda m: m.add("text", user_id="ann", metadata={"s": {1, 2}}), InvalidInputError),
    ("metadata NaN", lambda m: m.add("text", user_id="ann", metadata={"x": math.nan}), InvalidInputError),
    ("metadata bytes", lambda m: m.add("text", user_id="ann", metadata={"b": b"x"}), InvalidInputError),
    ("metadata not a mapping (int)", lambda m: m.add("text", user_id="ann", metadata=5), InvalidInputError),
    ("metadata not a mapping (str)", lambda m: m.add("text", user_id="ann", metadata="abc"), InvalidInputError),
    ("chunk metadata", lambda m: m.add_many([KnowledgeChunk("text", "ann", metadata={"o": object()})]),
     InvalidInputError),
    ("tags a string", lambda m: m.add("text", user_id="ann", tags="work"), InvalidInputError),
    ("tags not strings", lambda m: m.add("text", user_id="ann", tags=[1]), InvalidInputError),
    ("unknown record key", lambda m: m.add_many([good(colour="red")]), InvalidInputError),
    ("unknown field", lambda m: m.add("text", user_id="ann", colour="red"), InvalidInputError),
    ("bad timestamp", lambda m: m.add("text", user_id="ann", timestamp="last tuesday"), InvalidInputError),
    ("NaN timestamp", lambda m: m.add("text", user_id="ann", timestamp=math.nan), InvalidInputError),
    ("bad intent", lambda m: m.add("text", user_id="ann", intent="chit-chat"), InvalidInputError),
    ("NaN weight", lambda m: m.add("text", user_id="ann", weight=math.nan), InvalidInputError),
    ("records a dict", lambda m: m.add_many(good()), InvalidInputError),
    ("record not a dict", lambda m: m.add_many(["just a string"]), InvalidInputError),
    ("bad record last in batch", lambda m: m.add_many([good(), good(), good(content="")]), EmptyContentError),
    ("bad vector last in batch", lambda m: m.add_many([good(), good(embedding=[0.0] * DIM)]), InvalidVectorError),
]

# KnowledgeChunks skip the dict path's checks; they must be checked as strictly.
CHUNK_CASES = [
    ("chunk surrogate processed text",
     lambda m: m.add_many([KnowledgeChunk("fine", "ann", processed_content={"type": "text", "text": "bad \ud800"})]),
     InvalidInputError),
    ("chunk surrogate summary", lambda m: m.add_many([KnowledgeChunk("fine", "ann", summary="bad \ud800")]),
     InvalidInputError),
    ("chunk surrogate agent", lambda m: m.add_many([KnowledgeChunk("fine", "ann", agent_id="\ud800")]),
     InvalidInputError),
    ("chunk non-string tags", lambda m: m.add_many([KnowledgeChunk("fine", "ann", tags=[1, 2])]), InvalidInputError),
]

SEARCH_CASES = [
    ("negative k", lambda m: m.search("python", k=-1), InvalidInputError),
    ("float k", lambda m: m.search("python", k=2.5), InvalidInputError),
    ("bool k", lambda m: m.search("python", k=True), InvalidInputError),
    ("empty query", lambda m: m.search("  ", k=3), EmptyContentError),
    ("int query", lambda m: m.search(5), InvalidInputError),
    ("surrogate query", lambda m: m.search("py\ud800"), InvalidInputError),
    ("unknown filter", lambda m: m.search("python", filters={"colour": "red"}), UnknownFilterError),
    ("unknown filter in count", lambda m: m.count(filters={"colour": "red"}), UnknownFilterError),
    ("query vector NaN", lambda m: m.search("python", query_embedding=[math.nan] * DIM), InvalidVectorError),
    ("query vector dim", lambda m: m.search("python", query_embedding=[1.0] * 3), DimensionMismatchError),
    ("unknown fusion", lambda m: m.search("python", fusion="bogus"), InvalidInputError),
    ("min_score not a number", lambda m: m.search("python", min_score="high"), InvalidInputError),
    ("get int id", lambda m: m.get(3), InvalidInputError),
    ("get missing", lambda m: m.get("no-such-id"), NotFoundError),
    ("delete int id", lambda m: m.delete(3), InvalidInputError),
    ("get_many int id", lambda m: m.get_many(["id1", 4]), InvalidInputError),
]


@pytest.mark.parametrize(("name", "call", "error"), ADD_CASES + CHUNK_CASES + SEARCH_CASES,
                         ids=[c[0] for c in ADD_CASES + CHUNK_CASES + SEARCH_CASES])
def test_bad_input_is_rejected_and_changes_nothing(seeded, name, call, error) -> None:
    assert issubclass(error, BeeWeaveError)
    before = snapshot(seeded)
    with pytest.raises(error):
        call(seeded)
    assert snapshot(seeded) == before


def test_a_rejected_batch_writes_nothing_to_disk(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    m = BeeWeave(path, embedder=HashingEmbedder(DIM), clock=frozen_clock)
    _seed(m)
    before = snapshot(m)
    batch = [good(chunk_id=f"fresh{i}") for i in range(7)] + [good(chunk_id="id0")]
    with pytest.raises(DuplicateIdError):
        m.add_many(batch, batch_size=3)
    m.close()
    m = BeeWeave(path, embedder=HashingEmbedder(DIM), clock=frozen_clock)
    try:
        assert snapshot(m) == before
        assert not m.backend.contains([f"fresh{i}" for i in range(7)])
    finally:
        m.close()


def test_the_first_vector_fixes_the_dimension(memory) -> None:
    memory.add("first", user_id="ann", embedding=np.arange(1, DIM + 1).tolist())
    assert memory.dim == DIM
    with pytest.raises(DimensionMismatchError):
        memory.add("second", user_id="ann", embedding=[1.0] * (DIM * 2))
    assert memory.count() == 1


def test_errors_inherit_the_builtin_a_caller_expects() -> None:
    assert issubclass(InvalidInputError, ValueError)
    assert issubclass(UnknownFilterError, KeyError) and issubclass(NotFoundError, KeyError)
    assert str(NotFoundError("no chunk 'x'")) == "no chunk 'x'"  # no KeyError repr quoting


def test_k_zero_returns_nothing(seeded) -> None:
    assert seeded.search("python", k=0) == []


def test_search_on_an_empty_store(memory) -> None:
    assert memory.search("anything at all", k=5) == []
    assert memory.count() == 0


def test_closed_store_raises_store_closed(seeded) -> None:
    seeded.close()
    for call in (lambda: seeded.add("text", user_id="ann"), lambda: seeded.search("python"),
                 lambda: seeded.count(), lambda: seeded.get("id1"), lambda: seeded.delete("id1")):
        with pytest.raises(StoreClosedError):
            call()
    seeded.close()  # closing twice is harmless


@pytest.mark.model
def test_unknown_model_name_is_a_beeweave_error() -> None:
    m = BeeWeave(embedder="no-such-org/no-such-model-xyz")
    try:
        with pytest.raises(BeeWeaveError):
            m.add("text", user_id="ann")
        assert m.count() == 0
    finally:
        m.close()
