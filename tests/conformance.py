"""The storage-backend conformance suite.

Every ``StoreBackend`` (store/base.py) must pass it. To run it against a backend,
subclass :class:`BackendConformance` in a ``test_conformance_<name>.py`` module and
provide one fixture:

* ``backend_factory``: a callable ``(index_config=None) -> backend`` returning a new,
  empty, open backend (built with that ``IndexConfig``, or the default one).

and, if the backend persists, override a second one:

* ``reopen``: a callable taking an open backend, closing it and returning a new
  backend over the same storage (default ``None``: persistence tests are skipped).

Everything here talks to the protocol directly (ChunkRow in, ids and scores out),
never through ``BeeWeave``, so it checks exactly what the engine relies on; the
lost-update cases (conformance_lost_updates.py, mixed in) then run the engine's
read-then-write paths over the same backend.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import bm25s
import numpy as np
import pytest

from beeweave_core import (
    BeeWeaveError,
    ChunkStatus,
    ContentType,
    DuplicateIdError,
    IndexConfig,
    Intent,
    InvalidInputError,
    KnowledgeChunk,
    NotFoundError,
    ProcessedContent,
    Relationship,
    RelationType,
    SessionContext,
    StoreClosedError,
)
from beeweave_core.filters import build_filter
from beeweave_core.index.turns import is_turn
from beeweave_core.scoring import RankFields
from beeweave_core.store.base import ChunkRow, StoreBackend
from beeweave_core.store.links import LinkReads, read_links
from tests.conformance_lost_updates import LostUpdateConformance
from tests.support import dt, matches

DIM = 8
EVERY_STATUS = {"status": [s.value for s in ChunkStatus]}


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def row(cid: str, text: str, seed: int | None = None, **fields) -> ChunkRow:
    fields.setdefault("user_id", "ann")
    pc = fields.pop("processed_content", None)
    chunk = KnowledgeChunk(raw_content=text, id=cid, processed_content=pc, **fields)
    seed = seed if seed is not None else sum(map(ord, cid))
    return ChunkRow(chunk, vec(seed), text.lower().split())


# A small world where every filter key has something to tell apart.
WORLD = [
    row("w0", "apple banana", user_id="ann", agent_id="a1", session_id="s1", tags=["x"], timestamp=dt(2024, 1, 1),
        entities=["Paris"]),
    row("w1", "apple apple cherry", user_id="ann", agent_id="a2", session_id="s1", tags=["x", "y"],
        timestamp=dt(2024, 2, 1), intent=Intent.CODE_GENERATION, tier="short"),
    row("w2", "banana cherry date", user_id="bob", agent_id="a1", session_id="s2", tags=["y"],
        timestamp=dt(2024, 3, 1), processed_content=ProcessedContent(ContentType.CODE, "banana cherry date", "py")),
    row("w3", "apple date elder fig", user_id="bob", session_id="s3", timestamp=dt(2024, 4, 1),
        status=ChunkStatus.ARCHIVED),
    row("w4", "fig grape apple", user_id="cid", agent_id="a3", tags=["x", "y", "z"], timestamp=dt(2024, 5, 1),
        intent=Intent.OTHER, entities=["Paris", "Acme"], tier="working"),
    row("w5", "grape grape grape", user_id="cid", timestamp=dt(2024, 6, 1), status=ChunkStatus.PENDING,
        processed_content=ProcessedContent(ContentType.DATA, "grape grape grape")),
    row("w6", "apple cherry fig grape banana date", user_id="ann", session_id="s2", tags=["z"],
        timestamp=dt(2024, 7, 1)),
]

FILTERS = [
    {},
    {"user_id": "ann"},
    {"user_id": ["bob", "cid"]},
    {"agent_id": "a1"},
    {"session_id": ["s1", "s2"]},
    {"tags": "x"},
    {"tags_any": ["y", "z"]},
    {"tags_all": ["x", "y"]},
    {"entities": "Paris"},
    {"entities": ["Acme", "Nowhere"], "tags": "z"},
    {"since": dt(2024, 3, 1)},
    {"until": dt(2024, 3, 1)},
    {"since": dt(2024, 2, 1), "until": dt(2024, 6, 1)},
    {"type": "code"},
    {"type": ["text", "data"], "status": ["active", "pending"]},
    {"intent": ["code_generation", "other"]},
    {"status": "archived"},
    EVERY_STATUS,
    {"ids": ["w0", "w3", "w4", "nope"]},
    {"user_id": "ann", "tags": "x", "since": dt(2024, 1, 15)},
    {"user_id": "nobody"},
    {"tier": "long"},
    {"tier": ["short", "working"], "tags": "x"},
]


# Index configurations the suite builds backends with: bm25s's and rank_bm25's constants
# with no session context (so scores must equal bm25s's Lucene BM25, see _lucene), and one
# with context on.
# Declared metadata fields: values that look alike in another type (1, 1.0, True, "1")
# must be told apart as the slow reading (tests.support.matches) does.
FIELD_TYPES_OF_TEST = {"project_id": "str", "priority": "int", "score": "float", "done": "bool"}
FIELDED = [
    row(f"m{i}", "note text", metadata=meta) for i, meta in enumerate([
        {"project_id": "p1", "priority": 1, "score": 0.5, "done": True},
        {"project_id": "p2", "priority": 2, "score": 1.0, "done": False},
        {"project_id": "1", "priority": True, "score": 1, "done": 1},
        {"project_id": "p1", "priority": 1.0, "done": False, "other": "p1"},
        {"priority": "2", "score": "0.5"},
        {"project_id": "p3'; --", "priority": 10**12},
        {},
    ])]
FIELD_FILTERS = [
    {"project_id": "p1"}, {"project_id": ["p1", "p2"]}, {"project_id": "1"}, {"project_id": "nope"},
    {"project_id": "p3'; --"}, {"priority": 1}, {"priority": [2, 10**12]}, {"score": 1.0}, {"score": 0.5},
    {"done": True}, {"done": False}, {"project_id": "p1", "done": False}, {"project_id": "p1", "priority": 1},
]

PLAIN = IndexConfig(k1=1.5, b=0.75, context_radius=0)
CONTEXT = IndexConfig(k1=1.2, b=0.5, context_radius=1, lexical_context_weight=0.4,
                      vector_context_weight=0.5, session_context=SessionContext.ALL)
# The default choice: context only among the memories that are conversation turns.
TURNS = IndexConfig(k1=1.2, b=0.5, context_radius=1, lexical_context_weight=0.4,
                    vector_context_weight=0.5, session_context=SessionContext.AUTO)

# One conversation (ann, chat) with tied timestamps, the same session name under another
# user (a different conversation), and a memory with no session (no context).
SESSION = [
    row(f"t{i}", text, user_id=user, session_id=sess, timestamp=dt(2024, 1, 1, hour))
    for i, (text, user, sess, hour) in enumerate([
        ("kiwi lime", "ann", "chat", 3),
        ("lime mango", "ann", "chat", 1),
        ("mango", "ann", "chat", 4),
        ("kiwi kiwi papaya", "ann", "chat", 1),
        ("papaya", "ann", "chat", 5),
        ("lime", "ann", "chat", 9),
        ("quince kiwi", "ann", "chat", 2),
        ("mango quince", "ann", "chat", 6),
        ("kiwi", "bob", "chat", 2),
        ("lime papaya", "bob", "chat", 3),
        ("kiwi mango lime", "ann", None, 4),
    ])
]


# SESSION with some memories marked as turns (a speaker, or ingested from an agent run)
# and the rest plain facts in the same sessions.
_TURN_META = {"t0": {"speaker": "ann"}, "t1": {"role": "user"}, "t3": {"speaker": "bot"},
              "t5": {"ingest": {"role": "turn"}}, "t6": {"speaker": "ann"}, "t8": {"speaker": "bob"},
              "t9": {"ingest": {"role": "tool"}}, "t10": {"speaker": "ann"}}
MIXED = [ChunkRow(r.chunk.copy(metadata=_TURN_META.get(r.chunk.id, {})), r.vector, r.terms) for r in SESSION]


def _lucene(corpus: list[list[str]], query: list[str], cfg: IndexConfig) -> list[float]:
    """Each document's BM25 for ``query`` by bm25s (method "lucene", float64) with ``cfg``'s
    k1 and b, times the constant ``k1 + 1`` that Lucene and bm25s leave out of the
    saturation's numerator and BeeWeave keeps (tests/test_bm25.py checks the relation)."""
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method="lucene", dtype="float64")
    ref.index(corpus, show_progress=False)
    return ((cfg.k1 + 1) * ref.get_scores_from_ids(ref.get_tokens_ids(query))).tolist()


class Reference:
    """A slow, obviously-correct model of a backend's records and scores.

    Session context: the records of one (user, session), ordered by timestamp then
    insertion, each have as neighbours those within ``context_radius`` positions.
    A record's term counts and length add its neighbours' times the lexical context
    weight; df and N count records, as bm25s does. A record's context vector is
    normalise(own + weight * sum of the neighbours' vectors).
    """

    def __init__(self, cfg: IndexConfig) -> None:
        self.cfg = cfg
        self.rows: dict[str, ChunkRow] = {}
        self.seq: dict[str, int] = {}
        self._next = 0

    def insert(self, rows) -> None:
        for r in rows:
            self.rows[r.chunk.id] = r
            self.seq[r.chunk.id] = self._next
            self._next += 1

    def delete(self, ids) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def update(self, chunks) -> None:
        for c in chunks:
            r = self.rows[c.id]
            self.rows[c.id] = ChunkRow(c, r.vector, r.terms)

    def replace(self, rows) -> None:
        self.delete([r.chunk.id for r in rows])
        self.insert(rows)

    def neighbours(self) -> dict[str, list[str]]:
        groups: dict[tuple[str, str], list[str]] = {}
        for i, r in self.rows.items():
            if r.chunk.session_id is not None and (
                    self.cfg.session_context is SessionContext.ALL or is_turn(r.chunk)):
                groups.setdefault((r.chunk.user_id, r.chunk.session_id), []).append(i)
        out: dict[str, list[str]] = {i: [] for i in self.rows}
        rad = self.cfg.context_radius
        for ids in groups.values():
            ids.sort(key=lambda i: (self.rows[i].chunk.timestamp.timestamp(), self.seq[i]))
            for p, i in enumerate(ids):
                out[i] = ids[max(0, p - rad) : p] + ids[p + 1 : p + rad + 1]
        return out

    def lexical(self, query: dict[str, int], flt: dict) -> dict[str, float]:
        cfg, nb = self.cfg, self.neighbours()
        w = cfg.lexical_context_weight if cfg.context_radius else 0.0
        tf = {i: Counter(r.terms) for i, r in self.rows.items()}
        if not tf:
            return {}
        dl = {i: len(r.terms) + w * sum(len(self.rows[n].terms) for n in nb[i]) for i, r in self.rows.items()}
        avgdl = sum(dl.values()) / len(dl)
        df = Counter(t for c in tf.values() for t in c)
        n = len(tf)
        idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}  # Lucene's
        out = {}
        for i, r in self.rows.items():
            if not matches(r.chunk, flt):
                continue
            score, hit = 0.0, False
            for q, qtf in query.items():
                f = tf[i][q] + w * sum(tf[m][q] for m in nb[i])
                if f > 0 and q in idf:
                    hit = True
                    score += idf[q] * qtf * f * (cfg.k1 + 1) / (f + cfg.k1 * (1 - cfg.b + cfg.b * dl[i] / avgdl))
            if hit:
                out[i] = score
        return out

    def vector(self, q: np.ndarray, ids) -> dict[str, float]:
        nb = self.neighbours()
        w = self.cfg.vector_context_weight if self.cfg.context_radius else 0.0
        out = {}
        for i in ids:
            if i in self.rows:
                v = self.rows[i].vector.astype(np.float64)
                v = v + w * sum((self.rows[n].vector.astype(np.float64) for n in nb[i]), np.zeros(DIM))
                out[i] = float(v / np.linalg.norm(v) @ q)
        return out


def _expected(flt: dict, rows=WORLD) -> set[str]:
    return {r.chunk.id for r in rows if matches(r.chunk, flt)}


def _counts(terms) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in terms:
        out[t] = out.get(t, 0) + 1
    return out


def _ids(pairs) -> list[str]:
    return [i for i, _ in pairs]


class BackendConformance(LostUpdateConformance):
    """Behaviour every StoreBackend must show. See the module docstring to use it."""

    @pytest.fixture
    def reopen(self) -> Callable[[StoreBackend], StoreBackend] | None:
        return None

    @pytest.fixture
    def make(self, backend_factory):
        """Open more backends (e.g. with another IndexConfig); all closed at teardown."""
        opened: list[StoreBackend] = []

        def make(index_config: IndexConfig | None = None) -> StoreBackend:
            opened.append(backend_factory(index_config=index_config))
            return opened[-1]

        yield make
        for b in opened:
            b.close()

    @pytest.fixture
    def backend(self, make):
        return make()

    @pytest.fixture
    def world(self, make):
        """WORLD in a backend without session context, so plain BM25 semantics hold."""
        b = make(PLAIN)
        b.insert(WORLD)
        return b

    # -- protocol and metadata ------------------------------------------------------------
    def test_is_a_store_backend(self, backend) -> None:
        assert isinstance(backend, StoreBackend)

    def test_meta(self, backend) -> None:
        assert backend.get_meta("no-such-key") is None
        backend.set_meta("k", "v1")
        assert backend.get_meta("k") == "v1"
        backend.set_meta("k", '{"json": "值"}')
        assert backend.get_meta("k") == '{"json": "值"}'
        assert backend.get_meta("schema_version") is not None

    # -- records -----------------------------------------------------------------------------
    def test_insert_get_contains_count(self, world) -> None:
        assert world.count() == len(WORLD)
        assert world.contains(["w0", "w3", "nope"]) == {"w0", "w3"}
        got = world.get(["w2", "nope", "w0", "w2"])
        assert set(got) == {"w0", "w2"}
        for r in WORLD:
            assert world.get([r.chunk.id])[r.chunk.id] == r.chunk

    def test_insert_nothing(self, backend) -> None:
        backend.insert([])
        assert backend.count() == 0
        assert backend.get([]) == {}
        assert backend.contains([]) == set()

    @pytest.mark.parametrize("dup", ["existing", "within_batch"])
    def test_duplicate_id_rejects_the_whole_batch(self, world, dup) -> None:
        batch = [row("n1", "kiwi lime"), row("n2", "kiwi mango")]
        batch.append(row("w1", "kiwi") if dup == "existing" else row("n1", "kiwi again"))
        lex_before = world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 50)
        with pytest.raises(DuplicateIdError):
            world.insert(batch)
        assert world.count() == len(WORLD)
        assert world.contains(["n1", "n2"]) == set()
        assert world.lexical_search({"kiwi": 1}, build_filter(EVERY_STATUS), 10) == []
        assert world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 50) == lex_before
        assert world.get(["w1"])["w1"] == WORLD[1].chunk
        world.insert(batch[:2])  # the good rows alone go in
        assert world.count() == len(WORLD) + 2

    def test_delete(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "entity"),
                         Relationship("w1", "w2", "session")])
        assert sorted(world.delete(["w0", "nope", "w0"])) == ["w0"]
        assert world.delete(["w0"]) == []
        assert world.count() == len(WORLD) - 1
        assert world.contains(["w0"]) == set() and world.get(["w0"]) == {}
        everything = build_filter(EVERY_STATUS)
        assert "w0" not in {c.id for c in world.scan(everything)}
        assert "w0" not in _ids(world.lexical_search({"apple": 1, "banana": 1}, everything, 50))
        assert "w0" not in _ids(world.vector_search(WORLD[0].vector, everything, 50, exact=True))
        assert "w0" not in world.get_vectors(["w0"])
        # Every edge touching w0 went with it, in both directions; others stay.
        assert world.edges(["w0"]) == []
        assert [(e.source_id, e.target_id) for e in world.edges(["w1", "w2"])] == [("w1", "w2")]

    def test_update_changes_attributes_not_text(self, world) -> None:
        c = world.get(["w0"])["w0"]
        c2 = c.copy(status=ChunkStatus.ARCHIVED, tags=["new"], user_id="zed", session_id=None,
                    timestamp=c.timestamp + timedelta(days=400), metadata={"m": 1})
        world.update([c2])
        assert world.get(["w0"])["w0"] == c2
        assert world.count(build_filter({"user_id": "zed"})) == 0  # archived: hidden by default
        assert {c.id for c in world.scan(build_filter({"user_id": "zed", "status": "archived", "tags": "new"}))} == {"w0"}
        assert world.count(build_filter({"tags": "x"})) == len(_expected({"tags": "x"}) - {"w0"})
        assert {c.id for c in world.scan(build_filter({"tags": "x", **EVERY_STATUS}))} == \
            _expected({"tags": "x", **EVERY_STATUS}) - {"w0"}
        lex = world.lexical_search({"banana": 1}, build_filter({"status": "archived"}), 10)
        assert "w0" in _ids(lex)
        np.testing.assert_allclose(world.get_vectors(["w0"])["w0"], WORLD[0].vector, atol=1e-6)
        with pytest.raises(NotFoundError):
            world.update([KnowledgeChunk("x", "ann", id="nope")])

    def test_update_moves_a_record_between_tiers(self, world) -> None:
        # Promotion rewrites a record's tier: every read's tier filter follows it.
        c = world.get(["w1"])["w1"]
        assert c.tier.value == "short"
        world.update([c.copy(tier="long")])
        assert world.get(["w1"])["w1"].tier.value == "long"
        short = build_filter({"tier": "short"})
        assert world.count(short) == 0 and world.scan_ids(short) == []
        longf = build_filter({"tier": "long", "user_id": "ann"})
        assert {c.id for c in world.scan(longf)} == {"w0", "w1", "w6"}
        assert "w1" in _ids(world.lexical_search({"apple": 1}, longf, 10))
        assert "w1" in _ids(world.vector_search(vec(1), longf, 10))

    def test_validity_times_round_trip(self, make, reopen) -> None:
        # A fact's bi-temporal validity is part of the record: written by insert, rewritten by
        # update, read back as it was (after reopening too); a record without it reads None.
        t = datetime(2025, 1, 10, tzinfo=timezone.utc)
        b = make(PLAIN)
        b.insert([row("v1", "I live in Berlin", valid_from=t), row("v2", "a plain memory")])
        got = b.get(["v1", "v2"])
        assert (got["v1"].valid_from, got["v1"].invalid_at, got["v2"].valid_from) == (t, None, None)
        b.update([got["v1"].copy(invalid_at=t + timedelta(days=45), relationships=[])])
        assert b.get(["v1"])["v1"].invalid_at == t + timedelta(days=45)
        if reopen is not None:
            again = reopen(b)
            try:
                kept = again.get(["v1", "v2"])
                assert (kept["v1"].valid_from, kept["v1"].invalid_at) == (t, t + timedelta(days=45))
                assert (kept["v2"].valid_from, kept["v2"].invalid_at) == (None, None)
            finally:
                again.close()

    def test_rank_fields_are_those_of_the_records(self, world) -> None:
        ids = [r.chunk.id for r in WORLD]

        def expected() -> dict:
            return {i: RankFields.of(c) for i, c in world.get(ids).items()}

        assert world.rank_fields(ids + ["nope", "w1"]) == expected()
        assert world.rank_fields([]) == {}
        c = world.get(["w1"])["w1"]
        far = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)  # beyond float seconds' microseconds
        world.update([c.copy(weight=2.75, confidence=0.4, pinned=True, expires_at=far, metadata={"stale": True},
                             reinforced_at=dt(2024, 3, 2, 5) + timedelta(microseconds=7))])
        world.modify(["w2"], lambda found: [found["w2"].copy(weight=0.3, metadata={"stale": "yes"})])
        world.replace([row("w3", "kiwi", user_id="bob", status=ChunkStatus.ARCHIVED, weight=1.5)])
        world.delete(["w0"])
        got = world.rank_fields(ids)
        assert got == expected() and "w0" not in got
        assert got["w1"].expires_at == far and got["w1"].stale and got["w1"].pinned
        assert got["w2"].stale and got["w2"].weight == 0.3 and got["w3"].weight == 1.5

    def test_replace_changes_text_and_vector_keeps_edges(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "tag")])
        new = row("w0", "kiwi lime", seed=999, user_id="ann", timestamp=dt(2024, 1, 1))
        world.replace([new])
        assert world.count() == len(WORLD)
        assert world.get(["w0"])["w0"].raw_content == "kiwi lime"
        flt = build_filter(None)
        assert _ids(world.lexical_search({"kiwi": 1}, flt, 5)) == ["w0"]
        assert "w0" not in _ids(world.lexical_search({"banana": 1}, flt, 50))
        np.testing.assert_allclose(world.get_vectors(["w0"])["w0"], new.vector, atol=1e-6)
        assert _ids(world.vector_search(new.vector, flt, 1, exact=True)) == ["w0"]
        assert {(e.source_id, e.target_id) for e in world.edges(["w0"])} == {("w0", "w1"), ("w2", "w0")}

    def test_modify_reads_and_writes_in_one_step(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w0", "tag")])
        seen: list[dict[str, KnowledgeChunk]] = []

        def change(current: dict[str, KnowledgeChunk]) -> list:
            seen.append(current)
            c = current["w0"]
            return [c.copy(access_count=c.access_count + 2, tags=["new"], status=ChunkStatus.ARCHIVED),
                    row("w1", "kiwi lime", seed=999, user_id="ann", agent_id="a2", session_id="s1",
                        timestamp=dt(2024, 2, 1))]

        world.modify(["w0", "w1", "nope", "w0"], change)
        assert len(seen) == 1 and set(seen[0]) == {"w0", "w1"}  # the records that exist, once each
        assert seen[0]["w0"] == WORLD[0].chunk  # as stored (no relationships attached)
        w0 = world.get(["w0"])["w0"]
        assert (w0.access_count, w0.tags, w0.status) == (2, ["new"], ChunkStatus.ARCHIVED)
        assert world.count(build_filter({"tags": "new"})) == 0  # archived: the filters see the change
        assert world.get(["w1"])["w1"].raw_content == "kiwi lime"  # a ChunkRow replaces text and vector
        flt = build_filter(EVERY_STATUS)
        assert _ids(world.lexical_search({"kiwi": 1}, flt, 5)) == ["w1"]
        assert _ids(world.vector_search(vec(999), flt, 1, exact=True)) == ["w1"]
        assert {(e.source_id, e.target_id) for e in world.edges(["w0", "w1"])} == {("w0", "w1"), ("w2", "w0")}

        calls: list[dict] = []
        world.modify([], lambda current: calls.append(current) or [])
        world.modify(["nope"], lambda current: calls.append(current) or [])
        assert calls == [{}]  # no ids: not called; only missing ids: called with nothing

    def test_modify_writes_nothing_when_change_fails(self, world) -> None:
        before = world.get(["w0", "w1"])

        def fails(current: dict[str, KnowledgeChunk]) -> list:
            current["w0"].tags = ["changed"]
            raise NotFoundError("the caller gives up")

        with pytest.raises(NotFoundError, match="gives up"):
            world.modify(["w0"], fails)
        with pytest.raises(BeeWeaveError):  # a record it was not given
            world.modify(["w0"], lambda current: [current["w0"].copy(tags=["t"]), WORLD[1].chunk.copy(tags=["t"])])
        assert world.get(["w0", "w1"]) == before
        world.modify(["w0"], lambda current: [current["w0"].copy(tags=["after"])])  # and it still works
        assert world.get(["w0"])["w0"].tags == ["after"]

    def test_modify_loses_no_update_between_threads(self, world) -> None:
        import threading

        def bump(current: dict[str, KnowledgeChunk]) -> list:
            c = current["w0"]
            return [c.copy(access_count=c.access_count + 1)]

        def run() -> None:
            for _ in range(25):
                world.modify(["w0"], bump)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert world.get(["w0"])["w0"].access_count == 100

    def test_delete_if_judges_the_records_it_deletes(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic"), Relationship("w2", "w6", "tag")])
        seen: list[str] = []

        def still(c: KnowledgeChunk) -> bool:
            seen.append(c.id)
            assert c.relationships == []  # as stored, as modify gives them
            return "x" in c.tags

        assert sorted(world.delete_if(["w0", "w2", "nope", "w4", "w0"], still)) == ["w0", "w4"]
        assert sorted(seen) == ["w0", "w2", "w4"]  # each existing record judged once
        assert world.contains(["w0", "w2", "w4"]) == {"w2"}
        assert world.edges(["w1"]) == [] and len(world.edges(["w6"])) == 1  # w0's edges went with it
        assert "w4" not in _ids(world.lexical_search({"grape": 1}, build_filter(EVERY_STATUS), 50))
        assert world.delete_if([], still) == [] and world.delete_if(["nope"], still) == []

    def test_delete_if_spares_a_record_renewed_before_it_reads(self, world) -> None:
        # What a sweep does: it decided on an earlier read (w0 expired); another writer renews
        # w0 before the delete runs; the delete reads w0 again and keeps it.
        expired = dt(2024, 1, 2)
        world.modify(["w0", "w1"], lambda cur: [c.copy(expires_at=expired) for c in cur.values()])
        decided = [c.id for c in world.scan(build_filter(None)) if c.expires_at == expired]
        world.modify(["w0"], lambda cur: [cur["w0"].copy(expires_at=None, tags=["renewed"])])
        assert world.delete_if(decided, lambda c: c.expires_at == expired) == ["w1"]
        assert world.get(["w0"])["w0"].tags == ["renewed"]

    def test_record_access_adds_counts_and_keeps_the_latest_access(self, world) -> None:
        import threading

        ids = [r.chunk.id for r in WORLD]
        before = world.get(ids)
        everything = build_filter(EVERY_STATUS)
        searched = (world.rank_fields(ids), world.lexical_search({"apple": 1, "fig": 1}, everything, 10),
                    world.count(build_filter({"tags": "x"})))
        t1 = dt(2025, 1, 1)
        t2 = t1 + timedelta(microseconds=1)
        world.record_access({"w0": (2, t2), "w1": (1, t1), "nope": (5, t1)})
        world.record_access({"w0": (3, t1)})  # an earlier access does not move last_accessed back
        world.record_access({})

        def run() -> None:
            for _ in range(25):
                world.record_access({"w2": (1, t1)})

        threads = [threading.Thread(target=run) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        after = world.get(ids)
        assert (after["w0"].access_count, after["w0"].last_accessed) == (before["w0"].access_count + 5, t2)
        assert (after["w1"].access_count, after["w1"].last_accessed) == (before["w1"].access_count + 1, t1)
        assert after["w2"].access_count == before["w2"].access_count + 100  # no update lost
        assert world.contains(["nope"]) == set()
        for i in ids:  # nothing else changed
            assert after[i].copy(access_count=0, last_accessed=None) == before[i].copy(access_count=0, last_accessed=None)
        assert (world.rank_fields(ids), world.lexical_search({"apple": 1, "fig": 1}, everything, 10),
                world.count(build_filter({"tags": "x"}))) == searched

    def test_scan_order_and_limit(self, world) -> None:
        everything = build_filter(EVERY_STATUS)
        by_time = [r.chunk.id for r in sorted(WORLD, key=lambda r: r.chunk.timestamp)]
        assert [c.id for c in world.scan(everything)] == by_time
        assert [c.id for c in world.scan(everything, descending=True)] == by_time[::-1]
        assert [c.id for c in world.scan(everything, limit=3)] == by_time[:3]
        assert [c.id for c in world.scan(everything, limit=2, descending=True)] == by_time[::-1][:2]
        assert [c.id for c in world.scan(everything, limit=0)] == []
        for kw in ({}, {"descending": True}, {"limit": 3}, {"limit": 2, "descending": True}, {"order": "insertion"}):
            assert world.scan_ids(everything, **kw) == [c.id for c in world.scan(everything, **kw)]

    @pytest.mark.parametrize("flt", FILTERS, ids=[str(sorted(f)) for f in FILTERS])
    def test_every_filter_in_every_read(self, world, flt) -> None:
        want = _expected(flt)
        f = build_filter(flt)
        assert world.count(f) == len(want)
        assert {c.id for c in world.scan(f)} == want
        assert world.matching([r.chunk.id for r in WORLD] + ["nope"], f) == want
        terms = {"apple": 1, "banana": 1, "cherry": 1, "date": 1, "fig": 1, "grape": 1}
        assert set(_ids(world.lexical_search(terms, f, 100))) == want
        for exact in (True, False):
            assert set(_ids(world.vector_search(vec(1), f, 100, exact=exact))) == want
        k = max(len(want) - 1, 1)
        assert len(world.lexical_search(terms, f, k)) == min(k, len(want))
        assert len(world.vector_search(vec(1), f, k)) == min(k, len(want))

    @pytest.mark.parametrize("flt", FIELD_FILTERS, ids=[str(sorted(f.items())) for f in FIELD_FILTERS])
    def test_declared_field_filters_in_every_read(self, backend, flt) -> None:
        for name in FIELD_TYPES_OF_TEST:
            backend.index_field(name)
            backend.index_field(name)  # again: harmless
        backend.insert(FIELDED)
        want = {r.chunk.id for r in FIELDED if matches(r.chunk, flt)}
        f = build_filter(flt, declared=FIELD_TYPES_OF_TEST)
        assert backend.count(f) == len(want)
        assert {c.id for c in backend.scan(f)} == want
        assert backend.scan_ids(f) == [c.id for c in backend.scan(f)]
        assert backend.matching([r.chunk.id for r in FIELDED], f) == want
        assert set(_ids(backend.lexical_search({"note": 1}, f, 100))) == want
        for exact in (True, False):
            assert set(_ids(backend.vector_search(vec(1), f, 100, exact=exact))) == want

    def test_index_field_refuses_a_name_that_is_not_an_identifier(self, backend) -> None:
        for bad in ("a b", "x'); DROP TABLE chunks; --", "1abc", "", "a" * 41):
            with pytest.raises(InvalidInputError):
                backend.index_field(bad)

    # -- retrieval ---------------------------------------------------------------------------
    def test_lexical_search_is_bm25_over_every_live_record(self, world) -> None:
        """Without session context, scores are bm25s's Lucene BM25 on the same terms (see _lucene)."""
        corpus = {r.chunk.id: r.terms for r in WORLD}
        order = sorted(corpus)
        for query in (["apple"], ["grape", "grape", "fig"], ["banana", "date", "unknown"], ["elder"]):
            ref = dict(zip(order, _lucene([corpus[i] for i in order], query, PLAIN)))
            for flt in ({}, EVERY_STATUS, {"user_id": "bob", "status": ["active", "archived"]}):
                got = world.lexical_search(_counts(query), build_filter(flt), 100)
                scores = [s for _, s in got]
                assert scores == sorted(scores, reverse=True)
                want = {i for i in _expected(flt) if set(query) & set(corpus[i])}
                assert set(_ids(got)) == want
                for i, s in got:
                    # Statistics cover every live record, whatever the filter.
                    assert s == pytest.approx(ref[i], abs=1e-6), (query, flt, i)
        assert world.lexical_search({"unknown": 1}, build_filter(None), 10) == []
        assert world.lexical_search({}, build_filter(None), 10) == []
        top = world.lexical_search({"apple": 1}, build_filter(EVERY_STATUS), 2)
        assert len(top) == 2 and top[0][0] == "w1"  # apple twice in a short record

    def test_reference_model_is_bm25s_without_context(self) -> None:
        """Anchors the Reference used for the context tests to bm25s's Lucene BM25."""
        ref = Reference(PLAIN)
        ref.insert(WORLD + SESSION)
        order = sorted(ref.rows)
        for query in (["apple", "kiwi", "kiwi"], ["lime"], ["grape", "papaya"]):
            want = dict(zip(order, _lucene([ref.rows[i].terms for i in order], query, PLAIN)))
            got = ref.lexical(_counts(query), EVERY_STATUS)
            assert got and all(got[i] == pytest.approx(want[i], abs=1e-9) for i in got)

    def _check_context(self, b, ref: Reference) -> None:
        queries = [{"kiwi": 1}, {"lime": 2, "papaya": 1}, {"mango": 1, "quince": 1, "apple": 1}, {"nothing": 1}]
        for flt in ({}, EVERY_STATUS, {"user_id": "ann"}, {"session_id": "chat", "user_id": "bob"}):
            for q in queries:
                got = b.lexical_search(q, build_filter(flt), 1000)
                want = ref.lexical(q, flt)
                assert set(_ids(got)) == set(want), (q, flt)
                for i, s in got:
                    assert s == pytest.approx(want[i], abs=1e-6), (q, flt, i)
        ids = sorted(ref.rows) + ["no-such-id"]
        for seed in range(3):
            q = vec(500 + seed)
            got = b.vector_scores(q, ids)
            want = ref.vector(q, ids)
            assert set(got) == set(want)
            for i in want:
                assert got[i] == pytest.approx(want[i], abs=1e-5), i

    @pytest.mark.parametrize("cfg", [PLAIN, CONTEXT], ids=["plain", "context"])
    def test_session_context_scores_follow_the_index_config(self, make, cfg) -> None:
        b, ref = make(cfg), Reference(cfg)
        for rows in (WORLD, SESSION):
            b.insert(rows)
            ref.insert(rows)
        self._check_context(b, ref)
        # A deletion in the middle of a conversation changes its neighbours' context.
        b.delete(["t4", "t0"])
        ref.delete(["t4", "t0"])
        self._check_context(b, ref)
        # Moving a memory in time or to another session re-threads the conversation.
        moved = [b.get(["t1"])["t1"].copy(timestamp=dt(2024, 1, 1, 8)),
                 b.get(["t2"])["t2"].copy(session_id="elsewhere"),
                 b.get(["w6"])["w6"].copy(session_id="chat")]
        b.update(moved)
        ref.update(moved)
        self._check_context(b, ref)
        # New text for a memory, and new memories tied in time with old ones.
        new = [row("t5", "apple apple", seed=77, user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 9))]
        b.replace(new)
        ref.replace(new)
        more = [row("t11", "kiwi quince", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 1)),
                row("t12", "lime", user_id="bob", session_id="chat", timestamp=dt(2024, 1, 1, 2))]
        b.insert(more)
        ref.insert(more)
        self._check_context(b, ref)

    def test_session_context_only_among_conversation_turns(self, make) -> None:
        """By default a memory lends and takes context only when it is a conversation turn:
        facts that share a session with turns are scored on their own text."""
        b, ref = make(TURNS), Reference(TURNS)
        for rows in (WORLD, MIXED):
            b.insert(rows)
            ref.insert(rows)
        assert {i for i, nb in ref.neighbours().items() if nb} == {"t0", "t1", "t3", "t5", "t6", "t8", "t9"}
        self._check_context(b, ref)
        # A fact that becomes a turn joins the conversation; a turn that loses its speaker leaves it.
        changed = [b.get(["t2"])["t2"].copy(metadata={"speaker": "ann"}), b.get(["t0"])["t0"].copy(metadata={}),
                   b.get(["t4"])["t4"].copy(timestamp=dt(2024, 1, 1, 2))]
        b.update(changed)
        ref.update(changed)
        self._check_context(b, ref)
        b.delete(["t3", "t7"])
        ref.delete(["t3", "t7"])
        self._check_context(b, ref)
        more = [row("t11", "kiwi quince", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 1),
                    metadata={"speaker": "ann"}),
                row("t12", "lime", user_id="ann", session_id="chat", timestamp=dt(2024, 1, 1, 2))]
        b.insert(more)
        ref.insert(more)
        self._check_context(b, ref)

    def test_include_adds_the_scores_of_named_records(self, make) -> None:
        b = make(PLAIN)
        b.insert(WORLD)
        flt = build_filter({"user_id": ["ann", "bob"]})
        top1 = b.lexical_search({"apple": 1}, flt, 1)
        assert _ids(top1) == ["w1"]
        got = b.lexical_search({"apple": 1}, flt, 1, include=["w2", "w6", "w4", "w3", "nope", "w1"])
        # w2 (no apple) scores 0; w4 is cid's and w3 archived: both outside the filter.
        assert _ids(got) == ["w1", "w6", "w2"]
        full = dict(b.lexical_search({"apple": 1}, flt, 100))
        assert dict(got) == {"w1": full["w1"], "w6": full["w6"], "w2": 0.0}
        assert b.lexical_search({"unknown": 1}, flt, 5, include=["w0"]) == [("w0", 0.0)]

    def test_vector_search_is_exact_cosine(self, world) -> None:
        mat = {r.chunk.id: r.vector.astype(np.float64) for r in WORLD}
        for seed in range(5):
            q = vec(100 + seed)
            for flt in ({}, EVERY_STATUS, {"user_id": ["ann", "cid"], **EVERY_STATUS}):
                want_ids = sorted(_expected(flt), key=lambda i: -float(mat[i] @ q))
                got = world.vector_search(q, build_filter(flt), 100, exact=True)
                assert _ids(got) == want_ids
                for i, s in got:
                    assert s == pytest.approx(float(mat[i] @ q), abs=1e-5)
                assert _ids(world.vector_search(q, build_filter(flt), 3)) == want_ids[:3]
        assert world.vector_search(vec(1), build_filter({"user_id": "nobody"}), 5) == []

    def test_get_vectors(self, world) -> None:
        got = world.get_vectors(["w1", "w5", "nope"])
        assert set(got) == {"w1", "w5"}
        np.testing.assert_allclose(got["w5"], WORLD[5].vector, atol=1e-6)
        assert got["w1"].dtype == np.float32 and got["w1"].shape == (DIM,)

    def test_empty_backend_searches(self, backend) -> None:
        assert backend.lexical_search({"apple": 1}, build_filter(None), 5) == []
        assert backend.vector_search(vec(1), build_filter(None), 5) == []
        assert backend.count() == 0 and backend.count(build_filter(None)) == 0
        assert list(backend.scan(build_filter(None))) == []

    # -- relationships -------------------------------------------------------------------------
    def test_edges_in_both_directions(self, world) -> None:
        world.add_edges([
            Relationship("w0", "w1", RelationType.SEMANTIC, 0.9),
            Relationship("w0", "w2", RelationType.ENTITY, 0.5),
            Relationship("w3", "w0", RelationType.SESSION, 1.0),
            Relationship("w0", "w1", RelationType.TAG, 0.2),  # same pair, other type: a second edge
        ])
        key = lambda e: (e.source_id, e.target_id, e.type.value)  # noqa: E731
        out = sorted(map(key, world.edges(["w0"], direction="out")))
        assert out == [("w0", "w1", "semantic"), ("w0", "w1", "tag"), ("w0", "w2", "entity")]
        assert sorted(map(key, world.edges(["w0"], direction="in"))) == [("w3", "w0", "session")]
        assert len(world.edges(["w0"])) == 4
        assert sorted(map(key, world.edges(["w1"], direction="in"))) == [("w0", "w1", "semantic"), ("w0", "w1", "tag")]
        assert sorted(map(key, world.edges(["w0"], types=["semantic", RelationType.SESSION]))) == \
            [("w0", "w1", "semantic"), ("w3", "w0", "session")]
        # Both ends asked for: the edge between them is listed once.
        assert len(world.edges(["w0", "w1"])) == 4
        assert world.edges(["w6"]) == []
        with pytest.raises(BeeWeaveError):
            world.edges(["w0"], direction="sideways")

    def test_edges_overwrite_and_delete(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic", 0.3)])
        world.add_edges([Relationship("w0", "w1", "semantic", 0.8)])
        (edge,) = world.edges(["w0"])
        assert edge.weight == pytest.approx(0.8) and isinstance(edge.type, RelationType)
        world.add_edges([Relationship("w1", "w2", "entity")])
        world.delete_edges([Relationship("w0", "w1", "semantic"), Relationship("w5", "w6", "tag")])
        assert world.edges(["w0"]) == []
        assert len(world.edges(["w1"])) == 1
        world.add_edges([])
        world.delete_edges([])

    def test_get_attaches_outgoing_relationships(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", "semantic", 0.5), Relationship("w2", "w0", "entity")])
        c = world.get(["w0"])["w0"]
        assert c.relationships == [Relationship("w0", "w1", RelationType.SEMANTIC, 0.5)]
        assert world.get(["w1"])["w1"].relationships == []

    # -- insert with links (what linking fresh memories reads, answered as it inserts) ------------
    def _link_reads(self) -> LinkReads:
        return LinkReads(
            similar=[(vec(5), build_filter({**EVERY_STATUS, "user_id": "ann"}), 3), (vec(9), build_filter(None), 0),
                     (WORLD[2].vector, build_filter({"user_id": "bob", "tags": "y"}), 2)],
            sessions=[build_filter({**EVERY_STATUS, "user_id": "ann", "session_id": "s1"}),
                      build_filter({"user_id": "bob", "session_id": "none-such"})],
            shared=[(build_filter({**EVERY_STATUS, "user_id": "ann", "tags_any": ["x", "y"]}), 2),
                    (build_filter({**EVERY_STATUS, "entities": ["Paris"]}), 5)])

    def test_insert_linked_reads_see_the_new_rows_and_its_edges_are_written(self, world) -> None:
        world.add_edges([Relationship("w0", "w1", RelationType.SESSION, 1.0)])
        new = [row("n1", "kiwi apple", seed=5, session_id="s1", tags=["x"], timestamp=dt(2024, 1, 15),
                   entities=["Paris"]),
               row("n2", "kiwi", seed=6, session_id="s1", timestamp=dt(2024, 9, 1))]
        seen = []

        def derive(facts):
            seen.append(facts)
            return ([Relationship("n1", "w0", RelationType.SESSION, 1.0),
                     Relationship("n1", "w1", RelationType.SESSION, 1.0),
                     Relationship("n2", "gone", RelationType.SEMANTIC, 0.5)],  # an end that is missing: skipped
                    [Relationship("w0", "w1", RelationType.SESSION)])

        assert world.insert_linked(new, self._link_reads(), derive) is True
        (facts,) = seen
        expected = read_links(world, self._link_reads())  # the reads by the protocol's own calls
        assert [[(i, pytest.approx(s, abs=1e-5)) for i, s in hits] for hits in expected.similar] == facts.similar
        assert facts.similar[0][0][0] == "n1" and facts.similar[1] == []
        assert facts.sessions[0][0] == ["w0", "n1", "w1", "n2"] == expected.sessions[0][0]
        assert facts.sessions[0][1] == [Relationship("w0", "w1", RelationType.SESSION, 1.0)]
        assert expected.sessions[0][1] == [Relationship("n1", "w0", RelationType.SESSION, 1.0),
                                           Relationship("n1", "w1", RelationType.SESSION, 1.0)]
        assert facts.sessions[1] == ([], []) == expected.sessions[1]
        assert facts.shared == expected.shared == [["w1", "n1"], ["w4", "n1", "w0"]]
        assert {i: (set(t), set(e)) for i, (t, e) in facts.labels.items()} == \
            {i: (set(t), set(e)) for i, (t, e) in expected.labels.items()}
        assert facts.labels["w4"][1] and set(facts.labels["n1"][0]) == {"x"}
        assert world.count() == len(WORLD) + 2
        key = lambda e: (e.source_id, e.target_id, e.type.value)  # noqa: E731
        assert sorted(map(key, world.edges(["n1", "n2", "w0"]))) == [("n1", "w0", "session"), ("n1", "w1", "session")]

    def test_insert_linked_refuses_a_duplicate_before_reading(self, world) -> None:
        called = []
        with pytest.raises(DuplicateIdError):
            world.insert_linked([row("n1", "kiwi"), row("w1", "kiwi")], self._link_reads(),
                                lambda facts: called.append(facts) or ([], []))
        assert called == [] and world.count() == len(WORLD) and world.contains(["n1"]) == set()

    def test_insert_linked_of_no_rows_links_what_is_there(self, world) -> None:
        assert world.insert_linked([], LinkReads(sessions=[build_filter({"user_id": "ann", "session_id": "s1"})]),
                                   lambda f: ([Relationship(*f.sessions[0][0][:2], RelationType.SESSION)], [])) is True
        assert [(e.source_id, e.target_id) for e in world.edges(["w0"])] == [("w0", "w1")]
        assert world.count() == len(WORLD)

    # -- auxiliary state: key-value and logs ------------------------------------------------------
    def test_kv(self, backend) -> None:
        assert backend.kv_get("ns", "missing") is None
        backend.kv_put("ns", "a", {"v": 1})
        backend.kv_put("ns", "a", {"v": 2, "nested": {"list": [1, "二", None]}})
        assert backend.kv_get("ns", "a") == {"v": 2, "nested": {"list": [1, "二", None]}}
        for key in ("b%_1", "b%_2", "bx", "c", "b"):
            backend.kv_put("ns", key, {"k": key})
        backend.kv_put("other", "a", {"v": "other namespace"})
        assert [k for k, _ in backend.kv_scan("ns")] == ["a", "b", "b%_1", "b%_2", "bx", "c"]
        # Prefixes are literal: % and _ are not wildcards.
        assert [k for k, _ in backend.kv_scan("ns", "b%_")] == ["b%_1", "b%_2"]
        assert dict(backend.kv_scan("ns", "bx")) == {"bx": {"k": "bx"}}
        assert list(backend.kv_scan("empty")) == []
        assert backend.kv_delete("ns", "a") is True
        assert backend.kv_delete("ns", "a") is False
        assert backend.kv_get("ns", "a") is None
        assert backend.kv_get("other", "a") == {"v": "other namespace"}

    def test_kv_update(self, backend) -> None:
        seen = []

        def bump(cur):
            seen.append(cur)
            return {"n": (cur or {"n": 0})["n"] + 1}

        assert backend.kv_update("ns", "c", bump, user_id="u") == {"n": 1}
        assert backend.kv_update("ns", "c", bump, user_id="u") == {"n": 2}
        assert seen == [None, {"n": 1}] and backend.kv_get("ns", "c") == {"n": 2}

        def broken(cur):
            raise ValueError("no")

        with pytest.raises(ValueError):
            backend.kv_update("ns", "c", broken)
        assert backend.kv_get("ns", "c") == {"n": 2}  # a failed change changes nothing
        assert backend.kv_update("ns", "c", lambda cur: None) is None
        assert backend.kv_get("ns", "c") is None
        backend.kv_update("ns", "d", bump, user_id="gone")
        backend.delete_user("gone")  # the user given is the value's owner, as with kv_put
        assert backend.kv_get("ns", "d") is None
        threads = [threading.Thread(target=lambda: [backend.kv_update("ns", "t", bump) for _ in range(25)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert backend.kv_get("ns", "t") == {"n": 100}  # no increment lost

    def test_log(self, backend) -> None:
        seqs = [backend.log_append("versions", key, {"n": i}) for i, key in enumerate(["c1", "c2", "c1", "c1"])]
        assert seqs == sorted(seqs) and len(set(seqs)) == 4
        other = backend.log_append("notes", "c1", {"note": "elsewhere"})
        assert [(k, v["n"]) for _, k, v in backend.log_read("versions")] == [("c1", 0), ("c2", 1), ("c1", 2),
                                                                               ("c1", 3)]
        assert [v["n"] for _, _, v in backend.log_read("versions", "c1")] == [0, 2, 3]
        assert [s for s, _, _ in backend.log_read("versions", after=seqs[1])] == seqs[2:]
        assert [s for s, _, _ in backend.log_read("versions", limit=2)] == seqs[:2]
        assert backend.log_read("versions", "c1", after=seqs[2], limit=5) == [(seqs[3], "c1", {"n": 3})]
        assert backend.log_read("notes") == [(other, "c1", {"note": "elsewhere"})]
        assert backend.log_read("nothing") == []
        ann = backend.log_append("versions", "c9", {"n": 9}, user_id="ann")
        backend.log_append("versions", "c8", {"n": 8}, user_id="bob")
        assert backend.log_read("versions", user_id="ann") == [(ann, "c9", {"n": 9})]
        assert backend.log_read("versions", "c8", user_id="ann") == [] and backend.log_read("notes", user_id="ann") == []
        assert backend.log_delete("versions", ["c9", "c8"]) == 2
        assert backend.log_delete("versions", ["c1", "absent"]) == 3
        assert [k for _, k, _ in backend.log_read("versions")] == ["c2"]  # only that stream's c1 went
        assert backend.log_read("notes") == [(other, "c1", {"note": "elsewhere"})]
        assert backend.log_delete("versions", []) == 0

    def test_delete_user_forgets_everything_of_theirs(self, world) -> None:
        world.add_edges([Relationship("w0", "w2", "semantic"), Relationship("w4", "w1", "entity"),
                         Relationship("w4", "w5", "tag")])
        world.kv_put("notes", "ann-1", {"x": 1}, user_id="ann")
        world.kv_put("notes", "bob-1", {"x": 2}, user_id="bob")
        world.kv_put("notes", "shared", {"x": 3})
        world.log_append("versions", "w0", {"v": 1}, user_id="ann")
        kept = world.log_append("versions", "w2", {"v": 1}, user_id="bob")
        anns = {r.chunk.id for r in WORLD if r.chunk.user_id == "ann"}
        assert world.delete_user("ann") == len(anns)
        assert world.delete_user("ann") == 0
        assert world.delete_user("nobody") == 0
        everything = build_filter(EVERY_STATUS)
        assert world.contains(list(anns)) == set()
        assert world.count(everything) == len(WORLD) - len(anns)
        assert world.count(build_filter({"user_id": "ann", **EVERY_STATUS})) == 0
        assert not set(_ids(world.lexical_search({"apple": 1, "cherry": 1}, everything, 50))) & anns
        assert not set(_ids(world.vector_search(vec(1), everything, 50, exact=True))) & anns
        assert {(e.source_id, e.target_id) for e in world.edges(["w2", "w4", "w5"])} == {("w4", "w5")}
        assert world.kv_get("notes", "ann-1") is None
        assert world.kv_get("notes", "bob-1") == {"x": 2} and world.kv_get("notes", "shared") == {"x": 3}
        assert world.log_read("versions") == [(kept, "w2", {"v": 1})]

    def test_a_search_of_several_owners_reads_exactly_them_and_a_users_delete_leaves_scopes(self, backend) -> None:
        # Shared scopes are owner ids (beeweave_core/scopes.py): "scope:" names with ':' and
        # '/' that one exact OR over owners must tell apart, a sub-scope from its parent too.
        owners = ["alice", "bob", "scope:tenant", "scope:project:atlas", "scope:project:atlas/module:parser",
                  "scope:project:atlas2"]
        backend.insert([row(f"o{i}", f"apple note {i}", user_id=u) for i, u in enumerate(owners)])
        read = ["alice", "scope:tenant", "scope:project:atlas"]
        want = {f"o{owners.index(u)}" for u in read}
        f = build_filter(None, user_id=read)
        assert backend.count(f) == 3 and {c.id for c in backend.scan(f)} == want
        assert set(_ids(backend.lexical_search({"apple": 1, "note": 1}, f, 10))) == want
        for exact in (True, False):
            assert set(_ids(backend.vector_search(vec(1), f, 10, exact=exact))) == want
        assert backend.delete_user("alice") == 1
        left = build_filter(None, user_id=owners)
        assert {c.user_id for c in backend.scan(left)} == set(owners) - {"alice"}

    # -- lifecycle -------------------------------------------------------------------------------
    def test_closed_backend_refuses_work(self, world) -> None:
        world.flush()
        world.close()
        calls = {
            "get": lambda: world.get(["w0"]),
            "contains": lambda: world.contains(["w0"]),
            "count": lambda: world.count(),
            "matching": lambda: world.matching(["w0"], build_filter(None)),
            "scan": lambda: list(world.scan(build_filter(None))),
            "insert": lambda: world.insert([row("n", "kiwi")]),
            "update": lambda: world.update([WORLD[0].chunk]),
            "replace": lambda: world.replace([WORLD[0]]),
            "modify": lambda: world.modify(["w0"], lambda current: []),
            "rank_fields": lambda: world.rank_fields(["w0"]),
            "record_access": lambda: world.record_access({"w0": (1, dt(2025, 1, 1))}),
            "delete": lambda: world.delete(["w0"]),
            "delete_if": lambda: world.delete_if(["w0"], lambda c: True),
            "lexical_search": lambda: world.lexical_search({"apple": 1}, build_filter(None), 3),
            "vector_search": lambda: world.vector_search(vec(1), build_filter(None), 3),
            "vector_scores": lambda: world.vector_scores(vec(1), ["w0"]),
            "get_vectors": lambda: world.get_vectors(["w0"]),
            "get_meta": lambda: world.get_meta("k"),
            "set_meta": lambda: world.set_meta("k", "v"),
            "edges": lambda: world.edges(["w0"]),
            "add_edges": lambda: world.add_edges([Relationship("w0", "w1", "tag")]),
            "delete_edges": lambda: world.delete_edges([Relationship("w0", "w1", "tag")]),
            "kv_put": lambda: world.kv_put("ns", "k", {}),
            "kv_get": lambda: world.kv_get("ns", "k"),
            "kv_delete": lambda: world.kv_delete("ns", "k"),
            "kv_scan": lambda: list(world.kv_scan("ns")),
            "log_append": lambda: world.log_append("s", "k", {}),
            "log_read": lambda: world.log_read("s"),
            "delete_user": lambda: world.delete_user("ann"),
            "flush": lambda: world.flush(),
        }
        answered = []
        for name, call in calls.items():
            try:
                call()
            except StoreClosedError:
                continue
            answered.append(name)
        assert answered == [], f"these methods still work on a closed backend: {answered}"
        world.close()  # twice is harmless

    def test_reopen_keeps_everything(self, make, reopen) -> None:
        if reopen is None:
            pytest.skip("this backend does not persist")
        world = make(CONTEXT)
        world.insert(WORLD + SESSION)
        world.add_edges([Relationship("w0", "w1", "semantic", 0.5), Relationship("w2", "w0", "entity")])
        world.set_meta("note", "kept")
        world.delete(["w4"])
        everything = build_filter(EVERY_STATUS)
        queries = [{"apple": 1}, {"grape": 2, "fig": 1}, {"kiwi": 1, "lime": 1}]
        world_scores = world.vector_scores(vec(9), [r.chunk.id for r in WORLD + SESSION])
        before = (
            {i: c for i, c in world.get([r.chunk.id for r in WORLD]).items()},
            [world.lexical_search(q, everything, 10) for q in queries],
            [world.vector_search(vec(s), everything, 10) for s in range(3)],
            world.count(everything),
            world.rank_fields([r.chunk.id for r in WORLD]),
        )
        again = reopen(world)
        try:
            assert again.get_meta("note") == "kept"
            after = (
                {i: c for i, c in again.get([r.chunk.id for r in WORLD]).items()},
                [again.lexical_search(q, everything, 10) for q in queries],
                [again.vector_search(vec(s), everything, 10) for s in range(3)],
                again.count(everything),
                again.rank_fields([r.chunk.id for r in WORLD]),
            )
            for name, a, b in zip(("records", "lexical", "vector", "count", "rank fields"), after, before):
                assert a == b, f"{name} differ after reopening"
            ids = [r.chunk.id for r in WORLD + SESSION]
            assert again.vector_scores(vec(9), ids) == pytest.approx(world_scores)
            assert again.contains(["w4"]) == set()
            again.insert([row("n1", "apple kiwi")])  # and it keeps working
            assert "n1" in _ids(again.lexical_search({"kiwi": 1}, everything, 5))
        finally:
            again.close()

    def test_nonfinite_scores_never_escape(self, world) -> None:
        for s in [s for _, s in world.lexical_search({"apple": 3, "grape": 1}, build_filter(EVERY_STATUS), 50)] + \
                 [s for _, s in world.vector_search(vec(3), build_filter(EVERY_STATUS), 50)]:
            assert math.isfinite(s)
