"""Scopes: whose a memory is, and which owners a search reads.

A memory belongs to one user, to a shared scope (a team or a project, with optional
sub-keys such as a module: ``"project:atlas/module:parser"``) or to the whole tenant
(``"tenant"``). A shared memory is stored like any other, under a reserved owner id,
``"scope:"`` + the scope's name (``"scope:project:atlas"``, ``"scope:tenant"``). So:

- every backend filters scopes with the user filter it already indexes: a search of
  several scopes is an OR over owner ids, no new column and no new index;
- a user's export and forget (``user_id = 'alice'``) can never reach shared knowledge;
- a key or grant for a user never matches a scope (user ids are not ``scope:...``).

A search names the scopes it reads (``BeeWeave.search(..., scopes=[...])``): ``"user"``
(the searching user's own memories), ``"tenant"``, or shared scope names. Without
``scopes`` it reads the user, the tenant (``ScopeConfig.tenant``) and the scopes granted
to the user (``ScopeConfig.grants``). The engine trusts its caller with explicit names, as
it does with ``filters={"user_id": ...}``; the REST and MCP servers check them against the
API key (``server/auth.py``). Who may write which scope is the write policy's rule
(``ScopeConfig.writers``, enforced by ``ingest/write_policy.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .config_rules import FLAG, check_fields
from .errors import InvalidInputError, NotFoundError

__all__ = ["ScopeKind", "Scope", "ScopeConfig", "WriteRule", "Scopes", "KeyScopes", "SCOPE_PREFIX", "TENANT",
           "USER", "scope_owner", "is_scope_owner"]

SCOPE_PREFIX = "scope:"
TENANT = "tenant"
USER = "user"  # in a search's scopes: the searching user's own memories
# kind:name, e.g. project:atlas; a name holds no "/" (the sub-key separator) and no ":".
_SEGMENT = re.compile(r"[a-z][a-z0-9_-]{0,31}:[^/:\s\x00-\x1f]{1,128}")


class ScopeKind(str, Enum):
    """Who a memory belongs to."""

    USER = "user"
    SHARED = "shared"
    TENANT = "tenant"


@dataclass(frozen=True)
class Scope:
    """One owner of memories. ``name``: the user id, the shared scope's name
    (``"project:atlas/module:parser"``) or ``"tenant"``."""

    kind: ScopeKind
    name: str

    @classmethod
    def parse(cls, text: Any) -> Scope:
        """A shared scope or the tenant from its name (``"team:support"``, ``"tenant"``)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"a scope is a string such as 'project:atlas', got {type(text).__name__}")
        name = text[len(SCOPE_PREFIX):] if text.startswith(SCOPE_PREFIX) else text
        if name == TENANT:
            return cls(ScopeKind.TENANT, TENANT)
        segments = name.split("/")
        if segments[0].startswith(USER + ":"):  # a user's memories are read by user_id, never as a scope
            raise InvalidInputError(f"{text!r}: a user is not a shared scope; pass user_id to read a user's memories")
        if not all(_SEGMENT.fullmatch(seg) for seg in segments):
            raise InvalidInputError(
                f"{text!r} is not a scope: use 'tenant' or kind:name segments joined by '/', "
                "e.g. 'team:support' or 'project:atlas/module:parser'")
        return cls(ScopeKind.SHARED, name)

    @classmethod
    def of_owner(cls, owner: str) -> Scope:
        """The scope a stored owner id stands for (a plain user id is that user)."""
        return cls.parse(owner) if owner.startswith(SCOPE_PREFIX) else cls(ScopeKind.USER, owner)

    @property
    def owner(self) -> str:
        """The ``user_id`` its memories are stored under."""
        return self.name if self.kind is ScopeKind.USER else SCOPE_PREFIX + self.name

    def within(self, other: Scope) -> bool:
        """Whether this scope is ``other`` or one of its sub-scopes (a module of a project):
        a grant or write rule for a project covers its modules."""
        if self.kind is not other.kind:
            return False
        return self.name == other.name or (self.kind is ScopeKind.SHARED and self.name.startswith(other.name + "/"))


def scope_owner(name: str) -> str:
    """The owner id memories of a shared scope (or ``"tenant"``) are stored under:
    ``memory.add(text, user_id=scope_owner("project:atlas"), ...)``."""
    return Scope.parse(name).owner


def is_scope_owner(user_id: Any) -> bool:
    """Whether an owner id is a shared scope's or the tenant's rather than a user's."""
    return isinstance(user_id, str) and user_id.startswith(SCOPE_PREFIX)


def _names(value: Any, what: str) -> tuple[str, ...]:
    """A list of non-empty strings (a bare string is refused: it is not a list of its letters)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInputError(f"{what} must be a list of names, got {value!r}")
    out = tuple(value)
    if not all(isinstance(v, str) and v for v in out):
        raise InvalidInputError(f"{what} must hold non-empty strings, got {out!r}")
    return out


@dataclass(frozen=True)
class WriteRule:
    """Who may write to a shared scope (or the tenant): ``agents`` (``None``: any writer,
    also one that names no agent) and ``categories`` (``metadata["category"]`` of the memory,
    or an event's ``category``; ``None``: any, also none). ``scope`` covers its sub-scopes;
    ``"*"``: every shared scope and the tenant."""

    scope: str
    agents: Sequence[str] | None = None
    categories: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.scope != "*":
            object.__setattr__(self, "scope", Scope.parse(self.scope).name)
        for name in ("agents", "categories"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, frozenset(_names(value, f"WriteRule.{name}")))

    def allows(self, scope: Scope, agent_id: str | None, category: str | None) -> bool:
        if self.scope != "*" and not scope.within(Scope.parse(self.scope)):
            return False
        if self.agents is not None and agent_id not in self.agents:
            return False
        return self.categories is None or category in self.categories


@dataclass(frozen=True)
class ScopeConfig:
    """Who reads and who writes shared knowledge. Pass it as ``BeeWeave(..., scopes=...)``.

    Attributes:
        grants: user id -> the shared scopes that user's searches read by default (``"*"``:
            every user), e.g. ``{"alice": ["project:atlas"], "*": ["team:support"]}``.
        tenant: every user's searches read tenant-wide knowledge by default (seed knowledge,
            patterns asked across users).
        writers: the write rules of shared scopes. ``None`` (the default): no rules, the
            program writes where it says. A list: a direct write or an ingested event to a
            shared scope or the tenant is refused (``PermissionDeniedError``) unless a rule
            allows its agent and category. Users' own memories are not governed by them.
    """

    grants: Mapping[str, Sequence[str]] = field(default_factory=dict)
    tenant: bool = True
    writers: Sequence[WriteRule] | None = None

    def __post_init__(self) -> None:
        check_fields(self, {"tenant": FLAG})
        if not isinstance(self.grants, Mapping):
            raise InvalidInputError("ScopeConfig.grants maps a user id (or '*') to a list of scope names")
        grants = {}
        for user, names in self.grants.items():
            scopes = tuple(Scope.parse(n) for n in _names(names, f"ScopeConfig.grants[{user!r}]"))
            grants[user] = tuple(s.name for s in scopes)
        object.__setattr__(self, "grants", grants)
        if self.writers is not None:
            if isinstance(self.writers, str) or not isinstance(self.writers, Iterable):
                raise InvalidInputError("ScopeConfig.writers is a list of WriteRule")
            rules = tuple(self.writers)
            if not all(isinstance(r, WriteRule) for r in rules):
                raise InvalidInputError("ScopeConfig.writers is a list of WriteRule")
            object.__setattr__(self, "writers", rules)


class Scopes:
    """The owners a search reads (see the module docstring)."""

    def __init__(self, config: ScopeConfig | None = None) -> None:
        self.config = config or ScopeConfig()

    def default(self, users: Sequence[str]) -> list[str]:
        """The scope names a search of ``users`` reads when it names none."""
        out = [USER]
        if self.config.tenant:
            out.append(TENANT)
        for user in ("*", *users):
            out += [n for n in self.config.grants.get(user, ()) if n not in out]
        return out

    def owners(self, user_id: Any, scopes: Any) -> Any:
        """The ``user_id`` condition of a search's filter: ``user_id`` as given when neither
        it nor ``scopes`` narrows anything, otherwise the owner ids of the scopes read."""
        if scopes is None and user_id is None:
            return None  # every memory, as before scopes existed
        users = _users(user_id)
        names = self.default(users) if scopes is None else _scope_list(scopes)
        out: list[str] = []
        for name in names:
            if name == USER:
                if not users:
                    raise InvalidInputError("scope 'user' reads the searching user's memories: pass user_id")
                out += users
            else:
                out.append(Scope.parse(name).owner)
        return list(dict.fromkeys(out))


def _users(user_id: Any) -> list[str]:
    if user_id is None:
        return []
    if isinstance(user_id, str):
        return [user_id]
    if isinstance(user_id, Iterable) and not isinstance(user_id, (bytes, Mapping)):
        users = list(user_id)
        if all(isinstance(u, str) for u in users):
            return users
    raise InvalidInputError(f"user_id must be a string (or a list of them), got {user_id!r}")


def _scope_list(scopes: Any) -> list[str]:
    names = [scopes] if isinstance(scopes, str) else list(_names(scopes, "scopes"))
    if not names:
        raise InvalidInputError("scopes is empty: it would read nothing (leave it out for the default)")
    for n in names:
        if not isinstance(n, str):
            raise InvalidInputError(f"scopes takes scope names, got {type(n).__name__}")
    return names


@dataclass(frozen=True)
class KeyScopes:
    """The shared scopes an API key scoped to users reads and writes (a key's
    ``server.config.KeyScope``, used by REST and MCP alike, holds one): the tenant's knowledge always, ``read`` and
    ``write`` scopes with their sub-scopes (a scope it writes it also reads)."""

    read: frozenset[str] = frozenset()
    write: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> KeyScopes:
        """From a key's settings: ``"scopes"`` (read) and ``"write_scopes"``."""
        return cls(*(frozenset(Scope.parse(n).name for n in _names(settings.get(name, ()), name))
                     for name in ("scopes", "write_scopes")))

    def reads(self, name: str) -> bool:
        scope = Scope.parse(name)
        return scope.kind is ScopeKind.TENANT or any(scope.within(Scope.parse(g)) for g in self.read | self.write)

    def writes(self, owner: str) -> bool:
        """Whether the key may write memories owned by ``owner`` (a ``scope:...`` id)."""
        if not is_scope_owner(owner):
            return False
        scope = Scope.parse(owner)
        return any(scope.within(Scope.parse(g)) for g in self.write)

    def for_search(self, scopes: Sequence[str] | str | None) -> list[str]:
        """The scopes a search with the key reads: those asked, each one it may read (another
        is absent, as another user's data is: ``NotFoundError``); by default its users', the
        tenant's and its own scopes."""
        if scopes is None:
            return [USER, TENANT, *sorted(self.read | self.write)]
        names = _scope_list(scopes)
        for name in names:
            if name != USER and not self.reads(name):
                raise NotFoundError(f"no data of scope {name!r}")
        return names
