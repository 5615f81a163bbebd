"""Per-slot copies of what ranking reads of a memory (``scoring.RankFields``), so that a search
ranks its ~20 fused candidates without decoding their records and then reads only the k it
returns (each record costs a row read, a JSON decode and a chunk build).

A slot's fields are filled from the chunk whenever the store writes one, and read from the
record the first time a search asks for a slot nobody filled (after the indexes were rebuilt
from the rows, which do not carry them as columns). Times are kept as integer microseconds
since the epoch: exact for any datetime, where float seconds lose microseconds after 2106."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

from ..records import KnowledgeChunk
from ..scoring import RankFields

__all__ = ["RankColumns"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_NONE = np.iinfo(np.int64).min  # no datetime (reinforced_at, expires_at unset)
_KNOWN, _PINNED, _STALE = 1, 2, 4


def _us(value: datetime | None) -> int:
    return _NONE if value is None else (value - _EPOCH) // _US


def _dt(us: int) -> datetime | None:
    return None if us == _NONE else _EPOCH + timedelta(microseconds=us)


class RankColumns:
    _FLOATS = ("weight", "confidence")
    _TIMES = ("timestamp", "reinforced_at", "expires_at")

    def __init__(self) -> None:
        self._cap = 0
        self.arrays: dict[str, np.ndarray] = {
            **{f: np.zeros(0, np.float64) for f in self._FLOATS},
            **{f: np.zeros(0, np.int64) for f in self._TIMES},
            "flags": np.zeros(0, np.uint8),
        }

    def _grow(self, slot: int) -> None:
        if slot < self._cap:
            return
        cap = max(slot + 1, 2 * self._cap, 64)
        for name, a in self.arrays.items():
            grown = np.zeros(cap, a.dtype)
            grown[: self._cap] = a[: self._cap]
            self.arrays[name] = grown
        self._cap = cap

    def unknown(self, slots: list[int]) -> list[int]:
        """The positions in ``slots`` of slots never filled (or cleared)."""
        idx = np.asarray(slots, np.int64)
        filled = np.zeros(len(idx), bool)
        inside = idx < self._cap
        filled[inside] = (self.arrays["flags"][idx[inside]] & _KNOWN).astype(bool)
        return np.flatnonzero(~filled).tolist()

    def set(self, slot: int, chunk: KnowledgeChunk) -> None:
        self.set_fields(slot, RankFields.of(chunk))

    def set_fields(self, slot: int, f: RankFields) -> None:
        self._grow(slot)
        a = self.arrays
        a["weight"][slot], a["confidence"][slot] = f.weight, f.confidence
        for name in self._TIMES:
            a[name][slot] = _us(getattr(f, name))
        a["flags"][slot] = _KNOWN | (_PINNED if f.pinned else 0) | (_STALE if f.stale else 0)

    def clear(self, slot: int) -> None:
        if slot < self._cap:
            self.arrays["flags"][slot] = 0

    def fields(self, slots: list[int]) -> list[RankFields]:
        """The fields of filled slots (see ``unknown``), in one gather per column."""
        idx = np.asarray(slots, np.int64)
        a = self.arrays
        flags = a["flags"][idx]
        assert bool(np.all(flags & _KNOWN)), "fill unknown() slots first"
        cols = zip(a["timestamp"][idx].tolist(), a["weight"][idx].tolist(), a["confidence"][idx].tolist(),
                   flags.tolist(), a["reinforced_at"][idx].tolist(), a["expires_at"][idx].tolist())
        return [RankFields(_EPOCH + timedelta(microseconds=ts), w, c, bool(f & _PINNED), bool(f & _STALE),
                           _dt(r), _dt(e)) for ts, w, c, f, r, e in cols]

    # -- snapshot ----------------------------------------------------------------------
    def state(self, n: int) -> dict[str, np.ndarray]:
        out = {}
        for name, a in self.arrays.items():
            part = np.zeros(n, a.dtype)  # slots past the filled ones: unknown
            m = min(n, self._cap)
            part[:m] = a[:m]
            out[name] = part
        return out

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        n = len(arrays["flags"])
        self._grow(max(n - 1, 0))
        for name in self.arrays:
            self.arrays[name][:n] = arrays[name]
