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

from ..errors import BeeWeaveError
from ..records import KnowledgeChunk
from .exchange import Candidates, ChunkRow, TermEvidence, VerifyReport
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


class StaleCandidates(BeeWeaveError):
    """``Candidates.records`` of an ``optimistic`` retrieve: the candidates were ranked from
    a state of the store that other writes have since moved past. The caller retrieves
    again, not optimistically (the engine does; it never reaches a user)."""
