"""API keys: ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``; each key names one tenant,
and optionally the users it may touch and whether it may export, forget and maintain.

A missing key is 401; a key that is not configured is 403; a key used for another user's
memory gets 404 (as if the memory did not exist: a scoped key must not learn which ids
exist), and a non-admin key on an admin route gets 403. Keys are compared by their
SHA-256 digests, so the lookup does not leak a key's characters through timing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from ..errors import InvalidInputError, NotFoundError
from ..ids import owned_by, user_tag
from ..scopes import is_scope_owner
from .config import KeyScope, key_digest

__all__ = ["KeyRing", "Access", "hidden", "access_of", "api_key_header", "bearer"]

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key; it selects the tenant.")
bearer = HTTPBearer(auto_error=False, description="The API key as a bearer token.")


@dataclass(frozen=True)
class Access(KeyScope):
    """What one API key may do over REST: its :class:`~.config.KeyScope` (tenant, users, admin,
    the shared scopes it reads and writes) with the REST answers (404 for what it may not see,
    403 for what it may not write). A tenant-wide key reads and writes every scope.
    """

    def allows(self, user_id: str | None) -> bool:
        return self.users is None or (user_id is not None and user_id in self.users)

    def user(self, user_id: str | None) -> str | None:
        """The user a request may read: the one asked if allowed; for a one-user key, that user."""
        if user_id is None:
            if self.users is not None and len(self.users) == 1:
                return next(iter(self.users))
            return None
        if not self.allows(user_id):
            raise NotFoundError(f"no data of user {user_id!r}")
        return user_id

    def scope(self, user_id: str | None) -> str | list[str] | None:
        """A search/list scope: the user asked (checked), or every user of the key."""
        one = self.user(user_id)
        if one is not None or self.users is None:
            return one
        return sorted(self.users)

    def one_user(self, user_id: str | None) -> str | None:
        """For routes that take one user: a key covering several users must name one."""
        one = self.user(user_id)
        if one is None and self.users is not None:
            raise InvalidInputError("this API key covers several users: pass user_id")
        return one

    def may_write(self, user_id: str) -> str:
        if self.allows(user_id):
            return user_id
        if is_scope_owner(user_id):
            if self.shared.writes(user_id):
                return user_id
            raise HTTPException(403, f"this API key may not write to scope {user_id!r}")
        raise HTTPException(403, f"this API key may not write memories of user {user_id!r}")

    def own_ids(self, ids: Iterable[str], found: Mapping[str, Any]) -> None:
        """Each id must be a memory in ``found`` (id -> chunk) of this key's users: the first
        that is not, whether missing or another user's, gets the one answer ``hidden``."""
        _all_seen(ids, found, self.allows)

    def may_choose(self, chunk_id: str | None, user_id: str, holder: str | None = None) -> None:
        """A key scoped to users picks only ids that no other user can hold (``<name>@<user>``,
        see ``beeweave_core.ids``), or ids its users hold already (``holder``: the user of the
        memory the store holds under ``chunk_id``, a re-import): any other id could be taken,
        and the refusal would tell the key so. A free id and another user's get one answer."""
        if self.users is None or chunk_id is None or owned_by(chunk_id, user_id):
            return
        if holder is None or not self.allows(holder):
            raise InvalidInputError(f"a key scoped to users chooses memory ids of the form '<name>@{user_tag(user_id)}' "
                                    f"(the memory's user), got {chunk_id!r}; or leave the id out")

    def must_admin(self, what: str) -> None:
        if not self.admin:
            raise HTTPException(403, f"{what} needs an admin API key")

    def reads(self, owner: str | None) -> bool:
        """Whether this key may read memories of ``owner``: one of its users, or a shared
        scope it reads (the tenant's knowledge, its scopes)."""
        return self.allows(owner) or (is_scope_owner(owner) and self.shared.reads(str(owner)))

    def check_readable(self, ids: Iterable[str], found: Mapping[str, Any]) -> None:
        """As :meth:`own_ids`, for memories this key reads (by id, or feedback on what a search
        returned)."""
        _all_seen(ids, found, self.reads)


def hidden(chunk_id: str) -> NotFoundError:
    """The one answer for a memory a key may not see and for one that does not exist: the
    engine's own words for a missing id, so no route or detail tells the two apart."""
    return NotFoundError(f"no chunk with id {chunk_id!r}")


def _all_seen(ids: Iterable[str], found: Mapping[str, Any], sees: Callable[[str], bool]) -> None:
    for cid in ids:
        chunk = found.get(cid)
        if chunk is None or not sees(chunk.user_id):
            raise hidden(cid)


class KeyRing:
    def __init__(self, keys: Mapping[str, Any]) -> None:
        self._access = {key_digest(k): Access.of(v) for k, v in keys.items()}

    def access(self, key: str | None) -> Access:
        if not key:
            raise HTTPException(401, "missing API key: send it as 'X-API-Key: <key>' or "
                                     "'Authorization: Bearer <key>'", headers={"WWW-Authenticate": "Bearer"})
        found = self._access.get(key_digest(key))
        if found is None:
            raise HTTPException(403, "API key not recognised")
        return found

    def tenant(self, key: str | None) -> str:
        return self.access(key).tenant


def access_of(request: Request, key: str | None = Security(api_key_header),
              credentials: HTTPAuthorizationCredentials | None = Security(bearer)) -> Access:
    """The access of the request's API key (a FastAPI dependency)."""
    ring: KeyRing = request.app.state.keyring
    access = ring.access(key or (credentials.credentials if credentials is not None else None))
    request.state.tenant = access.tenant
    return access
