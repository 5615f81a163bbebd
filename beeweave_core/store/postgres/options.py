"""A PostgreSQL store's options in one table: each one a constructor argument or a query
parameter of the store's URL (the argument wins), checked before anything is opened.

libpq refuses query parameters it does not know, so BeeWeave's own are taken out of the
URL here; every other parameter goes to libpq as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...config_rules import truth
from ...errors import InvalidInputError

__all__ = ["OPTIONS", "PostgresOptions", "resolve", "split_url"]


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise InvalidInputError(f"{name} must be a non-empty string without NUL characters")
    return value


def _schema(name: str, value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", value):
        raise InvalidInputError(f"{name} must be a plain SQL identifier, got {value!r}")
    return value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return value


def _seconds(name: str, value: Any) -> float:
    try:
        seconds = float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
    except ValueError:
        seconds = None
    if seconds is None or not seconds > 0 or seconds == float("inf"):
        raise InvalidInputError(f"{name} must be a positive number of seconds, got {value!r}")
    return seconds


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if (on := truth(str(value))) is None:
        raise InvalidInputError(f"{name} must be true or false, got {value!r}")
    return on


@dataclass(frozen=True)
class PostgresOptions:
    """What a ``PostgresStore`` is opened with (see its docstring for each option)."""

    tenant: str = "default"
    schema: str = "beeweave"
    pool_size: int = 4
    timeout: float = 30.0
    read_only: bool = False
    listen_url: str | None = None
    ingest_lease: float | None = None


# name -> the check that turns an argument or a URL parameter's text into the option's value
OPTIONS: dict[str, Callable[[str, Any], Any]] = {
    "tenant": _text, "schema": _schema, "pool_size": _positive_int, "timeout": _seconds,
    "read_only": _flag, "listen_url": _text, "ingest_lease": _seconds,
}


# Parameters of modes that are gone (issue 45): every search is answered by the local index.
_REMOVED = ("local_index", "sql_search", "prepare_writes")


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL without BeeWeave's own query parameters (``OPTIONS``), and those."""
    if not isinstance(url, str) or not url:
        raise InvalidInputError("url must be a PostgreSQL URL")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    removed = sorted({k for k, _ in query if k in _REMOVED})
    if removed:
        raise InvalidInputError(f"the URL parameter(s) {removed} are gone: every search is answered by the store's "
                                "local index; remove them")
    ours = {k: v for k, v in query if k in OPTIONS}
    if not ours:
        return url, {}
    rest = [(k, v) for k, v in query if k not in OPTIONS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def resolve(url: str, given: Mapping[str, Any]) -> tuple[str, PostgresOptions]:
    """The URL for libpq and the options: each from ``given`` (arguments; None: not given),
    else from the URL, else its default. Raises ``InvalidInputError`` for an unknown or
    bad option, before anything is opened."""
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(f"unknown PostgreSQL store option(s) {unknown}; known: {sorted(OPTIONS)}")
    plain, from_url = split_url(url)
    chosen = {**from_url, **{k: v for k, v in given.items() if v is not None}}
    values = {name: OPTIONS[name](name, value) for name, value in chosen.items()}
    if "listen_url" in values:
        values["listen_url"] = split_url(values["listen_url"])[0]
    return plain, PostgresOptions(**values)
