"""Listing a store's memories a page at a time: ``BeeWeave.get_all``, which
``GET /api/v1/memories`` and the MCP server's ``list_memories`` call too, so the three page
alike.

The order is stable: oldest first, by (timestamp, id). A page's cursor is the last
(timestamp, id) it returned, not an offset: memories added or deleted between two pages
neither repeat an item nor skip one that was there all along.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from ..errors import InvalidInputError
from ..filters import build_filter
from ..records import ALL_STATUSES, KnowledgeChunk, to_datetime
from ..store.base import StoreBackend
from ..validation import check_user

__all__ = ["Page", "list_page", "MAX_PAGE"]

MAX_PAGE = 1000  # one page is read whole into memory: a bound keeps a request's cost known


class Page(NamedTuple):
    """One page of a listing and the cursor of the next (``None`` at the end)."""

    items: list[KnowledgeChunk]
    next_cursor: str | None


def _cursor(chunk: KnowledgeChunk) -> str:
    raw = json.dumps([chunk.timestamp.isoformat(), chunk.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _uncursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        ts, cid = json.loads(raw)
        if not isinstance(cid, str):
            raise ValueError
        return to_datetime(ts), cid
    except (ValueError, TypeError, InvalidInputError, OverflowError):
        raise InvalidInputError("cursor is not one a listing returned (pass next_cursor as it came)") from None


def _meta_match(chunk: KnowledgeChunk, wanted: Mapping[str, Any]) -> bool:
    """Metadata filter: every key equals (or, for a list value, any of it equals) the wanted value."""
    for key, want in wanted.items():
        have = chunk.metadata.get(key)
        options = want if isinstance(want, list) else [want]
        if isinstance(have, list):
            if not any(o in have for o in options):
                return False
        elif have not in options:
            return False
    return True


def list_page(backend: StoreBackend, *, filters: Mapping[str, Any] | None = None, user_id: str | None = None,
              metadata: Mapping[str, Any] | None = None, limit: int = 50, cursor: str | None = None) -> Page:
    """One page of a store's memories, oldest first (timestamp, then id), and the next page's
    cursor. Every status unless ``filters`` names some; ``metadata`` keeps memories whose
    metadata has those values."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an integer between 1 and {MAX_PAGE}")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidInputError("cursor must be the next_cursor string of the page before")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInputError("metadata must be a mapping of metadata keys to the values wanted")
    f = dict(filters or {})
    f.setdefault("status", ALL_STATUSES)
    after: tuple[datetime, str] | None = None
    if cursor:
        after = _uncursor(cursor)
        since = f.get("since")
        if since is None or to_datetime(since) < after[0]:
            f["since"] = after[0].isoformat()
    flt = build_filter(f, user_id=None if user_id is None else check_user(user_id))
    wanted = dict(metadata or {})
    found: list[KnowledgeChunk] = []
    for c in backend.scan(flt, order="timestamp"):
        if after is not None and (c.timestamp, c.id) <= after:
            continue
        if wanted and not _meta_match(c, wanted):
            continue
        # Timestamps tie: keep reading past the page until the timestamp moves on.
        if len(found) > limit and c.timestamp > found[limit - 1].timestamp:
            break
        found.append(c)
    found.sort(key=lambda c: (c.timestamp, c.id))
    page = found[:limit]
    return Page(page, _cursor(page[-1]) if len(found) > limit else None)
