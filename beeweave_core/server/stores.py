"""Opening stores by location, and one store per tenant.

A location is a SQLite file, ``sqlite:///path``, a ``postgresql://`` URL, or a directory
that holds one SQLite store per tenant (``<dir>/<tenant>.db``). An existing store
remembers its embedding model; when the caller names none, the stored one is used, so
``beeweave --store memory.db search ...`` opens a store built with any model.

Tenancy is one store per tenant: a tenant's searches, filters and graph expansion can
only ever read its own store, so no query shape can reach another tenant's data. With
PostgreSQL the tenants share tables and the backend scopes every statement to its tenant.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ..embedders import recorded_model
from ..errors import InvalidInputError, StoreUnavailableError

__all__ = ["open_memory", "TenantStores", "check_tenant", "is_postgres_url", "tenant_path", "local_store_path"]

_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def check_tenant(name: Any) -> str:
    """A tenant name becomes a file name, so it is kept to letters, digits, '-' and '_'."""
    if not isinstance(name, str) or not _TENANT.fullmatch(name):
        raise InvalidInputError(f"tenant names are 1-64 letters, digits, '-' or '_' (not starting with "
                                f"'-' or '_'); got {name!r}")
    return name


def is_postgres_url(store: Any) -> bool:
    return isinstance(store, str) and store.startswith(("postgresql://", "postgres://"))


def _local_path(store: str | Path) -> Path:
    text = str(store)
    return Path(text[len("sqlite:///"):] if text.startswith("sqlite:///") else text).expanduser()


def is_tenant_dir(store: str | Path | None) -> bool:
    """A directory of tenant stores: an existing directory, or a new path without a store suffix."""
    if store is None or is_postgres_url(store):
        return False
    path = _local_path(store)
    return path.is_dir() or (not path.exists() and path.suffix.lower() not in _STORE_SUFFIXES)


def tenant_path(root: str | Path, tenant: str) -> Path:
    return _local_path(root) / f"{check_tenant(tenant)}.db"


def local_store_path(store: str | Path | None, tenant: str | None = None) -> Path | None:
    """The SQLite file ``open_memory(store, tenant=tenant)`` opens (or would create); ``None``
    for PostgreSQL, a server or memory."""
    if store is None or is_postgres_url(store) or str(store).startswith(("http://", "https://")):
        return None
    path = _local_path(store)
    if tenant is not None or path.is_dir():
        return path / f"{check_tenant(tenant)}.db" if tenant is not None else path
    return path


def open_memory(store: str | Path | None, *, tenant: str | None = None, embedder: Any = None,
                **kwargs: Any) -> Any:
    """Open a ``BeeWeave`` at a location (see the module docstring).

    Args:
        store: the location; ``None`` is a new in-memory store.
        tenant: which tenant's store in a directory of stores (or a PostgreSQL tenant).
        embedder: the model; default: the one the store was built with (else MiniLM).
        kwargs: other ``BeeWeave`` arguments (``ingest=``, ``lifecycle=``...).
    """
    from ..memory import BeeWeave

    if tenant is not None:
        check_tenant(tenant)
    if store is None:
        return BeeWeave(embedder=embedder, **kwargs)
    if is_postgres_url(store):
        from ..store.postgres import PostgresStore

        backend: Any = PostgresStore(str(store), tenant=tenant or "default")
    else:
        path = _local_path(store)
        if path.is_dir() or tenant is not None:
            if tenant is None:
                names = sorted(p.stem for p in path.glob("*.db"))
                raise InvalidInputError(f"{path} is a directory of tenant stores: pass a tenant "
                                        f"({', '.join(names) or 'none yet'})")
            path.mkdir(parents=True, exist_ok=True)
            path = path / f"{tenant}.db"
        elif not path.parent.exists():
            raise StoreUnavailableError(f"cannot create the store {path}: {path.parent} does not exist")
        from ..store.sqlite import SQLiteStore

        backend = SQLiteStore(path)
    try:
        if embedder is None:
            embedder = recorded_model(backend)
        return BeeWeave(backend=backend, embedder=embedder, **kwargs)
    except BaseException:
        backend.close()
        raise


class TenantStores:
    """One open ``BeeWeave`` per tenant, opened on first use and closed together.

    Args:
        root: a directory (``<root>/<tenant>.db``), a PostgreSQL URL, ``None`` (each
            tenant in memory), or a single SQLite file when there is exactly one tenant.
        tenants: the tenants that may be opened (from the API key configuration).
        opener: ``open_memory``-like callable ``(store, tenant=...) -> BeeWeave``.
        follows_model: the opener opens a store on the model it records (no model configured):
            a store another process re-embeds is dropped and opened again (``drop``).
    """

    def __init__(self, root: str | Path | None, tenants: Any, *, opener: Any = None,
                 follows_model: bool = False) -> None:
        self.tenants = frozenset(check_tenant(t) for t in tenants)
        self.root = root
        self._single = root is not None and not is_postgres_url(root) and not is_tenant_dir(root)
        if self._single and len(self.tenants) > 1:
            raise InvalidInputError(f"{root} is one store but {len(self.tenants)} tenants are configured: "
                                    "give a directory (one store per tenant) or a PostgreSQL URL")
        self._opener = opener or open_memory
        self._follows_model = follows_model
        self.on_open: Any = None  # (tenant, opened) -> opened: e.g. the server attaching an event log
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, tenant: str) -> Any:
        if tenant not in self.tenants:
            raise InvalidInputError(f"unknown tenant {tenant!r}")
        with self._lock:
            if self._closed:
                raise StoreUnavailableError("the server is shutting down")
            found = self._open.get(tenant)
            if found is None:
                # A single file serves its one tenant as it is; otherwise each tenant has its own store.
                found = self._opener(self.root, tenant=None if self._single else tenant)
                if self.on_open is not None:
                    try:
                        found = self.on_open(tenant, found)
                    except BaseException:
                        found.close()
                        raise
                self._open[tenant] = found
            return found

    def drop(self, tenant: str, stale: Any) -> bool:
        """Close the tenant's open store if it is still ``stale`` (a store another process
        re-embedded: this copy's model is no longer the store's), so that the next request
        opens it again, on the model it now records; False if it was dropped already, or when
        stores open on a configured model (opening again would refuse the store: an operator's
        fix, a restart with the store's model)."""
        if not self._follows_model:
            return False
        with self._lock:
            if tenant not in self._open or self._open[tenant] is not stale:
                return False
            dropped = self._open.pop(tenant)
        dropped.close()
        return True

    def opened(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._open)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            opened, self._open = self._open, {}
        errors = []
        for item in opened.values():
            try:
                item.close()
            except Exception as exc:  # close the others anyway
                errors.append(exc)
        if errors:
            raise errors[0]
