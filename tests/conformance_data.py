"""The conformance suite's world: the records, filters, index configurations and the slow
reference model every role's tests (tests/conformance_*.py) check a backend against."""

from __future__ import annotations

import math
from collections import Counter

import bm25s
import numpy as np

from beeweave_core import (
    ChunkStatus,
    ContentType,
    IndexConfig,
    Intent,
    KnowledgeChunk,
    ProcessedContent,
    SessionContext,
)
from beeweave_core.index.turns import is_turn
from beeweave_core.store.base import ChunkRow
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


def lucene(corpus: list[list[str]], query: list[str], cfg: IndexConfig) -> list[float]:
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


def expected_ids(flt: dict, rows=WORLD) -> set[str]:
    return {r.chunk.id for r in rows if matches(r.chunk, flt)}


def term_counts(terms) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in terms:
        out[t] = out.get(t, 0) + 1
    return out


def ids_of(pairs) -> list[str]:
    return [i for i, _ in pairs]
