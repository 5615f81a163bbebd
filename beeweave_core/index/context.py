"""Conversational context: each memory's neighbours in its session.

Agent and chat turns are elliptical ("how did it go?"): what a turn is about often
sits in the turns around it. Each memory therefore gets the memories within
``radius`` positions of it in the same (user, session), ordered by timestamp and
then by insertion. The lexical index folds the neighbours' terms in at a lower
weight and the vector score mixes in the neighbours' vectors (see ``IndexConfig`` in ``index/config.py``).
Memories without a session have no neighbours and are scored on their own text, and by
default so are memories that are not conversation turns (``turns.py``): unrelated facts
that share a session must not fold into each other.
"""

from __future__ import annotations

import bisect

import numpy as np

from .config import IndexConfig  # its home was here: old imports keep working

__all__ = ["IndexConfig", "SessionOrder", "canonical_rows"]


def canonical_rows(nb: np.ndarray) -> np.ndarray:
    """Neighbour rows in one canonical order (ascending slots, -1 last), so sums over
    neighbours add up in the same order whether built one by one or in bulk: reopening
    a store must reproduce its scores bit for bit."""
    big = np.iinfo(nb.dtype).max
    out = np.sort(np.where(nb < 0, big, nb), axis=1)
    return np.where(out == big, -1, out).astype(nb.dtype)


class SessionOrder:
    """Per-session ordered slots; reports whose neighbourhoods an insert or delete changed.

    A session is keyed by (user code, session code) — small ints interned by the
    store — and holds its slots sorted by (timestamp, insertion seq). Per-slot data
    lives in numpy arrays so a million memories cost a few bytes each.
    """

    def __init__(self, radius: int) -> None:
        self.radius = radius
        self._lists: dict[tuple[int, int], list[int]] = {}
        # Sessions restored from a snapshot stay packed in one array until first touched:
        # unpacking tens of thousands of lists would cost most of a large store's open.
        self._packed: dict[tuple[int, int], tuple[int, int]] = {}
        self._packed_slots = np.zeros(0, np.int64)
        self._ts = np.zeros(0, np.float64)
        self._seq = np.zeros(0, np.int64)
        self._key = np.zeros((0, 2), np.int64)  # (user, session) codes; session 0 = none

    def _grow(self, slot: int) -> None:
        if slot >= len(self._ts):
            cap = max(slot + 1, 2 * len(self._ts), 64)
            extra = cap - len(self._ts)
            self._ts = np.concatenate([self._ts, np.zeros(extra)])
            self._seq = np.concatenate([self._seq, np.zeros(extra, np.int64)])
            self._key = np.concatenate([self._key, np.zeros((extra, 2), np.int64)])

    def _sort_key(self, slot: int) -> tuple[float, int]:
        return (float(self._ts[slot]), int(self._seq[slot]))

    def add(self, slot: int, key: tuple[int, int] | None, ts: float, seq: int) -> list[int]:
        """Place a slot; return the slots whose neighbour lists must be recomputed."""
        if key is None or self.radius == 0:
            return []
        self._grow(slot)
        self._ts[slot], self._seq[slot], self._key[slot] = ts, seq, key
        lst = self._session(key, create=True)
        assert lst is not None  # create=True always gives a list
        pos = bisect.bisect(lst, (ts, seq), key=self._sort_key)
        lst.insert(pos, slot)
        return lst[max(0, pos - self.radius) : pos + self.radius + 1]

    def _position(self, slot: int) -> tuple[list[int], int] | None:
        if slot >= len(self._ts) or self._key[slot, 1] == 0:
            return None
        lst = self._session((int(self._key[slot, 0]), int(self._key[slot, 1])))
        if not lst:
            return None
        pos = bisect.bisect_left(lst, self._sort_key(slot), key=self._sort_key)
        while pos < len(lst) and lst[pos] != slot:  # equal keys cannot happen (seq is unique)
            pos += 1
        return (lst, pos) if pos < len(lst) else None

    def remove(self, slot: int) -> list[int]:
        found = self._position(slot)
        if found is None:
            return []
        lst, pos = found
        del lst[pos]
        key = (int(self._key[slot, 0]), int(self._key[slot, 1]))
        self._key[slot] = 0
        if not lst:
            del self._lists[key]
            return []
        return lst[max(0, pos - self.radius) : pos + self.radius]

    def placed(self, slot: int) -> bool:
        """Whether the slot is in a session's order (it has a session and takes context)."""
        return self._position(slot) is not None

    def neighbours(self, slot: int) -> list[int]:
        found = self._position(slot)
        if found is None:
            return []
        lst, pos = found
        r = self.radius
        return [s for s in lst[max(0, pos - r) : pos + r + 1] if s != slot]

    def _session(self, key: tuple[int, int], create: bool = False) -> list[int] | None:
        lst = self._lists.get(key)
        if lst is None:
            span = self._packed.pop(key, None)
            if span is not None:
                lst = self._lists[key] = self._packed_slots[span[0] : span[1]].tolist()
            elif create:
                lst = self._lists[key] = []
        return lst

    def state(self) -> dict[str, np.ndarray]:
        keys = list(self._lists) + list(self._packed)
        parts = [np.asarray(self._lists[k], np.int64) for k in self._lists] + \
                [self._packed_slots[a:b] for a, b in self._packed.values()]
        return {"ts": self._ts, "seq": self._seq, "key": self._key,
                "list_keys": np.array(keys, np.int64).reshape(-1, 2),
                "list_ptr": np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64),
                "list_slots": np.concatenate(parts) if parts else np.zeros(0, np.int64)}

    def restore(self, st: dict[str, np.ndarray]) -> None:
        self._ts, self._seq, self._key = st["ts"], st["seq"], st["key"]
        ptr = st["list_ptr"].tolist()
        self._lists = {}
        self._packed_slots = st["list_slots"]
        self._packed = {(u, s): (a, b) for (u, s), a, b in zip(st["list_keys"].tolist(), ptr[:-1], ptr[1:])}

    def add_bulk(self, slots: np.ndarray, users: np.ndarray, sessions: np.ndarray, ts: np.ndarray,
                 seqs: np.ndarray) -> np.ndarray:
        """Place many slots at once; return their neighbour matrix (len(slots) x 2r, -1 = none)."""
        width = 2 * self.radius
        out = np.full((len(slots), width), -1, np.int32)
        if self.radius == 0 or not len(slots):
            return out
        self._grow(int(slots.max()))
        self._ts[slots], self._seq[slots] = ts, seqs
        self._key[slots, 0], self._key[slots, 1] = users, sessions
        has = sessions != 0
        idx = np.flatnonzero(has)
        order = idx[np.lexsort((seqs[idx], ts[idx], sessions[idx], users[idx]))]
        u, sess = users[order], sessions[order]
        # Neighbours are the sorted entries within +-r that belong to the same session.
        col = 0
        for d in [*range(-self.radius, 0), *range(1, self.radius + 1)]:
            j = np.arange(len(order)) + d
            ok = (j >= 0) & (j < len(order))
            jj = np.where(ok, j, 0)
            ok &= (u[jj] == u) & (sess[jj] == sess)
            out[order[ok], col] = slots[order[jj[ok]]]
            col += 1
        out = canonical_rows(out)
        bounds = np.flatnonzero((np.diff(u) != 0) | (np.diff(sess) != 0)) + 1
        for part in np.split(slots[order], bounds):
            if len(part):
                s0 = int(part[0])
                self._lists[(int(self._key[s0, 0]), int(self._key[s0, 1]))] = part.tolist()
        return out
