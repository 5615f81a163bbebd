"""Search defaults (``SearchConfig``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fusion import FusionMode

__all__ = ["SearchConfig"]


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
