"""API keys: ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``; each key names one tenant.

A missing key is 401; a key that is not configured is 403. Keys are compared by their
SHA-256 digests, so the lookup does not leak a key's characters through timing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Optional

from fastapi import Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

__all__ = ["KeyRing", "api_key_header", "bearer"]

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key; it selects the tenant.")
bearer = HTTPBearer(auto_error=False, description="The API key as a bearer token.")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class KeyRing:
    def __init__(self, keys: Mapping[str, str]) -> None:
        self._tenants = {_digest(k): t for k, t in keys.items()}

    def tenant(self, key: Optional[str]) -> str:
        if not key:
            raise HTTPException(401, "missing API key: send it as 'X-API-Key: <key>' or "
                                     "'Authorization: Bearer <key>'", headers={"WWW-Authenticate": "Bearer"})
        found = self._tenants.get(_digest(key))
        if found is None:
            raise HTTPException(403, "API key not recognised")
        return found


def tenant_of(request: Request, key: Optional[str] = Security(api_key_header),
              credentials: Optional[HTTPAuthorizationCredentials] = Security(bearer)) -> str:
    """The tenant of the request's API key (a FastAPI dependency)."""
    ring: KeyRing = request.app.state.keyring
    return ring.tenant(key or (credentials.credentials if credentials is not None else None))
