"""``SearchRequest``: one search's input, validated once and passed whole to each stage.

``build_search_request`` is the one place a search's arguments are checked and their
defaults resolved (the store's fusion, relevance floor and gate, the scopes a user reads);
the stages of :class:`beeweave_core.engine.search.Search` only read the request, and a
stage that narrows the search (a time phrase, one of several questions, the loosened pass)
passes on a copy with that field replaced (``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DimensionMismatchError, InvalidInputError
from ..filters import Filter, build_filter
from ..fusion import FusionMode
from ..network import ExpandOptions, check_ranking
from ..records import to_datetime
from ..relevance import default_gate
from ..rerank import Reranker
from ..store.base import check_query_model, model_name
from ..validation import check_content, check_count, check_number, check_vector

if TYPE_CHECKING:
    from ..scopes import Scopes
    from .shared import Shared

__all__ = ["SearchRequest", "build_search_request"]


# eq=False: a request holds a numpy vector, which has no single truth value to compare by.
@dataclass(frozen=True, eq=False)
class SearchRequest:
    """A validated search.

    ``query``: the text searched; ``flt``: the owners read, the caller's filters and
    ``as_of``'s bound; ``now``: the clock when the search began; ``at``: ``as_of``, else
    ``now`` (which statement of a fact is current); ``query_vector``: the caller's vector,
    unit length (None: each question is embedded); ``min_relevance`` and ``abstain_below``:
    the thresholds in force, the store's defaults resolved (None: none)."""

    query: str
    k: int
    flt: Filter
    mode: FusionMode
    now: datetime
    at: datetime
    query_vector: np.ndarray | None
    min_score: float | None
    rerank: Reranker | None
    mmr: float | None
    loosen: bool
    min_relevance: float | None
    abstain_below: float | None
    expand: ExpandOptions | None

    @property
    def reorders(self) -> bool:
        """Whether a reranker or MMR reorders the ranked candidates (they see more than k)."""
        return self.rerank is not None or self.mmr is not None


def build_search_request(shared: Shared, reach: Scopes, query: Any, *, user_id: Any, k: Any, filters: Any,
                         fusion: Any, min_score: Any, query_embedding: Any, expand: Any, rerank: Any, mmr: Any,
                         loosen: Any, min_relevance: Any, abstain_below: Any, scopes: Any,
                         as_of: Any) -> SearchRequest:
    """The search ``BeeWeave.search`` describes, from its arguments as a caller gave them
    (``reach``: which owners a user's scopes name; the defaults are the public signature's,
    so none here): an ``InvalidInputError`` names the first bad one, before anything is read."""
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
    check_count("k", k)
    mode = _fusion(fusion, shared.config.fusion)
    now = shared.clock()
    flt = build_filter(filters, user_id=reach.owners(user_id, scopes), now=now, declared=shared.declared_fields)
    at = now if as_of is None else to_datetime(as_of, "as_of")
    if as_of is not None:  # what was known then: nothing stored later
        flt = flt.replace(until=at if flt.until is None else min(flt.until, at))
    qvec = None if query_embedding is None else _given_vector(shared, query_embedding)
    score = None if min_score is None else check_number("min_score", min_score)
    floor, gate = _thresholds(shared, min_relevance, abstain_below)
    opts = check_ranking(rerank, mmr, expand)
    if not isinstance(loosen, bool):
        raise InvalidInputError(f"loosen must be true or false, got {loosen!r}")
    check_content(query, "query")
    return SearchRequest(query=query, k=k, flt=flt, mode=mode, now=now, at=at, query_vector=qvec,
                         min_score=score, rerank=rerank, mmr=None if mmr is None else float(mmr), loosen=loosen,
                         min_relevance=floor, abstain_below=gate, expand=opts)


def _fusion(fusion: Any, default: FusionMode) -> FusionMode:
    try:
        return FusionMode(fusion) if fusion is not None else default
    except ValueError:
        raise InvalidInputError(
            f"fusion must be one of {', '.join(m.value for m in FusionMode)}, got {fusion!r}") from None


def _thresholds(shared: Shared, min_relevance: Any, abstain_below: Any) -> tuple[float | None, float | None]:
    """The relevance floor and the "nothing relevant" gate in force: the caller's, else the
    store's (``SearchConfig``), else for the gate its model's tuned one; ``min_relevance=0``
    with no gate given asks for every hit, so it turns the gate off too."""
    if min_relevance is None:
        min_relevance = shared.config.min_relevance
    floor = None if min_relevance is None else check_number("min_relevance", min_relevance, low=0.0, high=1.0)
    if abstain_below is None:
        abstain_below = 0.0 if floor == 0 else default_gate(shared.config.abstain_below, shared.embedder.name)
    gate = None if abstain_below is None else check_number("abstain_below", abstain_below, low=0.0, high=1.0)
    return floor, gate


def _given_vector(shared: Shared, query_embedding: Any) -> np.ndarray:
    """The caller's query vector, checked against the store's dimension. Of another dimension
    because another process moved the store to another model since this BeeWeave opened it
    (the vector is this one's model's, the store's dimension the new one's): that says so
    (``EmbedderChangedError``, read only then), as a search embedding its own query would."""
    try:
        return check_vector(query_embedding, shared.dim or shared.embedder.dim, "query_embedding")
    except DimensionMismatchError:
        check_query_model(shared.embedder.name, model_name(shared.backend.get_meta("embedder")))
        raise
