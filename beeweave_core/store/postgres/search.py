"""What one search statement returns (sql.SEARCH_SQL): every candidate's two scores, the
fields ranking reads, and its record, decoded only when asked for.

A search ranks ~100 candidates and returns ~10, so the records travel as JSON text and
only the returned ones are parsed into ``KnowledgeChunk``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ...records import KnowledgeChunk, Relationship, to_datetime
from ...scoring import RankFields
from ..base import TermEvidence

__all__ = ["Candidates", "decode_record", "rank_fields_of"]

# (doc text, access count, last accessed, outgoing edges as JSON text)
RecordRow = tuple[str, Any, Any, Any]


def _when(text: str | None) -> datetime | None:
    return None if text is None else to_datetime(text)


def rank_fields_of(ts: str, weight: str | None, confidence: str | None, pinned: str | None, stale: Any,
                   reinforced: str | None, expires: str | None) -> RankFields:
    """RankFields from the document's fields as text; fields a record of an older shape
    lacks take the chunk's defaults, as ``from_dict`` does."""
    return RankFields(to_datetime(ts), 1.0 if weight is None else float(weight),
                      1.0 if confidence is None else float(confidence), pinned == "true", bool(stale),
                      _when(reinforced), _when(expires))


def decode_record(cid: str, doc: str, n: Any, last: Any, edges: Any) -> KnowledgeChunk:
    """A record as stored: the document, with the access counts of their side table and the
    outgoing relationships (``[[dst, type, weight], ...]`` as JSON text)."""
    chunk = KnowledgeChunk.from_stored(json.loads(doc))
    if n is not None:
        chunk.access_count = int(n)
        chunk.last_accessed = None if last is None else to_datetime(last)
    if edges:
        chunk.relationships.extend(Relationship(cid, d, t, w) for d, t, w in json.loads(edges))
    return chunk


@dataclass
class Candidates:
    """A search's candidates (the lexical top k and the dense top k, with the ids of both
    lists in lexical order: best BM25 first, ties by id), each scored both ways.

    Attributes:
        ids: the candidates.
        lexical: BM25 with session context, aligned with ``ids`` (0 when no term matched).
        vector: cosine with the context vector, aligned with ``ids``.
        fields: what ranking reads of each candidate.
        evidence: calibrated relevance's lexical evidence, when the search asked for it.
        rivals: None: the search statement does not read the records' ``contradicts``
            relationships (the engine asks ``edges``).
    """

    ids: list[str]
    lexical: np.ndarray
    vector: np.ndarray
    fields: dict[str, RankFields]
    _records: dict[str, RecordRow] = field(default_factory=dict, repr=False)
    evidence: TermEvidence | None = None
    rivals: None = None

    def records(self, ids: Sequence[str]) -> dict[str, KnowledgeChunk]:
        """The records of those ``ids`` that are candidates (as ``get`` returns them)."""
        return {cid: decode_record(cid, *self._records[cid]) for cid in ids if cid in self._records}
