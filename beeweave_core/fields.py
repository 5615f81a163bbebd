"""Declared metadata fields: ``metadata`` keys a store agrees to filter on.

The declaration lives in the backend's meta area (one JSON value), so a reopened store and
every other process on the same store know the same fields; each backend may index the field
when it is declared (PostgreSQL builds an expression index, SQLite one on ``json_extract``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .errors import InvalidInputError

__all__ = ["FIELD_TYPES", "FIELD_NAME", "FILTER_KEYS", "declare_fields", "declared_fields"]

# The built-in filter keys (search filters, :mod:`.filters`): here, where a declared field
# must not take one of their names, so that filters imports fields and not both ways.
FILTER_KEYS = ("user_id", "agent_id", "session_id", "tags", "tags_any", "tags_all", "entities", "since",
               "until", "type", "intent", "status", "ids", "tier")

FIELD_TYPES = ("str", "int", "float", "bool")
# Field names reach SQL (index names and index expressions must be literals), so only plain
# identifiers are accepted; the length keeps PostgreSQL's index names under 63 bytes.
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")
META_KEY = "declared_fields"


def declared_fields(backend: Any) -> dict[str, str]:
    """The store's declared fields, ``{name: type}`` (empty when none were declared)."""
    raw = backend.get_meta(META_KEY)
    return dict(json.loads(raw)) if raw else {}


def declare_fields(backend: Any, fields: Mapping[str, str]) -> dict[str, str]:
    """Add ``fields`` to the store's declared fields and index them; returns all of them.

    Declaring a field again with the same type does nothing; another type is an error
    (earlier filters and indexes assume the first)."""
    if not isinstance(fields, Mapping) or not fields:
        raise InvalidInputError("declare_fields takes a non-empty mapping of field name to type")
    known = declared_fields(backend)
    for name, kind in fields.items():
        if not isinstance(name, str) or not FIELD_NAME.match(name):
            raise InvalidInputError(f"field name {name!r} must be an identifier (letters, digits, _; at most 40)")
        if name in FILTER_KEYS:
            raise InvalidInputError(f"field name {name!r} is a built-in filter key")
        if kind not in FIELD_TYPES:
            raise InvalidInputError(f"field {name!r}: type {kind!r} is not one of {', '.join(FIELD_TYPES)}")
        if known.get(name, kind) != kind:
            raise InvalidInputError(f"field {name!r} is declared as {known[name]!r}, not {kind!r}")
    new = {n: k for n, k in fields.items() if n not in known}
    for name in new:
        backend.index_field(name)
    if new:
        known = {**declared_fields(backend), **new}  # re-read: another process may have declared some
        backend.set_meta(META_KEY, json.dumps(known, sort_keys=True))
    return known


def field_values(name: str, kind: str, value: Any) -> tuple[Any, ...]:
    """A filter's value(s) for a declared field, checked against its type (a list = any of)."""
    values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    if not values:
        raise InvalidInputError(f"filter {name!r} is empty: it would match nothing")
    out = []
    for v in values:
        ok = {"str": isinstance(v, str),
              "int": isinstance(v, int) and not isinstance(v, bool),
              "float": isinstance(v, (int, float)) and not isinstance(v, bool),
              "bool": isinstance(v, bool)}[kind]
        if not ok:
            raise InvalidInputError(f"filter {name!r} is declared {kind}, got {type(v).__name__}")
        out.append(float(v) if kind == "float" else v)
    return tuple(sorted(set(out), key=repr))

