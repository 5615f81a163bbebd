"""A user's export: everything stored about one user, from the parts that keep it, and the way
back (``beeweave export`` / ``import`` / ``copy``, ``GET``/``POST /api/v1/users/{id}/export|import``).

An export is one JSON object: ``format``, ``user_id``, ``exported_at``, ``chunks`` (memories of
every status with their ids, times, counters, tier and relationships), then each part's
sections (:mod:`beeweave_core.user_data`): versions and audit log, facts, conflict groups and
fact timelines, the review queue, session buffers, watches, relation notes, question
patterns, rejected ids, recorded searches and "used" marks, and the events still in the ingest
queue and the dead letters (``queued_events``, ``dead_letters``: an import queues the pending
ones again, processed once, and keeps dead letters dead). ``hot_patterns`` is a view of
the patterns (an import ignores it). Exports made before a part had sections import without
them.

What an export holds comes back as it was: nothing is derived again (no redaction or
admission, no linking, merging or lifecycle rule, no ``memory.created`` event). Vectors come
with the data (``copy`` passes the source's) or are embedded by the destination's model.

Everything is checked before anything is written: bad data writes nothing. An import cut off
part-way (a store that went away) can be run again: a memory already there with the same user
and text is skipped, and entries already there are not written twice. A memory id that the
store holds with another user or text is refused before any write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import DuplicateIdError, InvalidInputError
from .filters import build_filter
from .records import ALL_STATUSES, KnowledgeChunk, Relationship
from .store.base import StoreBackend, records_in_order
from .user_data import Staged, UserData, chunk_of, mapping, section, sequence, write_kv
from .validation import check_number, check_user

__all__ = ["UserExport", "ExportPlan", "Memories", "ImportReport", "read_memories", "export_is_empty",
           "EXPORT_FORMAT"]

EXPORT_FORMAT = "beeweave.export/1"
ENVELOPE = ("format", "user_id", "exported_at")


@dataclass
class ImportReport:
    """What an import wrote (and skipped because it was already there)."""

    user_id: str
    memories: int = 0
    skipped: int = 0  # memories already in the store (a repeated import)
    relationships: int = 0
    versions: int = 0
    audit: int = 0
    dropped_relationships: int = 0  # pointing at a memory the export does not hold
    other: dict[str, int] = field(default_factory=dict)  # entries of the other sections, by section

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add(self, counts: Mapping[str, int]) -> None:
        for name, n in counts.items():
            if name in ("versions", "audit"):
                setattr(self, name, getattr(self, name) + n)
            else:
                self.other[name] = self.other.get(name, 0) + n


@dataclass
class Memories:
    """An export's user and memories, checked without a store (:func:`read_memories`)."""

    user: str
    chunks: list[KnowledgeChunk]
    edges: list[Relationship]
    dropped_edges: int


@dataclass
class ExportPlan:
    """An export checked as far as it can be without a store (``UserExport.check_export``)."""

    memories: Memories
    staged: list[Staged]
    # Memory ids the parts' sections name but the export does not hold (deleted ones): the
    # store must not hold them for another user.
    foreign: set[str]

    @property
    def user(self) -> str:
        return self.memories.user

    def memory_ids(self) -> list[str]:
        """Every memory id the export holds or names, sorted."""
        return sorted({c.id for c in self.memories.chunks} | self.foreign)


def export_is_empty(data: Mapping[str, Any]) -> bool:
    """Whether an export holds nothing of the user (``GET /users/{id}/export`` says 404)."""
    return not any(v for k, v in data.items() if k not in ENVELOPE)


def read_memories(data: Any) -> Memories:
    """An export's format, user and memories with their relationships, checked without a store;
    ``InvalidInputError`` names the first problem. The parts' sections are checked by the
    parts of the store the export goes to (:meth:`UserExport.check_export`)."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"an export is a JSON object, got {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise InvalidInputError(f"not a BeeWeave export (format {data.get('format')!r}, expected {EXPORT_FORMAT!r})")
    user = check_user(data.get("user_id"))
    chunks: list[KnowledgeChunk] = []
    edges: list[Relationship] = []
    for i, raw in enumerate(section(data, "chunks", list)):
        where = f"chunks[{i}]"
        row = mapping(raw, where)
        rels = row.pop("relationships", []) or []
        chunks.append(chunk_of(row, where, user))
        for j, rel in enumerate(sequence(rels, f"{where}.relationships")):
            try:
                edge = Relationship.from_dict(mapping(rel, f"{where}.relationships[{j}]"))
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidInputError(f"{where}.relationships[{j}] is not a relationship: {exc}") from None
            check_number("weight", edge.weight)
            edges.append(edge)
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInputError(f"the export holds the memory {dup!r} twice")
    known = set(ids)
    kept = [e for e in edges if e.source_id in known and e.target_id in known]
    return Memories(user, chunks, kept, len(edges) - len(kept))


class UserExport:
    """One user's data across the parts that keep it: one export, one import.

    Args:
        backend: the store (memories and their relationships are read and written here).
        clock: "now", for ``exported_at``.
        restore: writes memories exactly as they were (``Records.restore``).
        parts: every part that keeps state of a user; no two may keep one namespace or stream.
    """

    def __init__(self, backend: StoreBackend, clock: Callable[[], Any],
                 restore: Callable[[Sequence[KnowledgeChunk], Mapping[str, Any] | None], None],
                 parts: Sequence[UserData]) -> None:
        self.backend = backend
        self.clock = clock
        self.restore = restore
        self.parts = tuple(parts)
        kept = [name for p in self.parts for name in p.keeps]
        twice = sorted({n for n in kept if kept.count(n) > 1})
        if twice:
            raise ValueError(f"two parts keep {twice[0]!r}: each namespace and stream has one owner")

    @property
    def keeps(self) -> set[str]:
        """The kv namespaces and log streams of user data some part exports."""
        return {name for p in self.parts for name in p.keeps}

    def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything stored about a user, as JSON-able data (see the module)."""
        user = check_user(user_id)
        chunks = list(self.backend.scan(build_filter({"status": ALL_STATUSES}, user_id=user)))
        out: dict[str, Any] = {"format": EXPORT_FORMAT, "user_id": user, "exported_at": self.clock().isoformat(),
                               "chunks": [c.to_dict() for c in chunks]}
        for part in self.parts:
            sections = part.export_user(user)
            if sections.keys() & out.keys():
                raise ValueError(f"{type(part).__name__} exports a section another part exports: "
                                 f"{sorted(sections.keys() & out.keys())}")
            out.update(sections)
        return out

    def check_export(self, data: Any) -> ExportPlan:
        """Everything of an export that can be checked without reading the store: its shape, and
        that each section is about the export's user and its memories (so that an import, even
        with a key scoped to that user, writes nothing onto another user's memories)."""
        if isinstance(data, ExportPlan):
            return data
        memories = read_memories(data)
        staged = [part.stage_import(memories.user, data) for part in self.parts]
        named = {cid for s in staged for cid in s.names}
        return ExportPlan(memories, staged, named - {c.id for c in memories.chunks})

    def check_import(self, data: Any) -> ExportPlan:
        """What :meth:`import_user` checks before it writes, raising as it does; writes nothing."""
        plan = self.check_export(data)
        self._held(plan)
        return plan

    def _held(self, plan: ExportPlan) -> dict[str, KnowledgeChunk]:
        """The export's memories the store already holds (a repeated import), after refusing
        ids the store holds for another user or with another text."""
        mine = {c.id: c for c in plan.memories.chunks}
        there = self._get(list(mine))
        for cid, held in there.items():
            if held.user_id != mine[cid].user_id or held.raw_content != mine[cid].raw_content:
                raise DuplicateIdError(f"the store already holds a memory {cid!r} with another user or text; "
                                       "nothing was imported")
        # What the export says about memories it does not hold (deleted ones) must not land on
        # another user's memory of the same id: a crafted export could otherwise write history,
        # review entries or notes onto it.
        others = sorted(cid for cid, c in self._get(sorted(plan.foreign)).items() if c.user_id != plan.user)
        if others:
            raise InvalidInputError(f"the export names {others[0]!r}, a memory of another user in this store; "
                                    "nothing was imported")
        for s in plan.staged:
            if s.check is not None:
                s.check()
        return there

    def import_user(self, data: Any, *, vectors: Mapping[str, Any] | None = None) -> ImportReport:
        """Write a user's export (or its checked plan) into this store.

        ``vectors``: each memory's vector by id, used instead of embedding its text (they must
        come from the model this store uses). Raises ``InvalidInputError`` for data that is not
        an export, ``DuplicateIdError`` for a memory id the store holds with other content;
        either way nothing is written.
        """
        plan = self.check_export(data)
        there = self._held(plan)
        mem = plan.memories
        report = ImportReport(plan.user, skipped=len(there), dropped_relationships=mem.dropped_edges)
        fresh = [c for c in mem.chunks if c.id not in there]
        if fresh:
            self.restore(fresh, vectors)
        report.memories = len(fresh)
        edges = mem.edges
        if there:  # a repeated import: count (and write) only the relationships not there yet
            held = {(e.source_id, e.target_id, e.type, e.weight) for e in self.backend.edges(list(there), direction="out")}
            edges = [e for e in edges if (e.source_id, e.target_id, e.type, e.weight) not in held]
        if edges:
            self.backend.add_edges(edges)
        report.relationships = len(edges)
        for s in plan.staged:
            report.add(write_kv(self.backend, plan.user, s.kv))
            if s.write is not None:
                report.add(s.write())
        return report

    def users(self) -> list[str]:
        """Every user the store holds something of (memories, entries a part keeps, or what a
        part keeps outside the store's tables: ``users_held()``, the ingest queue's), sorted."""
        found = set(self.backend.users())
        for part in self.parts:
            held = getattr(part, "users_held", None)
            if held is not None:
                found.update(held())
        return sorted(found)

    def _get(self, ids: list[str]) -> dict[str, KnowledgeChunk]:
        return {c.id: c for c in records_in_order(self.backend.get, ids)}
