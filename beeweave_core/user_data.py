"""``UserData``: how a part that keeps state of a user hands it over and takes it back.

A part that writes key-value or log entries tagged with a user (``kv_put(..., user_id=)``,
``log_append(..., user_id=)``) implements it, and ``BeeWeave`` assembles the parts into one
export (:mod:`beeweave_core.user_export`): nobody outside a part reads its storage. The part
names the kv namespaces and log streams it keeps (``keeps``: a test checks that every one a
user's data lands in is kept by some part, so a new part that forgets to register fails it)
and decides the shape of its export sections.

A part's import is staged, so that bad data writes nothing: every part checks its sections
without the store (``stage_import`` returns a :class:`Staged`), then against the store
(``Staged.check``), and only then does any part write (``Staged.kv``, ``Staged.write``); the
engine's ``import_user`` runs the three steps over every part.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidInputError
from .records import KnowledgeChunk, to_datetime
from .store.base import StoreBackend
from .validation import check_chunk, check_id

__all__ = ["UserData", "Staged", "KvEntry", "KV_SEP", "section", "mapping", "sequence", "time_of", "owned",
           "chunk_of", "user_entries", "named_entries", "write_kv", "same"]

KV_SEP = "\x1f"  # kv keys of a user's own entries are "<user>\x1f<name>" (a user id holds no control character)


@dataclass(frozen=True)
class KvEntry:
    """One kv entry an import puts (unless the store already holds it with this value)."""

    section: str  # the export section it came from: what the import report counts it as
    namespace: str
    key: str
    value: dict[str, Any]


@dataclass
class Staged:
    """One part's sections of an export, checked without the store, not yet written."""

    kv: list[KvEntry] = field(default_factory=list)
    # Memory ids the sections name: the store must not hold any of them for another user.
    names: set[str] = field(default_factory=set)
    # A part's own check against the store (raising before anything is written).
    check: Callable[[], None] | None = None
    # What is not plain kv entries (logs, the search ring): writes, returns counts by section.
    write: Callable[[], dict[str, int]] | None = None


@runtime_checkable
class UserData(Protocol):
    """A part that keeps state of a user."""

    @property
    def keeps(self) -> tuple[str, ...]:
        """The kv namespaces and log streams whose user-tagged entries this part writes."""
        ...

    def export_user(self, user_id: str) -> dict[str, Any]:
        """This part's sections of the user's export (JSON-able), by section name."""
        ...

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        """Check this part's sections of an export (``InvalidInputError`` naming the first
        problem) without reading the store; nothing is written until the ``Staged`` is."""
        ...


# -- helpers the parts share ---------------------------------------------------------------------
def section(data: Mapping[str, Any], key: str, kind: type) -> Any:
    """An export's section ``key``: a JSON list or object; absent (an older export) is empty."""
    value = data.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise InvalidInputError(f"{key} must be a JSON {'list' if kind is list else 'object'}")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object")
    return dict(value)


def sequence(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise InvalidInputError(f"{where} must be a JSON list")
    return value


def time_of(value: Any, where: str) -> str:
    try:
        return to_datetime(value).isoformat()
    except (TypeError, ValueError):
        raise InvalidInputError(f"{where} is not a time: {value!r}") from None


def owned(row: Mapping[str, Any], where: str, user_id: str) -> None:
    if row.get("user_id") != user_id:
        raise InvalidInputError(f"{where} belongs to user {row.get('user_id')!r}, not {user_id!r} (the export's user)")


def chunk_of(row: dict[str, Any], where: str, user_id: str) -> KnowledgeChunk:
    """A memory of the export's user, checked as ``add`` checks one."""
    owned(row, where, user_id)
    try:
        chunk = KnowledgeChunk.from_dict(row)
    except (TypeError, ValueError) as exc:  # InvalidInputError is a ValueError
        raise InvalidInputError(f"{where} is not a memory: {exc}") from None
    check_chunk(chunk)
    return chunk


def user_entries(backend: StoreBackend, namespace: str, user_id: str) -> dict[str, dict[str, Any]]:
    """A user's own kv entries (keys ``<user>\\x1f<name>``), by name."""
    prefix = user_id + KV_SEP
    return {k[len(prefix):]: v for k, v in backend.kv_scan(namespace, prefix)}


def named_entries(data: Mapping[str, Any], name: str, namespace: str, user_id: str,
                  check: Callable[[dict[str, Any], str], Iterable[str]]) -> Iterator[tuple[KvEntry, list[str]]]:
    """The entries of an object section written by :func:`user_entries`, each checked by
    ``check(value, where)``, which returns the memory ids the entry names."""
    for k, v in section(data, name, dict).items():
        where = f"{name}[{k!r}]"
        value = mapping(v, where)
        named = [check_id(cid, where) for cid in check(value, where)]
        yield KvEntry(name, namespace, user_id + KV_SEP + check_id(k, f"{name} key"), value), named


def write_kv(backend: StoreBackend, user_id: str, entries: Iterable[KvEntry]) -> dict[str, int]:
    """Put the entries the store does not hold with these values; count the puts by section."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.section] = counts.get(e.section, 0) + _put_over(backend, e, user_id)
    return counts


def _put_over(backend: StoreBackend, e: KvEntry, user_id: str) -> bool:
    """Write ``e`` where the store's value differs, only over the value read (a compare-and-set):
    another process's write or delete since is kept, never reverted (issue 47). True if it wrote."""
    seen = backend.kv_get(e.namespace, e.key)
    if seen == e.value:
        return False
    wrote = [False]

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        wrote[0] = current == seen
        return e.value if wrote[0] else current

    backend.kv_update(e.namespace, e.key, change, user_id=user_id)
    return wrote[0]


def same(value: Any) -> str:
    """A value's canonical JSON: entries equal as data compare equal."""
    return json.dumps(value, sort_keys=True, default=str)
