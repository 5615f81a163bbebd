"""Facts that change: one timeline per user and subject (where they live, where they work),
kept bi-temporally like Graphiti's edges.

A captured statement ("I live in Berlin", "我搬到了上海") is a memory whose
``metadata["fact"]`` names its subject and value and whose ``valid_from`` is when it was
said. :meth:`FactTimeline.reconcile` adds it to the subject's timeline (kv
``lifecycle.timeline``) and settles every member: a statement of a new value supersedes the
statements of the value before it, which get ``invalid_at`` (the new one's ``valid_from``)
and ``metadata["fact"]["superseded_by"]``; their state before that is kept in ``history()``.
The same value said again continues the current state. Two different values stated at the
same time from different sources have equal standing: neither supersedes the other, both go
to the review queue ("fact_conflict") and into one conflict group. A statement that arrives
late (a backfilled event) is placed at its own time, so it may be superseded on arrival.

Settling is a function of the timeline and of which members still exist, so running it
again (a retried ingest batch, a memory deleted meanwhile) converges on the same state.

Search reads the marks (:func:`current_first`): at the time searched (now, or ``as_of``) a
superseded memory is flagged ``SearchHit.superseded`` and ranked after the memory that
superseded it, which is brought into the hits when the query did not find it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk, SearchHit, to_datetime
from ..user_data import Staged, mapping, named_entries, sequence, time_of, user_entries
from .conflicts import GROUP_KEY
from .history import record_version
from .review import flag

if TYPE_CHECKING:
    from ..filters import Filter
    from ..store.base import StoreBackend
    from .base import LifecycleContext

__all__ = ["FACT_KEY", "TIMELINE", "CONFLICT_REASON", "FactTimeline", "stated_fact", "current_first"]

FACT_KEY = "fact"  # metadata: {"key", "value", "redacted", "superseded_by"?}
TIMELINE = "lifecycle.timeline"  # kv: "<user>\x1f<subject>" -> {"entries": [{"id", "value", ...}]}
CONFLICT_REASON = "fact_conflict"
_MAX_CHAIN = 50  # hops followed from a superseded memory to the current one (a cycle cannot loop)
_MAX_SETTLES = 5  # settling again while other writers keep adding to one timeline (see settle)


def stated_fact(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fact a memory states, if its metadata holds one (a caller's own "fact" of another
    shape is not one)."""
    fact = metadata.get(FACT_KEY)
    if isinstance(fact, dict) and isinstance(fact.get("key"), str) and isinstance(fact.get("value"), str):
        return fact
    return None


def _norm(entry: Mapping[str, Any]) -> str:
    if entry.get("redacted"):
        return "\x00" + entry["id"]  # a redacted value cannot be compared: each is its own
    return " ".join(re.sub(r"[^\w\s@+]", " ", entry["value"].casefold()).split())


def _settle(entries: list[dict[str, Any]]
            ) -> tuple[dict[str, tuple[str | None, str | None]], list[tuple[datetime, list[str]]]]:
    """For each entry id, (invalid_at, superseded_by) — (None, None) while current — and the
    sets of ids in conflict (equal standing), each with the time they were stated."""
    want: dict[str, tuple[str | None, str | None]] = {e["id"]: (None, None) for e in entries}
    conflicts: list[tuple[datetime, list[str]]] = []
    prev_ids: list[str] = []
    prev_vals: set[str] = set()
    ordered = sorted(entries, key=lambda e: (to_datetime(e["at"]), e["seq"]))
    for at, group in itertools.groupby(ordered, key=lambda e: to_datetime(e["at"])):
        grp = list(group)
        vals = {_norm(e) for e in grp}
        if len(vals) > 1 and len({e["source"] for e in grp}) > 1:
            conflicts.append((at, [e["id"] for e in grp]))
            new_ids, new_vals = [e["id"] for e in grp], vals
        else:  # one source said it (or one value): in the order said, the last value stands
            last = grp[-1]
            for e in grp:
                if _norm(e) != _norm(last):
                    want[e["id"]] = (at.isoformat(), last["id"])
            new_ids, new_vals = [e["id"] for e in grp if _norm(e) == _norm(last)], {_norm(last)}
        if prev_ids and new_vals == prev_vals:
            prev_ids += new_ids  # said again: the state goes on
            continue
        for cid in prev_ids:
            want[cid] = (at.isoformat(), new_ids[0])
        prev_ids, prev_vals = new_ids, new_vals
    return want, conflicts


def _statements(value: dict[str, Any], where: str) -> list[Any]:
    """The memory ids of a timeline's entries, each checked as far as settling reads it."""
    ids = []
    for i, raw in enumerate(sequence(value.get("entries"), f"{where}.entries")):
        e = mapping(raw, f"{where}.entries[{i}]")
        time_of(e.get("at"), f"{where}.entries[{i}].at")
        if not isinstance(e.get("seq"), int) or isinstance(e.get("seq"), bool):
            raise InvalidInputError(f"{where}.entries[{i}].seq must be an integer")
        ids.append(e.get("id"))
    return ids


def _source(chunk: KnowledgeChunk) -> str:
    md_source = chunk.metadata.get("source")
    return str(md_source) if md_source is not None else chunk.agent_id or chunk.session_id or ""


class FactTimeline:
    """The timelines of captured facts (see the module)."""

    def __init__(self, ctx: LifecycleContext, join_group: Callable[[str, str, list[str], Any], None]) -> None:
        self.ctx = ctx
        self._join_group = join_group

    # -- a user's data (UserData) ------------------------------------------------------------
    keeps = (TIMELINE,)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``timeline``: subject -> ``{"entries": [{"id", "value", "redacted", "at", "source", "seq"}]}``."""
        return {"timeline": user_entries(self.ctx.backend, TIMELINE, user_id)}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        staged = Staged()
        for entry, named in named_entries(data, "timeline", TIMELINE, user_id, _statements):
            staged.kv.append(entry)
            staged.names.update(named)
        return staged

    def reconcile(self, chunks: Iterable[KnowledgeChunk]) -> list[str]:
        """Add the active memories that state a fact to their timelines and settle those;
        return the ids of the memories whose validity changed. Memories already on their
        timeline are not added twice."""
        todo: dict[tuple[str, str], list[KnowledgeChunk]] = {}
        for c in chunks:
            fact = stated_fact(c.metadata)
            if fact is not None and c.status is ChunkStatus.ACTIVE:
                todo.setdefault((c.user_id, fact["key"]), []).append(c)
        changed: list[str] = []
        for (user, key), members in todo.items():
            changed += self.settle(user, key, self._add(user, key, members))
        return changed

    def _add(self, user: str, key: str, members: list[KnowledgeChunk]) -> list[dict[str, Any]]:
        """Add the members to their timeline; return its entries as written."""
        def change(current: dict[str, Any] | None) -> dict[str, Any]:
            entries = list((current or {}).get("entries", []))
            known = {e["id"] for e in entries}
            seq = max((e["seq"] for e in entries), default=0)
            for c in members:
                if c.id in known:
                    continue
                fact = stated_fact(c.metadata) or {}
                seq += 1
                entries.append({"id": c.id, "value": fact["value"], "redacted": bool(fact.get("redacted")),
                                "at": (c.valid_from or c.timestamp).isoformat(), "source": _source(c), "seq": seq})
                known.add(c.id)
            return {"entries": entries}

        return (self.ctx.backend.kv_update(TIMELINE, f"{user}\x1f{key}", change, user_id=user) or {}).get("entries", [])

    def settle(self, user: str, key: str, entries: list[dict[str, Any]] | None = None) -> list[str]:
        """Mark each member of one timeline current or superseded, as its order says.

        Another process or host may add to the timeline while this one writes what it read:
        settling again until the timeline is the one it settled makes the last writes those of
        the newest timeline (a writer that read an older one sees the newer one and settles
        again; one that starts later reads everything written before it). ``entries``: the
        timeline as the caller just wrote it (read from the store when not given)."""
        tkey = f"{user}\x1f{key}"
        changed: list[str] = []
        if entries is None:
            entries = (self.ctx.backend.kv_get(TIMELINE, tkey) or {}).get("entries", [])
        for _ in range(_MAX_SETTLES):
            changed += self._settle_once(user, key, entries)
            # One read per round: the timeline as it is now both tells whether this round settled
            # the newest one and, when it did not, is what the next round settles.
            latest = (self.ctx.backend.kv_get(TIMELINE, tkey) or {}).get("entries", [])
            if latest == entries:
                break
            entries = latest
        return list(dict.fromkeys(changed))

    def _settle_once(self, user: str, key: str, entries: list[dict[str, Any]]) -> list[str]:
        tkey = f"{user}\x1f{key}"
        with self.ctx.changes() as box:
            found = self.ctx.backend.get([e["id"] for e in entries])
            alive = [e for e in entries if e["id"] in found]
            if len(alive) != len(entries):  # deleted memories leave the timeline
                self.ctx.backend.kv_update(TIMELINE, tkey, lambda cur: {"entries": [
                    e for e in (cur or {}).get("entries", []) if e["id"] in found or e not in entries]},
                    user_id=user)
            want, conflicts = _settle(alive)
            now = self.ctx.now()
            new = []
            for cid, (invalid_at, by) in want.items():
                c = found[cid]
                fact = dict(stated_fact(c.metadata) or {})
                at = None if invalid_at is None else to_datetime(invalid_at)
                if c.invalid_at == at and fact.get("superseded_by") == by:
                    continue
                if by is None:
                    fact.pop("superseded_by", None)
                else:
                    fact["superseded_by"] = by
                if c.invalid_at is None and at is not None:
                    record_version(self.ctx.backend, c, "superseded", now)
                new.append(c.copy(invalid_at=at, metadata=dict(c.metadata, **{FACT_KEY: fact}), relationships=[]))
            self.ctx.backend.update(new)
            for c in new:
                box.emit(EventType.UPDATED, c, fields=["invalid_at", "metadata"], reason="superseded")
            for at, ids in conflicts:
                # One group per conflict (its members stand or fall together), flagged once: a
                # reviewer's "keep" is not undone by the next settle.
                group = f"fact:{key}@{at.isoformat()}"
                if all(found[cid].metadata.get(GROUP_KEY) == group for cid in ids):
                    continue
                for cid in ids:
                    flag(self.ctx.backend, found[cid], CONFLICT_REASON, now)
                self._join_group(user, group, ids, box)
        return [c.id for c in new]

    def timeline(self, key: str, *, user_id: str) -> list[KnowledgeChunk]:
        """The memories that stated ``key``, oldest first (the current ones have no ``invalid_at``)."""
        entries = (self.ctx.backend.kv_get(TIMELINE, f"{user_id}\x1f{key}") or {}).get("entries", [])
        found = self.ctx.backend.get([e["id"] for e in entries])
        order = sorted(entries, key=lambda e: (to_datetime(e["at"]), e["seq"]))
        return [found[e["id"]] for e in order if e["id"] in found]

    def current(self, key: str, *, user_id: str) -> KnowledgeChunk | None:
        """The newest memory of ``key`` that nothing superseded, or None."""
        live = [c for c in self.timeline(key, user_id=user_id) if c.invalid_at is None]
        return live[-1] if live else None


def _superseded(chunk: KnowledgeChunk, at: datetime) -> bool:
    return chunk.invalid_at is not None and chunk.invalid_at <= at


def _valid_at(chunk: KnowledgeChunk, at: datetime) -> bool:
    return not _superseded(chunk, at) and (chunk.valid_from or chunk.timestamp) <= at


def current_first(hits: list[SearchHit], at: datetime, backend: StoreBackend, flt: Filter,
                  k: int) -> list[SearchHit]:
    """``hits`` at time ``at``: each superseded one flagged and placed after the memory valid
    at ``at`` that superseded it (brought in from the store, with the superseded hit's score,
    when the query did not find it and the search's filters admit it); at most ``k``."""
    if not any(h.chunk.invalid_at is not None for h in hits):
        return hits
    by_id = {h.id: h for h in hits}
    out: list[SearchHit] = []
    placed: set[str] = set()
    for h in hits:
        if h.id in placed:
            continue  # a successor already placed before the memory it superseded
        if _superseded(h.chunk, at):
            successor = _successor(h.chunk, at, backend)
            if successor is not None and successor.id not in placed:
                if successor.id in by_id:
                    out.append(by_id[successor.id])
                    placed.add(successor.id)
                elif backend.matching([successor.id], flt):
                    out.append(replace(h, chunk=successor, sources={}))
                    placed.add(successor.id)
            h = replace(h, superseded=True)
        out.append(h)
        placed.add(h.id)
    return _keep_scores(hits, out)[:k]


def _successor(chunk: KnowledgeChunk, at: datetime, backend: StoreBackend) -> KnowledgeChunk | None:
    """The memory that superseded ``chunk`` and is valid at ``at`` (following the chain)."""
    seen = {chunk.id}
    c: KnowledgeChunk | None = chunk
    for _ in range(_MAX_CHAIN):
        if c is None:
            return None
        by = (stated_fact(c.metadata) or {}).get("superseded_by")
        if not isinstance(by, str) or by in seen:
            return None
        seen.add(by)
        c = backend.get([by]).get(by)
        if c is not None and c.status is ChunkStatus.ACTIVE and _valid_at(c, at):
            return c
    return None


def _keep_scores(before: Sequence[SearchHit], after: list[SearchHit]) -> list[SearchHit]:
    """Each place keeps the score it had, so the list stays sorted by score."""
    scores = [h.score for h in before]
    scores += [scores[-1]] * (len(after) - len(scores))
    return [h if h.score == s else replace(h, score=s) for h, s in zip(after, scores)]
