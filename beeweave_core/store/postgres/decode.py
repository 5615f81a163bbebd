"""Records and the fields ranking reads, decoded from the columns PostgreSQL returns.

A record travels as its JSON document's text and is parsed into a ``KnowledgeChunk`` only
when it is returned; the fields ranking reads come as the document's fields in text.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ...records import KnowledgeChunk, Relationship, to_datetime
from ...scoring import RankFields

__all__ = ["decode_record", "rank_fields_of"]


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
