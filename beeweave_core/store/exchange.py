"""The values that cross the storage contract (store/roles.py), apart from it.

What the engine hands a backend (``ChunkRow``, a linking pass's ``LinkReads`` and
``Derive``) and what it gets back (``VerifyReport``, ``LinkFacts``, a one-trip search's
``Candidates`` with their ``TermEvidence``). They live here, depending on nothing in the
storage package, so that the roles, the helpers both backends share (store/base.py) and the
linking reference (store/links.py) all import them and none imports another back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..filters import Filter
from ..records import KnowledgeChunk, Relationship
from ..scoring import RankFields

__all__ = ["Candidates", "ChunkRow", "Derive", "LinkFacts", "LinkReads", "TermEvidence", "VerifyReport"]


@dataclass
class ChunkRow:
    """What a backend stores for one chunk: the record, its vector and its index terms.

    ``model``: the name of the embedding model the vector is for (the engine's embedder's);
    a backend stores the row only if the store's recorded model (meta ``embedder``) is
    still that one when its write transaction reads it (``check_model``), else raises
    ``EmbedderChangedError``. None: not checked (a re-embed's switch, which sets the model
    in the same transaction)."""

    chunk: KnowledgeChunk
    vector: np.ndarray
    terms: list[str]
    model: str | None = None


@dataclass
class VerifyReport:
    """What ``verify()`` found: ``ok`` when the indexes and relationships agree with the records."""

    records: int
    edges: int
    problems: list[str]
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return not self.problem_count and not self.problems


@dataclass
class TermEvidence:
    """Calibrated relevance's lexical evidence for a search's evidence terms (the query's
    heaviest, ``relevance.evidence_terms``), read with the candidates' BM25 in one pass.

    Attributes:
        best: each evidence term's best single-term BM25 score in the searched scope (what
            ``lexical_search({term: qtf}, flt, 1)`` ranks first; not positive for a term whose
            idf fell to zero or below); a term no record in scope has is absent, which
            relevance reads as a part of the query the store does not know.
        lexical: each candidate's BM25 over the evidence terms, summing only its positive
            per-term scores (0 when it has none); a local index's only the records asked for.
        idf: each evidence term's idf as those scores weigh it (terms no live record holds
            left out), and ``rare`` that of a term one record holds, as
            ``SearchIndex.term_idf`` gives them.
    """

    best: dict[str, float]
    lexical: dict[str, float]
    idf: dict[str, float]
    rare: float


class Candidates(Protocol):
    """A hybrid search's candidates with both retrievers' scores, the fields ranking reads
    and the records, as one backend round trip returns them; ``evidence`` when the
    search asked for evidence terms, covering at least the ids ``records`` was asked for
    (read once ``records`` returned: a local index scores only those). ``rivals``: when
    ``records`` brings them along, each record's ``contradicts`` relationships in either
    direction (as ``edges(ids, types=["contradicts"])`` answers), so the engine need not ask
    for them; None otherwise. Read-only to the engine (a backend may narrow a type, e.g.
    ``rivals`` always None)."""

    @property
    def ids(self) -> list[str]: ...

    @property
    def lexical(self) -> np.ndarray: ...

    @property
    def vector(self) -> np.ndarray: ...

    @property
    def fields(self) -> dict[str, RankFields]: ...

    @property
    def evidence(self) -> TermEvidence | None: ...

    @property
    def rivals(self) -> dict[str, list[Relationship]] | None: ...

    @property
    def own_vector(self) -> np.ndarray | None:
        """Each candidate's cosine with its own vector (``vector`` may blend in its session
        neighbours'), aligned with ``ids``; None: the engine reads the vectors (``get_vectors``)."""

    def records(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]: ...


@dataclass
class LinkReads:
    """The reads of one linking pass.

    Attributes:
        similar: (vector, scope, k): the ``k`` records in ``scope`` nearest to ``vector``,
            as ``vector_search(vector, scope, k)``.
        sessions: scopes of sessions: each one's ids in time order, as
            ``scan_ids(scope, order="timestamp")``, and the session edges going out of them.
        shared: (scope, limit): ids newest first, as ``scan_ids(scope, order="timestamp",
            descending=True, limit=limit)``, with the tags and entities of each.
    """

    similar: list[tuple[np.ndarray, Filter, int]] = field(default_factory=list)
    sessions: list[Filter] = field(default_factory=list)
    shared: list[tuple[Filter, int]] = field(default_factory=list)


@dataclass
class LinkFacts:
    """The answers to a ``LinkReads``, in its order.

    Attributes:
        similar: per ``similar`` read, (id, cosine) best first.
        sessions: per ``sessions`` read, (ids in time order, their outgoing session edges
            ordered by source, target).
        shared: per ``shared`` read, the ids newest first.
        labels: id -> (tags, entities) of every record a ``shared`` read found.
    """

    similar: list[list[tuple[str, float]]]
    sessions: list[tuple[list[str], list[Relationship]]]
    shared: list[list[str]]
    labels: dict[str, tuple[list[str], list[str]]]


# What the graph part makes of the facts: (edges to add, stale edges to delete first).
Derive = Callable[[LinkFacts], tuple[Sequence[Relationship], Sequence[Relationship]]]
