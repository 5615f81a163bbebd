"""A writer, or a searcher, still on the old model after another process re-embedded the store.

``reembed`` switches a store to a new model in one transaction. Another BeeWeave on the same
store (another process, or another instance in this one) opened before the switch still embeds
with the old model: were its add or its edit stored, the store (recorded as the new model)
would hold an old-model vector, searched with new-model queries (a meaningless cosine) and
repaired by nothing. The backend checks, in the transaction that stores a vector, that the
store's recorded model is the one the vector was computed with: the write is refused
(``EmbedderChangedError``, nothing stored) and the caller reopens the store. The ingest
worker keeps such events queued (not dead letters) for a BeeWeave on the new model. Its
searches are refused the same way (see "searches" below), and a server answers them 503.

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


# -- searches --------------------------------------------------------------------------------
# A search in that stale process embeds its query with the old model: compared with the
# store's new-model vectors, the vector half of every score is meaningless (same dimension:
# wrong memories, no error), or numpy refuses the product (another dimension). The backend
# knows which model the vectors it searches were recorded for (the store's meta ``embedder``,
# read by the catch-up that brings those vectors in) and refuses a query vector named for
# another (``EmbedderChangedError``), as the writes do.

def _refused_search(m: BeeWeave, new: Model, **kw: object) -> None:
    with pytest.raises(EmbedderChangedError) as refused:
        m.search("green tea", user_id=USER, k=1, **kw)  # type: ignore[arg-type]
    assert isinstance(refused.value, EmbedderMismatchError)
    text = str(refused.value)
    assert new.name in text and OLD.name in text and "open the store again" in text


@pytest.mark.parametrize("new_dim", [32, 64], ids=["same-dim", "other-dim"])
def test_a_search_opened_before_a_switch_is_refused(opener, new_dim: int) -> None:
    new = new_model(new_dim)
    first = opener(OLD)
    first.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
    first.add("My sister lives in Lyon.", user_id=USER, chunk_id="m2")
    stale = opener(OLD)
    # It searched before the switch: its index is current and (PostgreSQL) trusted, so its
    # next search ranks before it asks the database.
    assert [h.id for h in stale.search("green tea", user_id=USER, k=1)] == ["m1"]
    cold = opener(OLD)  # opened before the switch, first search after it (PostgreSQL: loads then)
    assert first.reembed(new) == 2

    for m in (stale, cold):
        _refused_search(m, new)
        _refused_search(m, new)  # every time, not once
    # A query vector the caller gives is for the model this BeeWeave uses: refused too.
    _refused_search(stale, new, query_embedding=OLD.embed_query("green tea").tolist())
    assert stale.get("m1").content == "I drink green tea every morning."  # reads of records go on
    assert stale.update("m2", tags=["family"]).tags == ["family"]

    # The instance that switched searches with the new model; so does the store opened again.
    assert [h.id for h in first.search("green tea", user_id=USER, k=1)] == ["m1"]
    reopened = opener(new)
    assert [h.id for h in reopened.search("sister Lyon", user_id=USER, k=1)] == ["m2"]
    first.add("We adopted a cat.", user_id=USER, chunk_id="m3")
    assert [h.id for h in reopened.search("adopted cat", user_id=USER, k=1)] == ["m3"]
    assert [h.id for h in first.search("sister Lyon", user_id=USER, k=1)] == ["m2"]


def test_an_empty_store_switched_refuses_the_stale_search_once_it_holds_vectors(opener) -> None:
    # The switch of an empty store writes only the model (no vector, nothing logged): the
    # stale process has nothing to compare its query with until new-model vectors arrive,
    # and the catch-up that brings them also reads the model they were recorded for.
    new = new_model(32)
    first = opener(OLD)
    stale = opener(OLD)
    assert stale.search("green tea", user_id=USER) == []
    assert first.reembed(new) == 0
    assert stale.search("green tea", user_id=USER) == []  # nothing stored: nothing compared
    first.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
    _refused_search(stale, new)
    assert [h.id for h in first.search("green tea", user_id=USER, k=1)] == ["m1"]


def test_processes_that_saw_no_switch_search_as_before(opener) -> None:
    # Two instances on one store and one model, none re-embedding: every search of either
    # answers, whoever recorded the model and whoever wrote last.
    first, second = opener(OLD), opener(OLD)
    assert second.search("green tea", user_id=USER) == []
    first.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")  # records the model
    assert [h.id for h in second.search("green tea", user_id=USER, k=1)] == ["m1"]
    second.add("My sister lives in Lyon.", user_id=USER, chunk_id="m2")
    assert [h.id for h in first.search("sister Lyon", user_id=USER, k=1)] == ["m2"]
    first.update("m1", content="I drink black coffee every morning.")
    for m in (first, second):
        assert [h.id for h in m.search("black coffee", user_id=USER, k=1)] == ["m1"]
        assert [h.id for h in m.search("sister Lyon", user_id=USER, k=1)] == ["m2"]
    assert [h.id for h in second.search("coffee", user_id=USER, k=1,
                                        query_embedding=OLD.embed_query("black coffee").tolist())] == ["m1"]


@pytest.mark.parametrize("new_dim", [64, 32], ids=["same-dim", "other-dim"])
def test_a_server_opened_before_a_switch_answers_503_until_restarted(tmp_path: Path, new_dim: int) -> None:
    from beeweave_core.server import ServerConfig
    from tests.service.service_support import ACME_KEY, start_server

    srv = start_server(ServerConfig(tmp_path, {ACME_KEY: "acme"}, embedder="beeweave:hashing-64"))
    try:
        with srv.http(ACME_KEY) as http:
            client = srv.client(ACME_KEY)
            client.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
            body = {"query": "green tea", "user_id": USER, "k": 1}
            assert http.post("/api/v1/search", json=body).status_code == 200
            with BeeWeave(tmp_path / "acme.db", embedder=HashingEmbedder(64)) as other:  # `beeweave reembed`
                assert other.reembed(Model(f"test:new-{new_dim}", new_dim, 2)) == 1
            r = http.post("/api/v1/search", json=body)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "EmbedderChangedError"
            assert "restart the server" in r.json()["detail"]
            with pytest.raises(EmbedderChangedError):  # the client raises the engine's error
                client.search("green tea", user_id=USER, k=1)
            w = http.post("/api/v1/memories", json={"content": "We adopted a cat.", "user_id": USER})
            assert w.status_code == 503 and w.json()["error"] == "EmbedderChangedError"  # a write too
            assert "Retry-After" not in w.headers  # retrying soon does not help: a restart does
    finally:
        srv.stop()


def test_a_server_on_the_stores_own_model_follows_a_switch_without_a_restart(tmp_path: Path) -> None:
    """No model configured: the server opens each store on the model it records, so after
    another process's switch one request is refused (503, Retry-After) and the next is served
    from the store opened again, on the new model."""
    from beeweave_core.server import ServerConfig
    from tests.service.service_support import ACME_KEY, start_server

    with BeeWeave(tmp_path / "acme.db", embedder=HashingEmbedder(64)) as m:  # the store, on its first model
        m.add("I drink green tea every morning.", user_id=USER, chunk_id="m1")
        m.add("My sister lives in Lyon.", user_id=USER, chunk_id="m2")
    srv = start_server(ServerConfig(tmp_path, {ACME_KEY: "acme"}))  # no embedder: each store's own
    try:
        with srv.http(ACME_KEY) as http:
            body = {"query": "green tea", "user_id": USER, "k": 1}
            assert [h["chunk"]["id"] for h in http.post("/api/v1/search", json=body).json()["hits"]] == ["m1"]
            with BeeWeave(tmp_path / "acme.db", embedder=HashingEmbedder(64)) as other:  # `beeweave reembed`
                assert other.reembed(HashingEmbedder(32)) == 2
            r = http.post("/api/v1/search", json=body)
            assert r.status_code == 503 and r.json()["error"] == "EmbedderChangedError", r.text
            assert r.headers.get("Retry-After") == "1" and "opens it on the model it records" in r.json()["detail"]
            again = http.post("/api/v1/search", json=body)
            assert again.status_code == 200, again.text
            assert [h["chunk"]["id"] for h in again.json()["hits"]] == ["m1"]
            added = http.post("/api/v1/memories", json={"content": "We adopted a cat.", "user_id": USER})
            assert added.status_code == 201, added.text
        with BeeWeave(tmp_path / "acme.db") as reopened:  # every vector the new model's
            assert reopened.embedder.name == HashingEmbedder(32).name
            found = reopened.search("adopted a cat", user_id=USER, k=1, abstain_below=0)
            assert found and found[0].chunk.content == "We adopted a cat."
    finally:
        srv.stop()
