"""Per-slot attribute columns that turn a Filter into a boolean mask in a few
vectorised numpy operations, so filters run inside retrieval at any store size."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..filters import Filter

__all__ = ["AttributeColumns", "Selection"]

_FIELDS = ("user", "agent", "session", "status", "ctype", "intent", "tier")


class _Codes:
    """Interns strings to small ints; code 0 means None."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.next = 1  # codes are never reused, even once a value is no longer in use

    def get(self, value: str | None) -> int:
        if value is None:
            return 0
        c = self.code.get(value)
        if c is None:
            c = self.code[value] = self.next
            self.next += 1
        return c

    def lookup(self, values: frozenset[str]) -> list[int]:
        return [self.code[v] for v in values if v in self.code]


class _SetIndex:
    """value -> slots holding it (tags, entities)."""

    def __init__(self) -> None:
        self.slots: dict[str, set[int]] = {}
        self.values: dict[int, tuple[str, ...]] = {}

    def set(self, slot: int, values: Sequence[str]) -> None:
        for v in self.values.pop(slot, ()):
            s = self.slots.get(v)
            if s is not None:
                s.discard(slot)
                if not s:
                    del self.slots[v]
        vals = tuple(dict.fromkeys(values))
        if vals:
            self.values[slot] = vals
            for v in vals:
                self.slots.setdefault(v, set()).add(slot)

    def any_mask(self, values: Sequence[str] | frozenset[str], n: int) -> np.ndarray:
        m = np.zeros(n, bool)
        for v in values:
            slots = self.slots.get(v)
            if slots:
                m[np.fromiter(slots, np.int64, len(slots))] = True
        return m


class _SlotsByCode:
    """code -> the slots given that code, for answering a one-user filter without a pass over
    every slot. Slots are only ever added (a slot that moved or died stays listed), so callers
    re-check the column; the lists are arrays from bulk loads plus lists of later additions."""

    def __init__(self) -> None:
        self.bulk: dict[int, np.ndarray] = {}
        self.extra: dict[int, list[int]] = {}

    def add(self, code: int, slot: int) -> None:
        self.extra.setdefault(code, []).append(slot)

    def add_bulk(self, codes: np.ndarray, slots: np.ndarray) -> None:
        if len(codes) == 0:  # an empty store's snapshot: nothing to add (codes[0] would not exist)
            return
        order = np.argsort(codes, kind="stable")
        codes, slots = codes[order], slots[order].astype(np.int64)
        bounds = np.flatnonzero(np.diff(codes)) + 1
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(codes)]):
            code = int(codes[a])
            old = self.bulk.get(code)
            self.bulk[code] = slots[a:b] if old is None else np.concatenate([old, slots[a:b]])

    def count(self, code: int) -> int:
        return len(self.bulk.get(code, ())) + len(self.extra.get(code, ()))

    def get(self, code: int) -> np.ndarray:
        extra = self.extra.get(code)
        bulk = self.bulk.get(code, np.zeros(0, np.int64))
        return bulk if not extra else np.concatenate([bulk, np.asarray(extra, np.int64)])


class Selection:
    """The slots a filter allows: for a narrow filter (one user of many) its sorted live
    slots, with the boolean mask over every slot built only if something asks for it (at 1M
    slots each mask costs passes over a megabyte); for a broad filter, the mask."""

    __slots__ = ("slots", "_mask", "_n", "_scope")

    def __init__(self, slots: np.ndarray | None, mask: np.ndarray | None, n: int) -> None:
        self.slots, self._mask, self._n = slots, mask, n
        self._scope: tuple[np.ndarray | None] | None = None
        if mask is not None:
            mask.flags.writeable = False  # shared by every search with this filter

    def mask(self) -> np.ndarray:
        if self._mask is None:
            m = np.zeros(self._n, bool)
            m[self.slots] = True
            m.flags.writeable = False
            self._mask = m
        return self._mask

    def scope(self, build: Callable[[], np.ndarray | None]) -> np.ndarray | None:
        """The filter's scope pre-filter (see BM25Index.score), built once by ``build``."""
        if self._scope is None:
            self._scope = (build(),)
        return self._scope[0]

    def allows(self, slots: np.ndarray) -> np.ndarray:
        """Which of ``slots`` (any order, any values) the filter allows."""
        slots = np.asarray(slots, np.int64)
        if self._mask is None:
            few = self.slots
            assert few is not None  # a selection has its slots, its mask, or both
            i = np.minimum(np.searchsorted(few, slots), max(len(few) - 1, 0))
            return few[i] == slots if len(few) else np.zeros(len(slots), bool)
        inside = (slots >= 0) & (slots < self._n)
        inside[inside] = self._mask[slots[inside]]
        return inside


class AttributeColumns:
    def __init__(self) -> None:
        self._cap = 0
        self.version = 0  # bumped by every change, so a mask computed before it is not reused
        self.codes = {f: _Codes() for f in _FIELDS}
        self.arrays: dict[str, np.ndarray] = {f: np.zeros(0, np.int32) for f in _FIELDS}
        self.ts = np.zeros(0, np.float64)
        self.tags = _SetIndex()
        self.entities = _SetIndex()
        self.user_slots = _SlotsByCode()

    def _grow(self, slot: int) -> None:
        if slot >= self._cap:
            cap = max(slot + 1, 2 * self._cap, 64)
            for f in _FIELDS:
                a = np.zeros(cap, np.int32)
                a[: self._cap] = self.arrays[f]
                self.arrays[f] = a
            ts = np.zeros(cap, np.float64)
            ts[: self._cap] = self.ts
            self.ts = ts
            self._cap = cap

    def set(self, slot: int, user: str, agent: str | None, session: str | None, ts: float, status: str,
            ctype: str, intent: str | None, tags: Sequence[str], entities: Sequence[str] = (),
            tier: str = "long") -> None:
        codes = [self.codes[f].get(v) for f, v in zip(_FIELDS, (user, agent, session, status, ctype, intent, tier))]
        if (slot < self._cap and all(int(self.arrays[f][slot]) == c for f, c in zip(_FIELDS, codes))
                and self.ts[slot] == ts and self.tags.values.get(slot, ()) == tuple(dict.fromkeys(tags))
                and self.entities.values.get(slot, ()) == tuple(dict.fromkeys(entities))):
            return  # nothing filterable changed (e.g. access counts): masks computed before stay valid
        self.version += 1
        self._grow(slot)
        before = int(self.arrays["user"][slot])
        for f, c in zip(_FIELDS, codes):
            self.arrays[f][slot] = c
        if self.arrays["user"][slot] != before:
            self.user_slots.add(int(self.arrays["user"][slot]), slot)
        self.ts[slot] = ts
        self.tags.set(slot, tags)
        self.entities.set(slot, entities)

    def set_bulk(self, slots: np.ndarray, users: Sequence[str], agents: Sequence[str | None],
                 sessions: Sequence[str | None], ts: np.ndarray, statuses: Sequence[str], ctypes: Sequence[str],
                 intents: Sequence[str | None], tags_json: Sequence[str], entities_json: Sequence[str],
                 tiers: Sequence[str] | None = None) -> None:
        """Fill many slots from column lists (tags/entities as stored JSON text)."""
        self.version += 1
        if not len(slots):
            return
        self._grow(int(slots.max()))
        if tiers is None:
            tiers = ["long"] * len(slots)
        for f, values in zip(_FIELDS, (users, agents, sessions, statuses, ctypes, intents, tiers)):
            get = self.codes[f].get
            self.arrays[f][slots] = np.fromiter((get(v) for v in values), np.int32, len(slots))
        self.user_slots.add_bulk(self.arrays["user"][slots], slots)
        self.ts[slots] = ts
        for index, texts in ((self.tags, tags_json), (self.entities, entities_json)):
            for slot, text in zip(slots.tolist(), texts):
                if text != "[]":
                    index.set(slot, json.loads(text))

    def state(self, n: int) -> tuple[dict[str, np.ndarray], dict]:
        """Arrays and JSON-able parts that rebuild these columns. Only codes still in use by
        one of the first ``n`` slots are kept, so a forgotten user's name is not written."""
        arrays = {f"col_{f}": self.arrays[f][:n] for f in _FIELDS}
        arrays["col_ts"] = self.ts[:n]
        codes = {}
        for f in _FIELDS:
            used = set(np.unique(self.arrays[f][:n]).tolist())
            codes[f] = {v: c for v, c in self.codes[f].code.items() if c in used}
        extra = {"codes": codes, "next_code": {f: self.codes[f].next for f in _FIELDS},
                 "tags": [[s, list(v)] for s, v in self.tags.values.items()],
                 "entities": [[s, list(v)] for s, v in self.entities.values.items()]}
        return arrays, extra

    def restore(self, arrays: dict[str, np.ndarray], extra: dict) -> None:
        self.version += 1
        n = len(arrays["col_ts"])
        self._grow(max(n - 1, 0))
        for f in _FIELDS:
            self.arrays[f][:n] = arrays[f"col_{f}"]
            self.codes[f].code = dict(extra["codes"][f])
            self.codes[f].next = extra["next_code"][f]
        self.ts[:n] = arrays["col_ts"]
        users = self.arrays["user"][:n]
        placed = np.flatnonzero(users)
        self.user_slots.add_bulk(users[placed], placed)
        for index, name in ((self.tags, "tags"), (self.entities, "entities")):
            for slot, values in extra[name]:
                index.set(int(slot), values)

    def clear(self, slot: int) -> None:
        self.version += 1
        for f in _FIELDS:
            self.arrays[f][slot] = 0
        self.tags.set(slot, ())
        self.entities.set(slot, ())

    @staticmethod
    def _in(col: np.ndarray, codes: list[int]) -> np.ndarray:
        if not codes:
            return np.zeros(len(col), bool)
        if len(codes) == 1:
            return col == codes[0]
        return np.isin(col, codes)

    def _user_candidates(self, flt: Filter, n: int) -> np.ndarray | None:
        """The live-or-not slots of the filter's users, sorted, when they are few enough that
        checking the other conditions on them alone beats passes over all ``n`` slots."""
        if flt.user_ids is None:
            return None
        codes = self.codes["user"].lookup(flt.user_ids)
        if sum(self.user_slots.count(c) for c in codes) * 8 > n:
            return None
        if not codes:
            return np.zeros(0, np.int64)
        cand = np.concatenate([self.user_slots.get(c) for c in codes])
        cand = cand[cand < n]
        col = self.arrays["user"][cand]
        cand = cand[col == codes[0] if len(codes) == 1 else np.isin(col, codes)]
        if len(codes) == 1 and np.all(cand[1:] > cand[:-1]):
            return cand  # one user's list, not re-listed since (the usual case): sorted already
        return np.unique(cand)

    def _conditions(self, flt: Filter, keep: np.ndarray, take: Callable[[np.ndarray], np.ndarray], n: int,
                    slot_of: Mapping[str, int], *, scope_only: bool) -> np.ndarray:
        """AND every condition of ``flt`` into ``keep``, a boolean array over the slots that ``take``
        picks out of a full column (the first ``n``, or a few candidates)."""
        fields = (("user", flt.user_ids), ("session", flt.session_ids)) if scope_only else (
            ("user", flt.user_ids), ("agent", flt.agent_ids), ("session", flt.session_ids),
            ("status", flt.statuses), ("ctype", flt.types), ("intent", flt.intents), ("tier", flt.tiers))
        for field, values in fields:
            if values is not None:
                keep &= self._in(take(self.arrays[field]), self.codes[field].lookup(values))
        if scope_only:
            return keep
        if flt.tags_any is not None:
            keep &= take(self.tags.any_mask(flt.tags_any, n))
        for t in flt.tags_all or ():
            keep &= take(self.tags.any_mask((t,), n))
        if flt.entities is not None:
            keep &= take(self.entities.any_mask(flt.entities, n))
        if flt.since is not None:
            keep &= take(self.ts) >= flt.since.timestamp()
        if flt.until is not None:
            keep &= take(self.ts) <= flt.until.timestamp()
        if flt.ids is not None:
            id_m = np.zeros(n, bool)
            id_m[[slot_of[i] for i in flt.ids if i in slot_of]] = True
            keep &= take(id_m)
        return keep

    def slots(self, flt: Filter, alive: np.ndarray, slot_of: Mapping[str, int], *,
              scope_only: bool = False) -> np.ndarray | None:
        """The sorted live slots the filter allows when it is narrow (a few users of many),
        found from those users' slots alone; None for a broad filter (use ``mask``)."""
        n = len(alive)
        cand = self._user_candidates(flt, n)
        if cand is None:
            return None
        keep = self._conditions(flt, alive[cand], lambda a: a[cand], n, slot_of, scope_only=scope_only)
        return cand[keep]

    def _select(self, flt: Filter, alive: np.ndarray, slot_of: Mapping[str, int], *, scope_only: bool) -> np.ndarray:
        n = len(alive)
        few = self.slots(flt, alive, slot_of, scope_only=scope_only)
        if few is None:  # a pass over every slot per condition
            return self._conditions(flt, alive.copy(), lambda a: a[:n], n, slot_of, scope_only=scope_only)
        m = np.zeros(n, bool)
        m[few] = True
        return m

    def mask(self, flt: Filter, alive: np.ndarray, slot_of: Mapping[str, int]) -> np.ndarray:
        return self._select(flt, alive, slot_of, scope_only=False)

    def scope_mask(self, flt: Filter, alive: np.ndarray) -> np.ndarray | None:
        """The user/session part of a filter: closed under session neighbourhood."""
        if flt.user_ids is None and flt.session_ids is None:
            return None
        return self._select(flt, alive, {}, scope_only=True)

    def status_counts(self, alive: np.ndarray) -> dict[str, int]:
        col = self.arrays["status"][: len(alive)][alive]
        names = {c: s for s, c in self.codes["status"].code.items()}
        vals, counts = np.unique(col, return_counts=True)
        return {names[int(v)]: int(c) for v, c in zip(vals, counts) if int(v) in names}
