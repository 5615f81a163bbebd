"""What a storage backend and the engine exchange, and the contract that names it.

The contract itself, ``StoreBackend``, is a composition of small role protocols
(records, search index, edges, key-value, log, ...) with the ``Capabilities`` each backend
declares: see ``store/roles.py`` and docs/backends.md. This module holds the values that
cross it (``ChunkRow`` in, ``VerifyReport`` and a one-trip search's ``Candidates`` out),
the helpers both backends share, and the schema version; it re-exports the roles so
``from beeweave_core.store.base import StoreBackend`` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import BeeWeaveError
from ..records import KnowledgeChunk, Relationship
from ..scoring import RankFields
from .roles import (
    Capabilities,
    Edges,
    Integrity,
    KeyValue,
    Lifecycle,
    Log,
    Meta,
    OwnsQueue,
    Records,
    RetrievesInOneTrip,
    SearchesTermsInOneTrip,
    SearchIndex,
    StoreBackend,
    Users,
)

__all__ = ["SCHEMA_VERSION", "Candidates", "Capabilities", "ChunkRow", "Edges", "Integrity", "KeyValue", "Lifecycle",
           "Log", "Meta", "OwnsQueue", "Records", "RetrievesInOneTrip", "SearchIndex", "SearchesTermsInOneTrip",
           "StaleCandidates", "StoreBackend", "TermEvidence", "Users", "VerifyReport", "records_in_order",
           "split_changes"]

# Bumped by every named migration; a store newer than the code refuses to open.
SCHEMA_VERSION = 4


@dataclass
class ChunkRow:
    """What a backend stores for one chunk: the record, its vector and its index terms."""

    chunk: KnowledgeChunk
    vector: np.ndarray
    terms: list[str]


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


def split_changes(new: Sequence[KnowledgeChunk | ChunkRow],
                  given: Mapping[str, KnowledgeChunk]) -> tuple[list[KnowledgeChunk], list[ChunkRow]]:
    """What a ``modify`` change returned: (records to update, rows to replace). A record it
    was not given is a programming error and writes nothing."""
    chunks: list[KnowledgeChunk] = []
    rows: list[ChunkRow] = []
    for n in new:
        cid = n.chunk.id if isinstance(n, ChunkRow) else n.id
        if cid not in given:
            from ..errors import InvalidInputError

            raise InvalidInputError(f"modify: the change returned {cid!r}, a record it was not given")
        if isinstance(n, ChunkRow):
            rows.append(n)
        else:
            chunks.append(n)
    return chunks, rows


def records_in_order(get: Callable[[Sequence[str]], dict[str, KnowledgeChunk]],
                     ids: Sequence[str]) -> Iterator[KnowledgeChunk]:
    """``scan`` from ``scan_ids``: the records of ``ids`` in that order, read 500 at a time
    (one that vanished meanwhile is skipped)."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        got = get(part)
        for cid in part:
            if cid in got:
                yield got[cid]


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
    """

    best: dict[str, float]
    lexical: dict[str, float]


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

    def records(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]: ...


class StaleCandidates(BeeWeaveError):
    """``Candidates.records`` of an ``optimistic`` retrieve: the candidates were ranked from
    a state of the store that other writes have since moved past. The caller retrieves
    again, not optimistically (the engine does; it never reaches a user)."""
