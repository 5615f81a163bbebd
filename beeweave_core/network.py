"""The knowledge network's shapes: how search expands along relationships and outside
candidates to post-process (the work is done by :class:`beeweave_core.engine.graph.Graph`,
whose settings, ``NetworkConfig``, are in :mod:`beeweave_core.engine.search_config`).

Edges are stored once (source -> target) and read in both directions:
- semantic: a new memory -> its most similar existing memories of the same user
  (top ``semantic_k`` above ``semantic_threshold``; weight = cosine);
- session: earlier -> next memory of the same (user, session) in time order;
- entity / tag: a new memory -> recent memories of the same user sharing an entity
  or a tag (weight = shared count / max(len) of the two sets).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .config_rules import Number, Rule, check_fields
from .records import RelationType

__all__ = ["ExpandOptions", "Candidate", "check_ranking"]


def __getattr__(name: str) -> Any:
    # NetworkConfig lived here: old imports keep working. Looked up lazily, because the engine
    # package (engine/__init__ -> graph) imports this module.
    if name == "NetworkConfig":
        from .engine.search_config import NetworkConfig

        return NetworkConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ExpandOptions:
    """Graph expansion of search results.

    Attributes:
        hops: how many edges away from a direct hit to go.
        edge_types: which relation types to follow (default: all).
        decay: score multiplier per hop (times the edge weight).
        limit: at most this many expanded hits (default: k).
    """

    hops: int = 1
    edge_types: tuple[str, ...] | None = None
    decay: float = 0.5
    limit: int | None = None

    def __post_init__(self) -> None:
        check_fields(self, _EXPAND_RULES)
        if self.edge_types is not None:
            object.__setattr__(self, "edge_types", check_edge_types(self.edge_types))


_EXPAND_RULES: dict[str, Rule] = {
    "hops": Number(0, integer=True), "decay": Number(0, 1, open_low=True),
    "limit": Number(0, integer=True, optional=True),
}


def check_edge_types(types: Any) -> tuple[str, ...]:
    """Relation type names (a name or an iterable of names or ``RelationType``s), each known."""
    from .errors import InvalidInputError

    if not isinstance(types, (str, RelationType, Iterable)):
        raise InvalidInputError(f"edge types must be a relation type name or a list of them, got {types!r}")
    types = (types,) if isinstance(types, (str, RelationType)) else tuple(types)
    allowed = {t.value for t in RelationType}
    names = tuple(getattr(t, "value", t) for t in types)
    bad = [t for t in names if t not in allowed]
    if bad:
        raise InvalidInputError(f"unknown edge types {bad}; known: {sorted(allowed)}")
    return names


def check_ranking(rerank: Any, mmr: Any, expand: Any) -> ExpandOptions | None:
    """Validate the ranking options ``search`` and ``postprocess`` share; return the expansion to do."""
    from .errors import InvalidInputError
    from .rerank import Reranker

    if rerank is not None and not isinstance(rerank, Reranker):
        raise InvalidInputError("rerank must have a rerank(query, hits) method")
    if mmr is not None and not (isinstance(mmr, (int, float)) and 0 <= mmr <= 1):
        raise InvalidInputError("mmr must be a number between 0 and 1")
    opts = ExpandOptions() if expand is True else (expand or None)
    if opts is not None and not isinstance(opts, ExpandOptions):
        raise InvalidInputError("expand must be a bool or an ExpandOptions")
    return opts


@dataclass
class Candidate:
    """A result from outside BeeWeave (e.g. a document retriever) to be post-processed.

    If ``id`` is the id of a stored memory, it is treated as that memory.
    """

    id: str
    text: str
    score: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
