"""The engine's settings: search defaults (``SearchConfig``, for :class:`~beeweave_core.engine.search.Search`)
and which relationships are mined (``NetworkConfig``, for :class:`~beeweave_core.engine.graph.Graph`).

Each field's range or choice is declared in a rules table checked by
:func:`beeweave_core.config_rules.check_fields`, so a bad value fails when the configuration is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config_rules import FLAG, Choice, Number, Rule, check_fields
from ..errors import InvalidInputError
from ..fusion import FusionMode

__all__ = ["SearchConfig", "NetworkConfig"]


class _Weights:
    """The retrievers' fusion weights: ``lexical`` and ``vector``, each a number >= 0."""

    def check(self, name: str, value: Any, config: Any) -> Any:
        if not isinstance(value, Mapping) or not set(value) <= {"lexical", "vector"}:
            raise InvalidInputError(f"{name} must be {self.text()}, got {value!r}")
        for key, weight in value.items():
            Number(0).check(f"{name}[{key!r}]", weight, config)
        return dict(value)

    def text(self) -> str:
        return "a dict of 'lexical' and 'vector' to weights >= 0"


@dataclass
class SearchConfig:
    """Defaults for :meth:`BeeWeave.search`; each can be overridden per call.

    Attributes:
        fusion: how lexical and vector scores are combined (z-scores by default).
        rrf_k: the constant of reciprocal-rank fusion.
        weights: per-retriever weights ("lexical", "vector").
        candidates: how many candidates each retriever contributes (at least 4·k).
        query_cache_size: how many query embeddings to keep (repeated queries skip the model).
        time_words: a time phrase in the query ("last week", "上周") becomes a time filter
            and leaves the query text (see :mod:`beeweave_core.timewords`).
        contradictions: memories that ``contradicts`` a hit come with it in the results.
        min_relevance: the default floor on a hit's calibrated relevance (None: no floor, every
            hit is returned; ``beeweave_core.relevance.calibration_for(model).min_relevance``
            is the tuned per-hit floor).
        abstain_below: the default gate on a search's best hit: when no hit reaches this
            relevance the search returns nothing, an off-topic question gets no memories.
            None: the store's model's tuned gate
            (``beeweave_core.relevance.calibration_for(model).abstain_below``,
            ``DEFAULT_ABSTAIN_BELOW`` for the default model; no gate for a model nobody
            fitted, whose relevance scale means nothing); 0: no gate, always the top k (a
            search's ``min_relevance=0`` also turns it off).
    """

    fusion: FusionMode = FusionMode.ZSCORE
    rrf_k: float = 60.0
    weights: dict[str, float] = field(default_factory=lambda: {"lexical": 1.0, "vector": 1.0})
    candidates: int = 50
    query_cache_size: int = 1024
    time_words: bool = True
    contradictions: bool = True
    min_relevance: float | None = None
    abstain_below: float | None = None

    def __post_init__(self) -> None:
        check_fields(self, _SEARCH_RULES)


_SEARCH_RULES: dict[str, Rule] = {
    "fusion": Choice(FusionMode), "rrf_k": Number(0, open_low=True), "weights": _Weights(),
    "candidates": Number(1, integer=True), "query_cache_size": Number(0, integer=True),
    "time_words": FLAG, "contradictions": FLAG,
    "min_relevance": Number(0, 1, optional=True), "abstain_below": Number(0, 1, optional=True),
}


@dataclass(frozen=True)
class NetworkConfig:
    """Which relationships are mined when memories are added (see :mod:`beeweave_core.network`).

    Attributes:
        semantic_k: link a new memory to at most this many similar memories of its user (0: none).
        semantic_threshold: the cosine a similar memory must reach.
        session_links: link consecutive memories of a session.
        entity_links, tag_links: link memories that share an entity, a tag.
        max_shared_links: per new memory and kind; shared popular tags would link everything.
    """

    semantic_k: int = 5
    semantic_threshold: float = 0.6
    session_links: bool = True
    entity_links: bool = True
    tag_links: bool = True
    max_shared_links: int = 10

    def __post_init__(self) -> None:
        check_fields(self, _NETWORK_RULES)


_NETWORK_RULES: dict[str, Rule] = {
    "semantic_k": Number(0, integer=True), "semantic_threshold": Number(-1, 1),
    "session_links": FLAG, "entity_links": FLAG, "tag_links": FLAG,
    "max_shared_links": Number(0, integer=True),
}
