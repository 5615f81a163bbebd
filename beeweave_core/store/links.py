"""What linking freshly stored memories reads from a backend, as one request.

The graph part (engine/graph.py) mines a new memory's relationships from a few reads: its
nearest records, its session in time order with the session edges already there, and the
newest records sharing a tag or an entity. ``LinkReads`` names those reads up front so a
backend can answer them together — PostgreSQL in one round trip, inside the transaction
that inserts the memories (``StoreBackend.insert_linked``) — and ``read_links`` answers
them through the ordinary protocol methods, the reference every backend must equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import StoreUnavailableError
from ..filters import Filter
from ..records import Relationship, RelationType

if TYPE_CHECKING:
    from .base import ChunkRow, StoreBackend

__all__ = ["LinkReads", "LinkFacts", "Derive", "read_links", "link_stored", "insert_then_link"]


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
