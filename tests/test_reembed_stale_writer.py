"""A writer still on the old model after another process re-embedded the store.

``reembed`` switches a store to a new model in one transaction. Another BeeWeave on the same
store (another process, or another instance in this one) opened before the switch still embeds
with the old model: were its add or its edit stored, the store (recorded as the new model)
would hold an old-model vector, searched with new-model queries (a meaningless cosine) and
repaired by nothing. The backend checks, in the transaction that stores a vector, that the
store's recorded model is the one the vector was computed with: the write is refused
(``EmbedderChangedError``, nothing stored) and the caller reopens the store. The ingest
worker keeps such events queued (not dead letters) for a BeeWeave on the new model.

On SQLite (two instances on one file) and PostgreSQL (two on one tenant). Models of the same
dimension are the case nothing caught before; another dimension was refused before too, as a
``DimensionMismatchError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import BeeWeave, EmbedderChangedError, EmbedderMismatchError, HashingEmbedder
from beeweave_core.filters import build_filter
from beeweave_core.ingest import IngestConfig
from beeweave_core.records import ALL_STATUSES
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

USER = "alice"


class Model:
    """A model of its own: the hashing embedder's vectors with their coordinates shuffled by
    ``seed``, so two of them (same dimension) give different vectors for one text."""

    def __init__(self, name: str, dim: int, seed: int) -> None:
        self.name = name
        self._dim = dim
        self._inner = HashingEmbedder(dim)
        self._perm = np.random.default_rng(seed).permutation(dim)

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._inner.embed_documents(texts)[:, self._perm]

    def embed_query(self, text: str) -> np.ndarray:
        return self._inner.embed_query(text)[self._perm]


OLD = Model("test:old-32", 32, 1)


def new_model(dim: int) -> Model:
    return Model(f"test:new-{dim}", dim, 2)


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., BeeWeave]]:
    """``opener(embedder, **kw)``: another BeeWeave on one and the same store."""
    opened: list[BeeWeave] = []
    tenant = new_tenant("stale") if request.param == "postgres" else ""

    def open_(embedder: Model, **kw: object) -> BeeWeave:
        if request.param == "sqlite":
            m = BeeWeave(tmp_path / "store.db", embedder=embedder, **kw)  # type: ignore[arg-type]
        else:
            m = BeeWeave.from_url(request.getfixturevalue("pg_url"), tenant=tenant, embedder=embedder,
                                  **kw)  # type: ignore[arg-type]
        opened.append(m)
        return m

    open_.kind = request.param  # type: ignore[attr-defined]
    yield open_
    for m in opened:
        m.close()


def _all(m: BeeWeave) -> dict[str, str]:
    return {c.id: c.content for c in m.backend.scan(build_filter({"status": ALL_STATUSES}))}


def _assert_all_vectors_are(m: BeeWeave, model: Model) -> None:
    """Every stored vector is ``model``'s for its record's text, and ``model`` is recorded."""
    texts = _all(m)
    vectors = m.backend.get_vectors(list(texts))
    assert set(vectors) == set(texts)
    for cid, text in texts.items():
        want = model.embed_documents([text])[0]
        assert len(vectors[cid]) == len(want) and np.allclose(vectors[cid], want, atol=1e-5), cid
    assert m.backend.get_meta("embedder") is not None
    assert model.name in m.backend.get_meta("embedder")  # type: ignore[operator]


@pytest.mark.parametrize("new_dim", [32, 64], ids=["same-dim", "other-dim"])
def test_a_writer_opened_before_a_switch_stores_no_old_model_vector(opener, new_dim: int) -> None:
    new = new_model(new_dim)
    first = opener(OLD)
    first.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
    stale = opener(OLD)  # opened before the switch, with the old model
    stale.add("My sister lives in Lyon.", user_id=USER, chunk_id="m2")
    assert first.reembed(new) == 2

    # An add: refused, nothing stored.
    with pytest.raises(EmbedderChangedError) as refused:
        stale.add("I moved to Grenoble in May.", user_id=USER, chunk_id="m3")
    assert isinstance(refused.value, EmbedderMismatchError)  # existing handlers catch it
    assert new.name in str(refused.value) and "open" in str(refused.value)
    # A batch with its own vectors (computed for the model this instance knows): refused too.
    with pytest.raises(EmbedderChangedError):
        stale.add_many([{"content": "Tea with lemon.", "user_id": USER, "chunk_id": "m4",
                         "embedding": OLD.embed_documents(["Tea with lemon."])[0].tolist()}])
    # An edit of the text: refused, nothing changed, no version recorded.
    with pytest.raises(EmbedderChangedError):
        stale.update("m1", content="I drink black coffee every morning.")
    # An edit that stores no vector is fine.
    assert stale.update("m2", tags=["family"]).tags == ["family"]

    assert _all(first) == {"m1": "I drink green tea every morning.", "m2": "My sister lives in Lyon."}
    assert first.history("m1") == []
    _assert_all_vectors_are(first, new)

    # The instance that switched writes with the new model; so does a store opened again.
    first.add("We adopted a cat.", user_id=USER, chunk_id="m5")
    first.update("m2", content="My sister moved to Paris.")
    reopened = opener(new)
    reopened.add("I moved to Grenoble in May.", user_id=USER, chunk_id="m3")
    reopened.update("m1", content="I drink black coffee every morning.")
    assert set(_all(first)) == {"m1", "m2", "m3", "m5"}
    _assert_all_vectors_are(first, new)
    assert [h.id for h in reopened.search("black coffee", user_id=USER, k=1)] == ["m1"]


def test_the_ingest_worker_keeps_a_stale_writers_events_for_the_new_model(opener) -> None:
    new = new_model(32)
    first = opener(OLD)
    first.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
    stale = opener(OLD, ingest=IngestConfig(retry_max_delay=0.2))
    assert first.reembed(new) == 1

    stale.ingest({"user_id": USER, "id": "e1", "query": "where do I live now?",
                  "response": "You moved to Grenoble in May."})
    drained = stale.flush(2)  # its worker tries, is refused, and gives the event back to the queue
    if opener.kind == "sqlite":
        assert not drained and set(_all(first)) == {"m1"}  # nobody else works this queue yet
    # On PostgreSQL the queue is the tenant's: the first instance's worker, on the new model,
    # takes the event the stale one gave back and stores it.
    assert stale.dead_letters() == []
    _assert_all_vectors_are(first, new)
    stale.close()

    reopened = opener(new, ingest=IngestConfig())
    assert reopened.flush(20)
    assert reopened.dead_letters() == []
    assert len(_all(first)) > 1  # the event's memory, stored with the new model
    _assert_all_vectors_are(first, new)
