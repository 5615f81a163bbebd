"""Conversational context: each memory's neighbours in its session.

Agent and chat turns are elliptical ("how did it go?"): what a turn is about often
sits in the turns around it. Each memory therefore gets the memories within
``radius`` positions of it in the same (user, session), ordered by timestamp and
then by insertion. The lexical index folds the neighbours' terms in at a lower
weight and the vector score mixes in the neighbours' vectors (see ``IndexConfig``).
Memories without a session have no neighbours and are scored on their own text.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from typing import Any

from .errors import InvalidInputError

__all__ = ["IndexConfig", "SessionOrder"]


@dataclass(frozen=True)
class IndexConfig:
    """How the indexes score; saved with the store so reopening reproduces results.

    Attributes:
        k1, b, epsilon: Okapi BM25 constants (rank_bm25's idf floor ``epsilon``). A low
            ``b`` keeps long, fact-dense memories from being penalised for their length.
        context_radius: how many memories before and after, in the same session, count
            as a memory's context (0 turns context off).
        lexical_context_weight: weight of a neighbour's terms in a memory's term counts.
        vector_context_weight: weight of a neighbour's vector in a memory's vector score.
    """

    k1: float = 1.2
    b: float = 0.3
    epsilon: float = 0.25
    context_radius: int = 2
    lexical_context_weight: float = 0.3
    vector_context_weight: float = 0.3

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1 or self.context_radius < 0:
            raise InvalidInputError(f"invalid index configuration {self}")
        if self.lexical_context_weight < 0 or self.vector_context_weight < 0:
            raise InvalidInputError("context weights must be non-negative")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IndexConfig:
        try:
            return cls(**data)
        except TypeError as exc:
            raise InvalidInputError(f"not an index configuration: {data!r}") from exc


class SessionOrder:
    """Per-session ordered slots; reports whose neighbourhoods an insert or delete changed."""

    def __init__(self, radius: int) -> None:
        self.radius = radius
        self._order: dict[tuple[str, str], list[tuple[float, int, int]]] = {}  # key -> [(ts, seq, slot)]
        self._key_of: dict[int, tuple[tuple[str, str], tuple[float, int, int]]] = {}

    def add(self, slot: int, key: tuple[str, str] | None, ts: float, seq: int) -> list[int]:
        """Place a slot; return the slots whose neighbour lists must be recomputed."""
        if key is None or self.radius == 0:
            return []
        entry = (ts, seq, slot)
        lst = self._order.setdefault(key, [])
        pos = bisect.bisect(lst, entry)
        lst.insert(pos, entry)
        self._key_of[slot] = (key, entry)
        return [e[2] for e in lst[max(0, pos - self.radius) : pos + self.radius + 1]]

    def add_bulk(self, items: list[tuple[int, tuple[str, str] | None, float, int]]) -> None:
        if self.radius == 0:
            return
        for slot, key, ts, seq in items:
            if key is not None:
                entry = (ts, seq, slot)
                self._order.setdefault(key, []).append(entry)
                self._key_of[slot] = (key, entry)
        for lst in self._order.values():
            lst.sort()

    def remove(self, slot: int) -> list[int]:
        found = self._key_of.pop(slot, None)
        if found is None:
            return []
        key, entry = found
        lst = self._order[key]
        pos = bisect.bisect_left(lst, entry)
        del lst[pos]
        if not lst:
            del self._order[key]
            return []
        return [e[2] for e in lst[max(0, pos - self.radius) : pos + self.radius]]

    def neighbours(self, slot: int) -> list[int]:
        found = self._key_of.get(slot)
        if found is None:
            return []
        key, entry = found
        lst = self._order[key]
        pos = bisect.bisect_left(lst, entry)
        r = self.radius
        return [e[2] for e in lst[max(0, pos - r) : pos + r + 1] if e[2] != slot]

    def all_slots(self) -> list[int]:
        return list(self._key_of)

    def session_slots(self, key: tuple[str, str]) -> list[int]:
        return [e[2] for e in self._order.get(key, [])]
