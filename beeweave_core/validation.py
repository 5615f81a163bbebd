"""The one place where arguments are checked: ids, id lists, strings, JSON values,
timestamps, numbers and vectors.

Every entry point (the engine's parts, the lifecycle, ingestion, the server's schemas)
checks its arguments with these functions, so one call shape means one thing
everywhere. The rule for id lists: a bare string is one id, whatever the method
(``delete_many("abc")`` deletes the memory "abc", as ``feedback("abc", ...)`` rates it).
A check raises an :class:`InvalidInputError` subclass and never changes anything.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .config_rules import Number
from .errors import DimensionMismatchError, EmptyContentError, InvalidInputError, InvalidVectorError

__all__ = [
    "importance_of",
    "confidence_of",
    "check_text",
    "check_encodable",
    "check_id",
    "check_user",
    "id_list",
    "check_str_list",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_WEIGHT",
    "MAX_COUNT",
    "str_items",
    "check_json",
    "check_timestamp",
    "check_number",
    "check_count",
    "check_limit",
    "check_vector",
    "check_content",
    "check_chunk",
    "to_datetime",
]


def to_datetime(value: Any, name: str = "timestamp") -> datetime:
    """Accept a datetime, an ISO string or epoch seconds; return an aware UTC datetime.

    Naive datetimes are taken as UTC: storing local wall-clock time without a zone
    would make ordering across machines wrong.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInputError(f"{name} must be finite, got {value!r}")
        try:
            dt = datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidInputError(f"{name} {value!r} is out of range") from exc
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInputError(f"{name} {value!r} is not an ISO 8601 date-time") from exc
    else:
        raise InvalidInputError(
            f"{name} must be a datetime, an ISO string or epoch seconds, got {type(value).__name__}"
        )
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-12:00 is past the calendar in UTC
        raise InvalidInputError(f"{name} {value!r} is out of range") from None


def check_encodable(name: str, value: str) -> None:
    """A string SQLite, PostgreSQL and JSON can all store: no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} is not valid Unicode (lone surrogate at {exc.start})") from None


def check_text(name: str, value: Any, *, optional: bool = False) -> str | None:
    """A non-empty string (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    check_encodable(name, value)
    return value


def check_id(value: Any, name: str = "chunk_id") -> str:
    out = check_text(name, value)
    assert out is not None
    return out


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_user(value: Any, name: str = "user_id") -> str:
    """A user id: a non-empty string without control characters. The store keys a user's
    facts, patterns and sessions as ``<user>\\x1f<name>``, so a user id holding that
    separator would read as another user's prefix."""
    out = check_id(value, name)
    if _CONTROL.search(out):
        raise InvalidInputError(f"{name} must not contain control characters, got {out!r}")
    return out


def id_list(ids: Any, name: str = "chunk ids") -> list[str]:
    """One id or several, without repeats, in the order given.

    A bare string is one id (never a sequence of one-character ids); bytes, mappings and
    non-iterables are refused; each id is a non-empty string.
    """
    if isinstance(ids, str):
        return [check_id(ids, name)]
    if isinstance(ids, (bytes, bytearray, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidInputError(f"{name} must be a string or a list of strings, got {type(ids).__name__}")
    out = list(ids)
    for i in out:
        check_id(i, name)
    return list(dict.fromkeys(out))


# What a caller outside the process (the REST API, the MCP server) may send as tags: as many
# and as long as the REST schemas allow.
MAX_TAGS = 100
MAX_TAG_CHARS = 512


def check_str_list(name: str, values: Any, *, max_items: int | None = None,
                   max_chars: int | None = None) -> list[str]:
    """A list (or tuple) of non-empty strings; a bare string is refused (it is not a list of
    tags). ``max_items`` and ``max_chars`` bound the list and each string when given."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise InvalidInputError(f"{name} must be a list of strings")
    if max_items is not None and len(values) > max_items:
        raise InvalidInputError(f"{name} has {len(values)} items; at most {max_items} are allowed")
    item = name[:-1] if name.endswith("s") else name
    out = [check_id(v, item) for v in values]
    if max_chars is not None and any(len(v) > max_chars for v in out):
        raise InvalidInputError(f"a {item} is longer than {max_chars} characters")
    return out


def str_items(name: str, values: Any) -> list[str]:
    """The items of a list-like of strings, as a list, for a record being built: a bare string
    is refused (``list("abc")`` would be three one-letter tags), as are mappings and
    non-iterables; each item is checked by ``check_chunk``."""
    if isinstance(values, (str, bytes, bytearray, Mapping)) or not isinstance(values, Iterable):
        raise InvalidInputError(f"{name} must be a list of strings, got {type(values).__name__}")
    return list(values)


def check_json(name: str, value: Any) -> None:
    """A JSON value (finite numbers, string keys, valid Unicode, not absurdly deep)."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidInputError(f"{name} must be JSON-serialisable: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"{name} is nested too deeply") from None


def check_timestamp(value: Any, name: str = "timestamp") -> datetime:
    """A datetime, an ISO string or epoch seconds, as an aware UTC datetime.

    A time whose UTC form is outside the calendar (``9999-12-31T23:59:59-12:00``) is
    refused; times computed from a stored one (an expiry rule's TTL) saturate instead.
    """
    try:
        return to_datetime(value, name)
    except OverflowError:
        raise InvalidInputError(f"{name} {value!r} is out of range") from None


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None) -> float:
    """A finite real number (not a bool), optionally within [low, high]: the configuration's
    ``Number`` rule, so an argument and a setting are checked and reported alike."""
    return float(Number(low, high).check(name, value, None))


def check_count(name: str, value: Any) -> int:
    """A non-negative integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def check_limit(value: Any, name: str = "limit") -> int | None:
    """``None`` (no limit) or a non-negative integer."""
    return None if value is None else check_count(name, value)


def check_content(value: Any, name: str = "content") -> str:
    """Text worth remembering (or searching for): a string with something besides spaces."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise EmptyContentError(f"{name} is empty: there is nothing to {'find' if name == 'query' else 'remember'}")
    check_encodable(name, value)
    return value


def check_vector(vec: Any, dim: int, name: str = "embedding") -> np.ndarray:
    """A vector of ``dim`` finite numbers with a finite, non-zero norm, returned unit-length.

    The norm is computed in float64: in float32, ``[3e38] * 64`` squares to infinity and
    the "normalised" vector would be all zeros.
    """
    try:
        arr = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidVectorError(f"{name} is not a vector of numbers: {exc}") from None
    if arr.ndim != 1 or arr.shape[0] != dim:
        raise DimensionMismatchError(f"{name} has shape {arr.shape}; this store needs ({dim},)")
    if not np.isfinite(arr).all() or (np.abs(arr) > np.finfo(np.float32).max).any():
        raise InvalidVectorError(f"{name} contains NaN, infinity or values beyond float32")
    norm = float(np.linalg.norm(arr))
    if norm == 0 or not math.isfinite(norm):
        raise InvalidVectorError(f"{name} is all zeros" if norm == 0 else f"{name} has no finite length")
    return (arr / norm).astype(np.float32)


# The ranges of a memory's numbers, whatever wrote it (add, REST, an import, a copy); the
# REST schemas use the same bounds. A weight multiplies a memory's score, so an unbounded one
# (1e308) tops every search; a count beyond 2**53 - 1 is not exact in JSON, so the store's own
# export of it would no longer import.
MAX_WEIGHT = 1e6
MAX_COUNT = 2**53 - 1


def check_chunk(c: Any) -> None:
    """Every field of a :class:`KnowledgeChunk` must be storable and in range (it checks itself
    when built): the one check behind ``add()``, the REST service and imports."""
    check_text("raw_content", c.raw_content)
    check_user(c.user_id)
    check_text("id", c.id)
    for name in ("agent_id", "session_id"):
        check_text(name, getattr(c, name), optional=True)
    if c.summary is not None:
        if not isinstance(c.summary, str):
            raise InvalidInputError("summary must be a string")
        check_json("summary", c.summary)
    check_str_list("tags", c.tags)
    check_str_list("entities", c.entities)
    if not isinstance(c.pinned, bool):
        raise InvalidInputError(f"pinned must be True or False, got {type(c.pinned).__name__}")
    pc = c.processed_content
    if pc is not None:
        if not isinstance(pc.text, str):
            raise InvalidInputError("processed_content.text must be a string")
        check_json("processed_content.text", pc.text)
        if pc.language is not None:
            if not isinstance(pc.language, str):
                raise InvalidInputError("processed_content.language must be a string")
            check_json("processed_content.language", pc.language)
        check_json("processed_content.payload", pc.payload)
    if not isinstance(c.metadata, Mapping):
        raise InvalidInputError("metadata must be a mapping")
    check_json("metadata", c.metadata)
    check_number("weight", c.weight, low=0.0, high=MAX_WEIGHT)
    check_number("confidence", c.confidence, low=0.0, high=1.0)
    for name in ("timestamp", "expires_at", "last_accessed", "reinforced_at", "valid_from", "invalid_at"):
        value = getattr(c, name)
        if value is not None:
            check_timestamp(value, name)
    if check_count("access_count", c.access_count) > MAX_COUNT:
        raise InvalidInputError(f"access_count must be at most {MAX_COUNT}, got {c.access_count!r}")


# The write policy's words for importance and confidence (the design's high / medium / low).
# A "high" confidence clears the design's admission bar of 0.7; "medium" does not.
IMPORTANCE_LEVELS = {"high": 1.0, "medium": 0.6, "low": 0.2}
CONFIDENCE_LEVELS = {"high": 0.9, "medium": 0.6, "low": 0.3}


def _level(value: Any, words: dict[str, float]) -> float | None:
    if isinstance(value, str):
        return words.get(value.strip().lower())
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return min(max(float(value), 0.0), 1.0)
    return None


def importance_of(value: Any) -> float:
    """An importance in [0, 1] from a number or a word (high / medium / low); 0 when unknown."""
    got = _level(value, IMPORTANCE_LEVELS)
    return 0.0 if got is None else got


def confidence_of(value: Any) -> float | None:
    """A confidence in [0, 1] from a number or a word (high / medium / low); None when unknown."""
    return _level(value, CONFIDENCE_LEVELS)
