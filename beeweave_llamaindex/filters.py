"""LlamaIndex ``MetadataFilters`` -> the filter dict of ``BeeWeave.search``.

Only the translation lives here; the filter semantics (and the validation of
values) are beeweave_core's. What has no BeeWeave counterpart is refused with an
error that names it, never dropped: a silently ignored filter would widen a search.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilters

from beeweave_core import InvalidInputError, UnknownFilterError

__all__ = ["to_beeweave_filters"]

_EQ_IN: dict[FilterOperator, str | None] = {FilterOperator.EQ: None, FilterOperator.IN: None}  # None: same key in BeeWeave

# LlamaIndex key -> {operator: BeeWeave filter key}.
_TRANSLATION: dict[str, dict[FilterOperator, str | None]] = {
    "user_id": _EQ_IN,
    "agent_id": _EQ_IN,
    "session_id": _EQ_IN,
    "type": _EQ_IN,
    "intent": _EQ_IN,
    "status": _EQ_IN,
    "tags": {FilterOperator.IN: "tags_any", FilterOperator.ANY: "tags_any",
             FilterOperator.ALL: "tags_all", FilterOperator.CONTAINS: "tags_all"},
    "entities": {FilterOperator.IN: "entities", FilterOperator.ANY: "entities",
                 FilterOperator.CONTAINS: "entities"},
    # BeeWeave's bounds are inclusive: "> t" and ">= t" differ only for a memory stamped exactly t.
    "timestamp": {FilterOperator.GTE: "since", FilterOperator.GT: "since",
                  FilterOperator.LTE: "until", FilterOperator.LT: "until"},
}


def to_beeweave_filters(filters: MetadataFilters | None) -> dict[str, Any]:
    """Translate LlamaIndex metadata filters (AND only, nesting allowed) to BeeWeave filters.

    Raises:
        UnknownFilterError: a key BeeWeave cannot filter on.
        InvalidInputError: an operator BeeWeave has no counterpart for, an OR / NOT
            condition, or two filters that set the same BeeWeave condition.
    """
    out: dict[str, Any] = {}
    if filters is not None:
        _collect(filters, out)
    return out


def _collect(filters: MetadataFilters, out: dict[str, Any]) -> None:
    if not isinstance(filters, MetadataFilters):
        raise InvalidInputError(f"filters must be a llama_index MetadataFilters, got {type(filters).__name__}")
    condition = filters.condition or FilterCondition.AND
    if condition is not FilterCondition.AND:
        raise InvalidInputError(
            f"filter condition {condition.value!r} is not supported: BeeWeave filters are a conjunction, use 'and'")
    for f in filters.filters:
        if isinstance(f, MetadataFilters):
            _collect(f, out)
            continue
        by_op = _TRANSLATION.get(f.key)
        if by_op is None:
            raise UnknownFilterError(f"BeeWeave cannot filter on {f.key!r}; supported keys: {', '.join(_TRANSLATION)}")
        op = FilterOperator(getattr(f, "operator", FilterOperator.EQ))
        if op not in by_op:
            names = ", ".join(o.name for o in by_op)
            raise InvalidInputError(
                f"operator {op.name} ({op.value!r}) is not supported on {f.key!r}; use one of {names}")
        key = by_op[op] or f.key
        if key in out:
            raise InvalidInputError(f"two filters set BeeWeave's {key!r} condition; combine them into one")
        out[key] = f.value
