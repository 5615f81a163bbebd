"""Lost updates in an import and a re-embed (issue 47): each reads the store, then writes. Another
process may change the same record in between; its change was acknowledged and must survive.
The window is held open as in ``tests/conformance_lost_updates.py``: just before the write
reaches the backend, "another process" (the backend's own methods, past the engine and its
lock) writes. On SQLite and on PostgreSQL (``tests/postgres/pg_support.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from beeweave_core import BeeWeave, HashingEmbedder, KnowledgeChunk
from beeweave_core.engine.watch import WATCHES
from beeweave_core.lifecycle.facts import FACTS
from beeweave_core.server.service import MemoryService
from beeweave_core.store.base import ChunkRow
from tests.conformance_lost_updates import NEW_TEXT, OtherProcess, interleave
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

DIM = 64
HOME = "alice\x1fhome"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], BeeWeave]]:
    """``store()``: a new, empty store on the backend."""
    opened: list[BeeWeave] = []

    def make() -> BeeWeave:
        if request.param == "sqlite":
            m = BeeWeave(tmp_path / f"s{len(opened)}.db", embedder=HashingEmbedder(DIM))
        else:
            m = BeeWeave.from_url(request.getfixturevalue("pg_url"), tenant=new_tenant("lost"),
                                  embedder=HashingEmbedder(DIM))
        opened.append(m)
        return m

    yield make
    for m in opened:
        m.close()


def _export(fact: dict[str, Any]) -> dict[str, Any]:
    """alice's export: a memory, a fact and a watch."""
    src = BeeWeave(None, embedder=HashingEmbedder(DIM))
    try:
        cid = src.add("I moved to Lyon in March.", user_id="alice", chunk_id="a0")
        src.backend.kv_put(FACTS, HOME, {**fact, "chunk_id": cid}, user_id="alice")
        src.watch("trips to Paris", user_id="alice")
        return MemoryService(src).export_user("alice")
    finally:
        src.close()


def _before_kv_write(monkeypatch: pytest.MonkeyPatch, m: BeeWeave, namespace: str, key: str,
                     then: Callable[[], None]) -> list[str]:
    """Run ``then`` once, just before the engine's first write of ``namespace``/``key``."""
    fired: list[str] = []
    for name in ("kv_put", "kv_update"):
        original = getattr(m.backend, name)

        def wrapper(ns: str, k: str, *args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            if not fired and (ns, k) == (namespace, key):
                fired.append(_name)
                then()
            return _original(ns, k, *args, **kw)

        monkeypatch.setattr(m.backend, name, wrapper)
    return fired


# -- import ----------------------------------------------------------------------------------------
def test_an_import_keeps_a_fact_another_process_wrote_after_the_import_read_it(store, monkeypatch):
    m = store()
    data = _export({"subject_key": "home", "value": "Lyon"})
    theirs = {"subject_key": "home", "value": "Grenoble", "chunk_id": "a0"}
    fired = _before_kv_write(monkeypatch, m, FACTS, HOME,
                             lambda: m.backend.kv_put(FACTS, HOME, theirs, user_id="alice"))
    report = MemoryService(m).import_user(data)
    assert fired, "the import wrote no fact: the window never opened"
    assert m.backend.kv_get(FACTS, HOME) == theirs
    assert report.other["facts"] == 0  # it wrote none
    assert m.get("a0").content == "I moved to Lyon in March."  # the rest of the export is there


def test_a_repeated_import_does_not_bring_back_a_watch_deleted_after_it_read_it(store, monkeypatch):
    m = store()
    data = _export({"subject_key": "home", "value": "Lyon"})
    MemoryService(m).import_user(data)
    (wid, held), = list(m.backend.kv_scan(WATCHES))
    m.backend.kv_put(WATCHES, wid, {**held, "fired": 3}, user_id="alice")  # the store's differs: rewritten
    fired = _before_kv_write(monkeypatch, m, WATCHES, wid, lambda: m.backend.kv_delete(WATCHES, wid))
    MemoryService(m).import_user(data)
    assert fired, "the import wrote no watch: the window never opened"
    assert m.backend.kv_get(WATCHES, wid) is None


def test_a_repeated_import_still_writes_the_exports_value_over_one_nobody_changed(store):
    """What an import does without a race stays: the export's value replaces the store's."""
    m = store()
    data = _export({"subject_key": "home", "value": "Lyon"})
    MemoryService(m).import_user(data)
    m.backend.kv_put(FACTS, HOME, {"subject_key": "home", "value": "Nice"}, user_id="alice")
    report = MemoryService(m).import_user(data)
    assert m.backend.kv_get(FACTS, HOME)["value"] == "Lyon" and report.other["facts"] == 1


# -- reembed ---------------------------------------------------------------------------------------
class Renamed(HashingEmbedder):
    """The hashing model under another name: a re-embed to it recomputes every vector."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.name = "test:renamed-64"


class Negated(HashingEmbedder):
    """A model whose vectors differ from the old one's: which model embedded a record shows."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.name = "test:negated-64"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return -np.asarray(super().embed_documents(texts))


def _reembed_racing(m: BeeWeave, monkeypatch: pytest.MonkeyPatch, cid: str, then: Callable[[], None],
                    to: HashingEmbedder | None = None) -> None:
    fired = interleave(monkeypatch, m.backend, cid, then, on=("replace", "modify"))
    m.reembed(to or Renamed())
    assert fired, "the re-embed wrote nothing of it: the window never opened"


def test_a_reembed_keeps_an_edit_made_before_it_switches(store, monkeypatch):
    m = store()
    cid = m.add("the meeting is on monday at ten", user_id="u")
    other = OtherProcess(m.backend)
    _reembed_racing(m, monkeypatch, cid, lambda: other.edit(cid, pinned=True, tags=["moved"]))
    got = m.get(cid)
    assert got.pinned and got.tags == ["moved"]


def test_a_reembed_does_not_bring_back_a_memory_deleted_before_it_switches(store, monkeypatch):
    m = store()
    cid = m.add("the meeting is on monday at ten", user_id="u")
    kept = m.add("lunch is at noon on tuesday", user_id="u")
    other = OtherProcess(m.backend)
    _reembed_racing(m, monkeypatch, cid, lambda: other.delete(cid))
    assert not m.backend.contains([cid]) and m.backend.contains([kept])


def test_a_reembed_keeps_a_new_text_written_before_it_switches(store, monkeypatch):
    m = store()
    cid = m.add("the meeting is on monday at ten", user_id="u")
    other = OtherProcess(m.backend)
    _reembed_racing(m, monkeypatch, cid, lambda: other.edit(cid, NEW_TEXT, vector=Renamed().embed_documents(
        [NEW_TEXT])[0]))
    assert m.get(cid).content == NEW_TEXT


def test_a_new_text_written_before_the_switch_gets_the_new_models_vector(store, monkeypatch):
    m = store()
    cid = m.add("the meeting is on monday at ten", user_id="u")
    other = OtherProcess(m.backend)  # it still embeds with the old model
    _reembed_racing(m, monkeypatch, cid, lambda: other.edit(cid, NEW_TEXT, vector=HashingEmbedder(DIM).embed_documents(
        [NEW_TEXT])[0]), to=Negated())
    assert m.get(cid).content == NEW_TEXT
    np.testing.assert_allclose(m.backend.get_vectors([cid])[cid], Negated().embed_documents([NEW_TEXT])[0], atol=1e-6)


def test_a_memory_added_before_the_switch_is_switched_too(store, monkeypatch):
    m = store()
    cid = m.add("the meeting is on monday at ten", user_id="u")
    late = "lunch is at noon on tuesday"
    added = ChunkRow(KnowledgeChunk(raw_content=late, id="late", user_id="u"),
                     HashingEmbedder(DIM).embed_documents([late])[0], late.split())  # the old model's vector
    _reembed_racing(m, monkeypatch, cid, lambda: m.backend.insert([added]), to=Negated())
    assert m.get("late").content == late
    np.testing.assert_allclose(m.backend.get_vectors(["late"])["late"], Negated().embed_documents([late])[0],
                               atol=1e-6)
    assert m.verify().ok
