"""Memory ids that belong to one user.

A store's memory ids are one space for all of a tenant's users. An id a caller picks
("turn-1", "note-7") can therefore be taken by another user first, and a caller who may see
only some users learns that it exists from the refusal. So ids that are meant to be one
user's carry the user: ``<name>@<user>``, the user quoted so that ``@`` and ``:`` in a user
id (an email address) cannot make two users' ids equal:

* an ingested event's memories are ``<event id>@<user>:<n>`` (the turn 0, then each step):
  two users' "turn-1" never collide, and one user's retry gives the same ids (idempotent);
* a key scoped to users picks ids ending in ``@<user>`` (or its user's event ids, as an export
  holds them), the memory's user, and nothing else, so it can neither take nor probe another
  user's ids.

The two shapes never meet: after the last ``@``, an event's id has one ``:`` (before ``n``), a
chosen id none (the quoted user has no ``:``).
"""

from __future__ import annotations

__all__ = ["user_tag", "event_key", "event_memory_id", "legacy_event_memory_id", "owned_by"]


def user_tag(user_id: str) -> str:
    """The user as an id carries it: ``%``, ``@`` and ``:`` percent-quoted, everything else as
    is (``bob%40example.com``, ``张三``). Quoting ``%`` too keeps two users' tags apart."""
    return "".join(_QUOTED.get(ch, ch) for ch in user_id)


_QUOTED = {ch: f"%{ord(ch):02X}" for ch in "%@:"}


def event_key(event_id: str, user_id: str) -> str:
    """An event in the ingest queue: ``<event id>@<user>``, so that two users' "turn-1" are two
    events (the queue ignores a key it holds: one user's repeated event is queued once)."""
    return f"{event_id}@{user_tag(user_id)}"


def event_memory_id(event_id: str, user_id: str, n: int) -> str:
    """The id of the ``n``-th memory (0: the turn) of ``user_id``'s event ``event_id``."""
    return f"{event_key(event_id, user_id)}:{n}"


def legacy_event_memory_id(event_id: str, n: int) -> str:
    """The id the same memory had before ids carried the user (``<event id>:<n>``): stores
    written then keep it, and an event retried across the upgrade must find it there."""
    return f"{event_id}:{n}"


def owned_by(chunk_id: str, user_id: str) -> bool:
    """Whether ``chunk_id`` is one that only ``user_id``'s memories can have, as a scoped key
    must choose: ``<name>@<user>``, or ``<event id>@<user>:<n>`` (its export holds those)."""
    name, at, tag = chunk_id.rpartition("@")
    head, colon, n = tag.partition(":")
    if colon:
        if not (n.isascii() and n.isdigit()):
            return False
        tag = head
    return bool(at and name) and tag == user_tag(user_id)
