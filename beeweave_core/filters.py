"""Search filters, validated once and pushed into every retriever of every backend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import InvalidInputError, UnknownFilterError
from .fields import FILTER_KEYS, field_values
from .records import ChunkStatus, ContentType, Intent, MemoryTier, utcnow
from .timewords import time_bound
from .validation import check_timestamp

__all__ = ["Filter", "FILTER_KEYS", "build_filter", "check_one_user_scope"]

@dataclass(frozen=True)
class Filter:
    """A conjunction of conditions; each set-valued field means "any of".

    ``status`` defaults to active memories only. ``None`` means "no condition".
    """

    user_ids: frozenset[str] | None = None
    agent_ids: frozenset[str] | None = None
    session_ids: frozenset[str] | None = None
    tags_any: frozenset[str] | None = None
    tags_all: frozenset[str] | None = None
    entities: frozenset[str] | None = None  # any of
    since: datetime | None = None
    until: datetime | None = None
    types: frozenset[str] | None = None
    intents: frozenset[str] | None = None
    statuses: frozenset[str] | None = frozenset({ChunkStatus.ACTIVE.value})
    ids: frozenset[str] | None = None
    tiers: frozenset[str] | None = None  # working / short / long
    # declared metadata fields (beeweave_core.fields): ((name, type, values any of), ...), sorted
    fields: tuple[tuple[str, str, tuple[Any, ...]], ...] | None = None

    def replace(self, **changes: Any) -> Filter:
        from dataclasses import replace

        return replace(self, **changes)


def _str_set(key: str, value: Any, allowed: type | None = None) -> frozenset[str]:
    values = [value] if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") else list(value)
    out = set()
    for v in values:
        if hasattr(v, "value") and isinstance(v.value, str):  # str enums
            v = v.value
        if not isinstance(v, str):
            raise InvalidInputError(f"filter {key!r} takes strings, got {type(v).__name__}")
        if allowed is not None:
            try:
                allowed(v)
            except ValueError:
                names = ", ".join(m.value for m in allowed)  # type: ignore[attr-defined]
                raise InvalidInputError(f"filter {key!r}: {v!r} is not one of {names}") from None
        out.add(v)
    if not out:
        raise InvalidInputError(f"filter {key!r} is empty: it would match nothing")
    return frozenset(out)


Declared = Mapping[str, str] | Callable[[], Mapping[str, str]] | None


def check_one_user_scope(user_id: Any, filters: Mapping[str, Any] | None) -> None:
    """Refuse a face's ``user_id`` beside a different ``filters["user_id"]``.

    ``build_filter`` intersects the two (a scoped key's users with the users asked for must
    never widen), so ``user_id="alice", filters={"user_id": ["alice", "bob"]}`` would search
    alice's memories alone, silently. A retriever configured so means one of the two; it
    must say which."""
    if user_id is None or not isinstance(filters, Mapping) or filters.get("user_id") is None:
        return
    if _str_set("user_id", filters["user_id"]) != _str_set("user_id", user_id):
        raise InvalidInputError(
            f"user_id={user_id!r} and filters['user_id']={filters['user_id']!r} are both given, and a search "
            "reads only the users in both; give one: user_id for one user, filters={'user_id': [...]} for several")


def build_filter(filters: Mapping[str, Any] | None = None, *, user_id: Any = None,
                 now: datetime | None = None, declared: Declared = None) -> Filter:
    """Validate a user's filter dict (plus the ``user_id`` scope) into a :class:`Filter`.

    ``since``/``until`` also take time words ("last week", "yesterday", "上周", "最近三天"),
    resolved against ``now`` (the engine's clock; the current UTC time if not given).
    Any other key must be a declared metadata field (``declared``: the store's fields, or a
    callable read only when such a key appears)."""
    if filters is not None and not isinstance(filters, Mapping):
        raise InvalidInputError(f"filters must be a mapping, got {type(filters).__name__}")
    f = dict(filters or {})
    unknown = sorted(k for k in f if k not in FILTER_KEYS)
    kw: dict[str, Any] = {}
    if unknown:
        types = dict((declared() if callable(declared) else declared) or {})
        missing = [k for k in unknown if k not in types]
        if missing:
            raise UnknownFilterError(
                f"unknown filter key(s) {missing}; known keys: {', '.join(FILTER_KEYS)}"
                + (f", declared fields: {', '.join(sorted(types))}" if types else "")
                + "; to filter on a metadata key, declare it first, e.g. "
                "memory.declare_fields({'project_id': 'str'})")
        kw["fields"] = tuple((k, types[k], field_values(k, types[k], f.pop(k))) for k in unknown)
    if user_id is not None:
        scope = _str_set("user_id", user_id)
        if "user_id" in f:
            scope &= _str_set("user_id", f.pop("user_id"))
            if not scope:  # disjoint scopes mean nothing may be returned, never everything
                scope = frozenset({"\x00no-user\x00"})
        kw["user_ids"] = scope
    if "user_id" in f:
        kw["user_ids"] = _str_set("user_id", f.pop("user_id"))
    for key, attr, enum in (("agent_id", "agent_ids", None), ("session_id", "session_ids", None),
                            ("type", "types", ContentType), ("intent", "intents", Intent),
                            ("status", "statuses", ChunkStatus), ("ids", "ids", None),
                            ("tier", "tiers", MemoryTier)):
        if key in f:
            kw[attr] = _str_set(key, f.pop(key), enum)
    if "tags" in f:
        kw["tags_any"] = _str_set("tags", f.pop("tags"))
    if "tags_any" in f:
        kw["tags_any"] = _str_set("tags_any", f.pop("tags_any")) | kw.get("tags_any", frozenset())
    if "entities" in f:
        kw["entities"] = _str_set("entities", f.pop("entities"))
    if "tags_all" in f:
        kw["tags_all"] = _str_set("tags_all", f.pop("tags_all"))
    for key in ("since", "until"):
        if key in f:
            kw[key] = _time_value(f.pop(key), key, now)
    if kw.get("since") and kw.get("until") and kw["since"] > kw["until"]:
        raise InvalidInputError("filter 'since' is after 'until'")
    return Filter(**kw)


def _time_value(value: Any, key: str, now: datetime | None) -> datetime:
    if isinstance(value, str):
        try:
            return check_timestamp(value, key)
        except InvalidInputError:
            bound = time_bound(value, now or utcnow(), key)
            if bound is None:
                raise InvalidInputError(
                    f"filter {key!r}: {value!r} is neither a timestamp nor a time phrase "
                    "(e.g. 'yesterday', 'last week', 'last 3 days', '上周', '最近三天')") from None
            return bound
    return check_timestamp(value, key)
