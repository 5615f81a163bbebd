"""What linking freshly stored memories reads from a backend, as one request.

The graph part (engine/graph.py) mines a new memory's relationships from a few reads: its
nearest records, its session in time order with the session edges already there, and the
newest records sharing a tag or an entity. ``LinkReads`` names those reads up front so a
backend can answer them together (the values are in store/exchange.py) — PostgreSQL in one round trip, inside the transaction
that inserts the memories (``StoreBackend.insert_linked``) — and ``read_links`` answers
them through the ordinary protocol methods, the reference every backend must equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import StoreUnavailableError
from ..records import Relationship, RelationType
from .exchange import ChunkRow, Derive, LinkFacts, LinkReads

if TYPE_CHECKING:
    from .roles import StoreBackend

__all__ = ["LinkReads", "LinkFacts", "Derive", "read_links", "link_stored", "insert_then_link"]


def read_links(backend: StoreBackend, reads: LinkReads) -> LinkFacts:
    """``reads`` answered by the protocol's own methods, one call each."""
    similar = [backend.vector_search(v, scope, k) for v, scope, k in reads.similar]
    sessions = []
    for scope in reads.sessions:
        ordered = backend.scan_ids(scope, order="timestamp")
        sessions.append((ordered, backend.edges(ordered, types=[RelationType.SESSION], direction="out")))
    shared = [backend.scan_ids(scope, order="timestamp", descending=True, limit=limit)
              for scope, limit in reads.shared]
    found = backend.get(list(dict.fromkeys(i for ids in shared for i in ids)))
    return LinkFacts(similar, sessions, shared, {i: (list(c.tags), list(c.entities)) for i, c in found.items()})


def link_stored(backend: StoreBackend, reads: LinkReads, derive: Derive) -> Sequence[Relationship]:
    """Link stored memories by the protocol's own calls: ``reads`` answered, the stale edges
    ``derive`` names deleted, its new edges written; returns the new edges."""
    add, stale = derive(read_links(backend, reads))
    if stale:
        backend.delete_edges(stale)
    backend.add_edges(add)
    return add


def insert_then_link(backend: StoreBackend, rows: Sequence[ChunkRow], reads: LinkReads, derive: Derive) -> bool:
    """``insert_linked`` in separate steps: insert (committed), read, then write the edges.
    Returns False when the rows went in but the store became unavailable before the edges did."""
    backend.insert(rows)
    try:
        link_stored(backend, reads, derive)
    except StoreUnavailableError:
        return False
    return True
