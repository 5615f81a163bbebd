"""A user's export written back into a store: the way back from ``beeweave export``, and how
``beeweave copy`` moves users from one store to another (an embedded SQLite file to
PostgreSQL, one tenant to another).

What an export holds comes back as it was: memories of every status with their ids, times,
counters and tier; their relationships and the notes of relations a caller recorded; past
versions and the audit log; facts and conflict groups; the review queue; watches. Nothing is
derived again: no redaction or admission (the data was stored once already), no linking,
merging or lifecycle rule, no ``memory.created`` event. Vectors come with the data (``copy``
passes the source's) or are embedded by the destination's model.

Not restored: the counts behind hot question patterns and the recorded searches. They are
statistics of use, which an export shows but does not hold in a form a store can take back
(the recurring-question memories themselves are ordinary memories and come back).

Everything is checked before anything is written: bad data writes nothing. An import cut
off part-way (a store that went away) can be run again: a memory already there with the same
user and text is skipped, and log entries already there are not written twice. A memory id
that the store holds with another user or text is refused before any write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..engine.graph import NOTES
from ..engine.watch import WATCHES
from ..errors import DuplicateIdError, InvalidInputError
from ..lifecycle.facts import CONFLICTS, FACTS
from ..lifecycle.history import AUDIT, VERSIONS
from ..lifecycle.review import REVIEW
from ..records import ALL_STATUSES, KnowledgeChunk, Relationship, to_datetime
from ..validation import check_chunk, check_id, check_number, check_text, check_user

__all__ = ["ImportReport", "ExportPlan", "check_export", "check_import", "import_user", "users_of", "EXPORT_FORMAT", "KV_SEP"]

EXPORT_FORMAT = "beeweave.export/1"
KV_SEP = "\x1f"  # the lifecycle's kv keys are "<user>\x1f<name>"
_BATCH = 512


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
    other: dict[str, int] = field(default_factory=dict)  # facts, conflicts, review, watches, notes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExportPlan:
    """An export checked as far as it can be without a store (``check_export``)."""

    user: str
    chunks: list[KnowledgeChunk]
    edges: list[Relationship]
    dropped_edges: int
    logs: dict[str, list[tuple[str, dict[str, Any]]]]  # stream -> (key, value)
    kv: dict[str, list[tuple[str, dict[str, Any]]]]  # namespace -> (key, value)
    # Memory ids the export's history, facts, review and notes name but does not hold
    # (deleted ones): the store must not hold them for another user.
    foreign: set[str]

    def memory_ids(self) -> list[str]:
        """Every memory id the export holds or names, sorted."""
        return sorted({c.id for c in self.chunks} | self.foreign)


def import_user(memory: Any, data: Any, *, vectors: Mapping[str, Any] | None = None) -> ImportReport:
    """Write a user's export (``MemoryService.export_user``) into ``memory``'s store.

    ``vectors``: each memory's vector by id, used instead of embedding its text (they must
    come from the model this store uses). Raises ``InvalidInputError`` for data that is not an
    export, ``DuplicateIdError`` for a memory id the store holds with other content; either
    way nothing is written.
    """
    plan = data if isinstance(data, ExportPlan) else check_export(data)
    backend = memory.backend
    there = check_import(memory, plan)
    report = ImportReport(plan.user, skipped=len(there), dropped_relationships=plan.dropped_edges)
    fresh = [c for c in plan.chunks if c.id not in there]
    if fresh:
        memory.restore(fresh, vectors=vectors)
    report.memories = len(fresh)
    edges = plan.edges
    if there:  # a repeated import: count (and write) only the relationships not there yet
        held_edges = {(e.source_id, e.target_id, e.type, e.weight) for e in backend.edges(list(there), direction="out")}
        edges = [e for e in edges if (e.source_id, e.target_id, e.type, e.weight) not in held_edges]
    if edges:
        backend.add_edges(edges)
    report.relationships = len(edges)
    for stream, entries in plan.logs.items():
        # Entries already in the log (a repeated import, also of a memory deleted since) are
        # not written twice.
        seen = {(k, _canon(v)) for k in {k for k, _ in entries} for _, k, v in backend.log_read(stream, k)}
        todo = [(k, v) for k, v in entries if (k, _canon(v)) not in seen]
        for key, value in todo:
            backend.log_append(stream, key, value, user_id=plan.user)
        setattr(report, "versions" if stream == VERSIONS else "audit", len(todo))
    for namespace, items in plan.kv.items():
        report.other[_KV_NAMES[namespace]] = sum(_put_over(backend, namespace, key, value, plan.user)
                                                 for key, value in items)
    return report


def check_import(memory: Any, data: Any) -> dict[str, KnowledgeChunk]:
    """What ``import_user`` checks against the store before it writes (raising as it does);
    returns the export's memories the store already holds (a repeated import)."""
    plan = data if isinstance(data, ExportPlan) else check_export(data)
    backend = memory.backend
    mine = {c.id: c for c in plan.chunks}
    there = _get(backend, list(mine))
    for cid, held in there.items():
        if held.user_id != mine[cid].user_id or held.raw_content != mine[cid].raw_content:
            raise DuplicateIdError(f"the store already holds a memory {cid!r} with another user or text; "
                                   "nothing was imported")
    # What the export says about memories it does not hold (deleted ones) must not land on
    # another user's memory of the same id: a crafted export could otherwise write history,
    # review entries or notes onto it.
    others = sorted(cid for cid, c in _get(backend, sorted(plan.foreign)).items() if c.user_id != plan.user)
    if others:
        raise InvalidInputError(f"the export names {others[0]!r}, a memory of another user in this store; "
                                "nothing was imported")
    for wid, _ in plan.kv.get(WATCHES, []):
        held = backend.kv_get(WATCHES, wid)
        if held is not None and held.get("user_id") != plan.user:
            raise InvalidInputError(f"the store already holds a watch {wid!r} of another user; nothing was imported")
    return there


def _put_over(backend: Any, namespace: str, key: str, value: dict[str, Any], user: str) -> bool:
    """Write the export's ``value`` where it differs from the store's, only over the value read
    (a compare-and-set): another process's change since, or its delete, is kept, never
    reverted (issue 47). True if it wrote."""
    seen = backend.kv_get(namespace, key)
    if seen == value:
        return False
    wrote = [False]

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        wrote[0] = current == seen
        return value if wrote[0] else current

    backend.kv_update(namespace, key, change, user_id=user)
    return wrote[0]


def _get(backend: Any, ids: list[str]) -> dict[str, KnowledgeChunk]:
    found: dict[str, KnowledgeChunk] = {}
    for start in range(0, len(ids), _BATCH):
        found.update(backend.get(ids[start : start + _BATCH]))
    return found


_KV_NAMES = {FACTS: "facts", CONFLICTS: "conflicts", REVIEW: "review", WATCHES: "watches", NOTES: "notes"}


def _canon(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# -- checking ---------------------------------------------------------------------------------------
def check_export(data: Any) -> ExportPlan:
    """Everything of an export that can be checked without a store: its shape, and that each
    part is about the export's user and its memories (so that an import, even with a key
    scoped to that user, writes nothing onto another user's memories). ``InvalidInputError``
    names the first problem."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"an export is a JSON object, got {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise InvalidInputError(f"not a BeeWeave export (format {data.get('format')!r}, expected {EXPORT_FORMAT!r})")
    user = check_user(data.get("user_id"))
    chunks: list[KnowledgeChunk] = []
    edges: list[Relationship] = []
    for i, raw in enumerate(_items(data, "chunks", list)):
        where = f"chunks[{i}]"
        row = dict(_mapping(raw, where))
        rels = row.pop("relationships", []) or []
        chunk = _chunk(row, where, user)
        chunks.append(chunk)
        for j, rel in enumerate(_sequence(rels, f"{where}.relationships")):
            try:
                edge = Relationship.from_dict(dict(_mapping(rel, f"{where}.relationships[{j}]")))
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidInputError(f"{where}.relationships[{j}] is not a relationship: {exc}") from None
            check_number("weight", edge.weight)
            edges.append(edge)
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInputError(f"the export holds the memory {dup!r} twice")
    known = set(ids)

    refs: set[str] = set()  # memory ids the history, facts, review and notes are about

    def ref(cid: Any, where: str) -> str:
        refs.add(check_id(cid, where))
        return str(cid)

    kept = [e for e in edges if e.source_id in known and e.target_id in known]
    logs: dict[str, list[tuple[str, dict[str, Any]]]] = {VERSIONS: [], AUDIT: []}
    for i, raw in enumerate(_items(data, "versions", list)):
        v = dict(_mapping(raw, f"versions[{i}]"))
        key = ref(v.pop("chunk_id", None), f"versions[{i}].chunk_id")
        v.pop("seq", None)  # the source store's position; the log gives its own
        if _chunk(dict(_mapping(v.get("chunk"), f"versions[{i}].chunk")), f"versions[{i}].chunk", user).id != key:
            raise InvalidInputError(f"versions[{i}] is filed under {key!r} but holds another memory")
        _time(v.get("at"), f"versions[{i}].at")
        logs[VERSIONS].append((key, v))
    for i, raw in enumerate(_items(data, "audit", list)):
        a = dict(_mapping(raw, f"audit[{i}]"))
        key = ref(a.pop("chunk_id", None), f"audit[{i}].chunk_id")
        a.pop("seq", None)
        _time(a.get("at"), f"audit[{i}].at")
        logs[AUDIT].append((key, a))
    kv: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    prefix = user + KV_SEP
    for name, namespace in (("facts", FACTS), ("conflicts", CONFLICTS)):
        entries = _items(data, name, dict)
        kv[namespace] = []
        for k, v in entries.items():
            where = f"{name}[{k!r}]"
            v = dict(_mapping(v, where))
            for cid in ([v["chunk_id"]] if "chunk_id" in v else []) + list(_sequence(v.get("ids", []), where)):
                ref(cid, where)
            kv[namespace].append((prefix + check_id(k, f"{name} key"), v))
    kv[REVIEW] = []
    for i, raw in enumerate(_items(data, "review", list)):
        r = _mapping(raw, f"review[{i}]")
        reasons = r.get("reasons")
        if not isinstance(reasons, list) or not all(isinstance(x, str) for x in reasons):
            raise InvalidInputError(f"review[{i}].reasons must be a list of strings")
        kv[REVIEW].append((ref(r.get("chunk_id"), f"review[{i}].chunk_id"),
                           {"user_id": user, "reasons": reasons,
                            "flagged_at": _time(r.get("flagged_at"), f"review[{i}].flagged_at")}))
    kv[WATCHES] = []
    for i, raw in enumerate(_items(data, "watches", list)):
        w = _mapping(raw, f"watches[{i}]")
        _owned(w, f"watches[{i}]", user)
        kv[WATCHES].append((check_id(w.get("id"), f"watches[{i}].id"),
                            {"query": check_text(f"watches[{i}].query", w.get("query")), "user_id": user,
                             "agent_id": w.get("agent_id"),
                             "min_relevance": check_number(f"watches[{i}].min_relevance", w.get("min_relevance"),
                                                           low=0.0, high=1.0)}))
    kv[NOTES] = []
    for i, raw in enumerate(_items(data, "notes", list)):
        n = _mapping(raw, f"notes[{i}]")
        key = KV_SEP.join((ref(n.get("source_id"), f"notes[{i}].source_id"),
                           ref(n.get("target_id"), f"notes[{i}].target_id"), check_id(n.get("type"), f"notes[{i}].type")))
        kv[NOTES].append((key, {"note": check_text(f"notes[{i}].note", n.get("note"))}))
    return ExportPlan(user, chunks, kept, len(edges) - len(kept), logs, {k: v for k, v in kv.items() if v},
                      refs - known)


def _items(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if value is None:  # an older export without this part
        return kind()
    if not isinstance(value, kind):
        raise InvalidInputError(f"{key} must be a JSON {'list' if kind is list else 'object'}")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object")
    return value


def _sequence(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise InvalidInputError(f"{where} must be a JSON list")
    return value


def _owned(row: Mapping[str, Any], where: str, user: str) -> None:
    if row.get("user_id") != user:
        raise InvalidInputError(f"{where} belongs to user {row.get('user_id')!r}, not {user!r} (the export's user)")


def _chunk(row: dict[str, Any], where: str, user: str) -> KnowledgeChunk:
    _owned(row, where, user)
    try:
        chunk = KnowledgeChunk.from_dict(row)
    except (TypeError, ValueError) as exc:  # InvalidInputError is a ValueError
        raise InvalidInputError(f"{where} is not a memory: {exc}") from None
    check_chunk(chunk)
    return chunk


def _time(value: Any, where: str) -> str:
    try:
        return to_datetime(value).isoformat()
    except (TypeError, ValueError):
        raise InvalidInputError(f"{where} is not a time: {value!r}") from None


def users_of(memory: Any) -> Iterator[str]:
    """The users who have memories in ``memory``'s store (any status), each once."""
    from ..filters import build_filter

    seen: set[str] = set()
    for chunk in memory.backend.scan(build_filter({"status": ALL_STATUSES})):
        if chunk.user_id not in seen:
            seen.add(chunk.user_id)
            yield chunk.user_id
