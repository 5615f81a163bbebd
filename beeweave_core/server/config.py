"""Server configuration: where the stores are, which API key belongs to which tenant, limits.

API keys come from (the first that is given):
- ``api_keys=`` (a mapping key -> tenant),
- a file (``--api-keys FILE`` / ``BEEWEAVE_API_KEYS_FILE``): JSON ``{"key": "tenant", ...}``
  or TOML with a ``[keys]`` table of ``key = "tenant"``,
- the environment variable ``BEEWEAVE_API_KEYS="key1:tenantA,key2:tenantB"``.

Several keys may map to one tenant (key rotation). Keys are at least 8 characters of
printable ASCII without spaces, ``:`` or ``,``.

A key given as a tenant name is a tenant-wide admin key (it reads and writes every user's
memories and may export, forget and maintain). In a file (or ``api_keys=``), a key may be
scoped instead: ``{"tenant": "acme", "users": ["alice", "bob"], "admin": false}`` reads
and writes only those users' memories; ``admin`` (default false for scoped keys) allows
export, forget and maintenance, still only within ``users`` when they are given. A scoped
key reads the tenant's shared knowledge too, and ``"scopes": ["project:atlas"]`` /
``"write_scopes": ["project:atlas"]`` name the shared scopes (:mod:`beeweave_core.scopes`)
it reads / writes besides (a scope covers its sub-scopes).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..config_rules import FLAG, Instance, Items, Number, Rule, check_fields
from ..errors import InvalidInputError
from ..scopes import KeyScopes, Scope, is_scope_owner
from .stores import check_tenant

__all__ = ["ServerConfig", "KeyScope", "parse_api_keys", "load_api_keys", "keys_from_env", "DEFAULT_MAX_BODY"]

DEFAULT_MAX_BODY = 1_048_576  # 1 MiB
ENV_KEYS = "BEEWEAVE_API_KEYS"
ENV_KEYS_FILE = "BEEWEAVE_API_KEYS_FILE"


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or len(key) < 8 or not key.isascii() or not key.isprintable() \
            or any(ch in key for ch in " :,"):
        shown = key[:4] + "…" if isinstance(key, str) else repr(key)
        raise InvalidInputError(f"API key {shown!r}: keys are at least 8 printable ASCII characters "
                                "without spaces, ':' or ','")
    return key


def _check_scope(value: Any) -> Any:
    if isinstance(value, str):
        return check_tenant(value)
    if not isinstance(value, Mapping):
        raise InvalidInputError("an API key maps to a tenant name or to {\"tenant\", \"users\", \"admin\"}")
    unknown = sorted(set(value) - {"tenant", "users", "admin", "scopes", "write_scopes"})
    if unknown:
        raise InvalidInputError(f"unknown API key settings {unknown}; known: tenant, users, admin, scopes, write_scopes")
    users = value.get("users")
    if users is not None and (isinstance(users, str) or not isinstance(users, (list, tuple))
                              or not all(isinstance(u, str) and u.strip() for u in users) or not users):
        raise InvalidInputError("an API key's users must be a non-empty list of user ids")
    if users is not None and any(is_scope_owner(u) for u in users):
        raise InvalidInputError("an API key's users are users: name shared scopes in its scopes / write_scopes")
    admin = value.get("admin", False)
    if not isinstance(admin, bool):
        raise InvalidInputError("an API key's admin setting must be true or false")
    out = {"tenant": check_tenant(value.get("tenant")), "users": None if users is None else sorted(set(users)),
           "admin": admin}
    for name in ("scopes", "write_scopes"):
        if name in value:
            names = value[name]
            if isinstance(names, str) or not isinstance(names, (list, tuple)):
                raise InvalidInputError(f"an API key's {name} must be a list of scope names, e.g. ['project:atlas']")
            out[name] = sorted({Scope.parse(n).name for n in names})
    return out


def key_digest(key: str) -> bytes:
    """How an API key is held and compared (REST and MCP alike): its SHA-256 digest, so the
    lookup's time does not depend on how much of a guessed key matches."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def tenant_of_scope(value: Any) -> str:
    return value if isinstance(value, str) else value["tenant"]


_Scope = TypeVar("_Scope", bound="KeyScope")


@dataclass(frozen=True)
class KeyScope:
    """What one API key may reach, read once from its checked settings: the REST API's
    ``Access`` (:mod:`.auth`) and the MCP server's key gate hold this, so both apply one rule.

    ``users`` (``None``: every user of the tenant), ``admin`` (export, forget, maintain) and
    ``shared``, the shared scopes a key scoped to users reads and writes besides. A key given
    as a bare tenant name is a tenant-wide admin key.
    """

    tenant: str
    users: frozenset[str] | None = None
    admin: bool = True
    shared: KeyScopes = KeyScopes()

    @classmethod
    def of(cls: type[_Scope], value: Any) -> _Scope:
        """From a key's value as :func:`_check_scope` leaves it: a tenant name or a settings mapping."""
        if isinstance(value, str):
            return cls(value)
        users = value.get("users")
        return cls(value["tenant"], None if users is None else frozenset(users), bool(value.get("admin", False)),
                   KeyScopes.of(value))

    def search_scopes(self, scopes: list[str] | None) -> list[str] | None:
        """The scopes a search with this key reads (``KeyScopes.for_search``); a tenant-wide
        key passes them on (``None``: the engine's default)."""
        return scopes if self.users is None else self.shared.for_search(scopes)


def _checked(pairs: Mapping[str, Any]) -> dict[str, Any]:
    out = {_check_key(k): _check_scope(t) for k, t in pairs.items()}
    if not out:
        raise InvalidInputError("no API keys are configured")
    return out


def parse_api_keys(text: str) -> dict[str, str]:
    """``"key1:tenantA,key2:tenantB"`` -> ``{"key1": "tenantA", "key2": "tenantB"}``."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, tenant = item.partition(":")
        if not sep:
            raise InvalidInputError(f"API keys are written key:tenant, separated by commas; got {item[:4]!r}…")
        if key in pairs:
            raise InvalidInputError("an API key is listed twice")
        pairs[key] = tenant
    return _checked(pairs)


def load_api_keys(path: str | Path) -> dict[str, str]:
    """Keys from a JSON object or a TOML ``[keys]`` table."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot read the API key file {p}: {exc.strerror}") from None
    try:
        if p.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text).get("keys")
        else:
            data = json.loads(text)
            data = data.get("keys", data) if isinstance(data, dict) else data
    except ValueError as exc:
        raise InvalidInputError(f"the API key file {p} is not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, (str, dict)) for v in data.values()):
        raise InvalidInputError(f"the API key file {p} must map each key to a tenant name or a key scope")
    return _checked(data)


def keys_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    env = os.environ if environ is None else environ
    if env.get(ENV_KEYS_FILE):
        return load_api_keys(env[ENV_KEYS_FILE])
    if env.get(ENV_KEYS):
        return parse_api_keys(env[ENV_KEYS])
    return None


@dataclass
class ServerConfig:
    """Everything ``create_app`` needs.

    Attributes:
        store: a directory (one SQLite store per tenant), a PostgreSQL URL, a single
            SQLite file (exactly one tenant), or ``None`` (every tenant in memory).
        api_keys: API key -> tenant.
        embedder: the embedding model for new stores (existing stores use their own).
        max_body_bytes: larger request bodies get 413.
        max_k: the largest ``k`` a search may ask for.
        max_flush_timeout: the longest one ``POST /flush`` waits, in seconds; a longer ``timeout``
            is capped to it (the answer says ``drained: false`` if the queue is not empty yet).
        memory_kwargs: other ``BeeWeave`` arguments for every store (``ingest=``, ``lifecycle=``...).
        queue_dir: where the event logs of PostgreSQL tenants live (``<queue_dir>/<tenant>.events``,
            the SSE resumption window); without it they are in memory. Their ingest queue is a
            table in the database (durable 202s either way). A SQLite store keeps its queue and
            its event log beside its file and does not use ``queue_dir``.
        eager: open every tenant's store at start (its model loaded, its queued events resumed)
            instead of at the tenant's first request.
        read_timeout: seconds a client has to send a request's headers (and each part of its body).
        keep_alive_timeout: seconds an idle keep-alive connection stays open.
        max_connections: connections beyond this are closed at once (file descriptors stay bounded).
        tenant_concurrency: requests of one tenant that run at once; ``tenant_queue`` more wait
            (without holding a worker thread), the rest get 503 with Retry-After.
        max_events: the newest events each tenant's event log keeps (SSE resumption window).
        webhooks: ``Webhook`` s (or their dicts: url, secret, types, tenant) to deliver events to.
        webhook_queue: notifications each webhook holds waiting for delivery, and as many
            waiting for a retry; beyond that they are dropped and counted in ``/metrics``
            (``beeweave_webhook_dropped_total``).
        maintain_interval: run each open tenant's ``maintain()`` in the background every
            this many seconds (``None``: only when asked, ``POST /maintain``).
    """

    store: str | Path | None
    api_keys: Mapping[str, Any]
    embedder: Any = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_k: int = 100
    max_flush_timeout: float = 60.0
    memory_kwargs: dict[str, Any] = field(default_factory=dict)
    queue_dir: str | Path | None = None
    eager: bool = True
    read_timeout: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 512
    tenant_concurrency: int = 4
    tenant_queue: int = 256
    max_events: int = 100_000
    webhooks: Sequence[Any] = ()
    webhook_queue: int = 10_000
    maintain_interval: float | None = None

    def __post_init__(self) -> None:
        check_fields(self, _SERVER_RULES)
        self.api_keys = _checked(dict(self.api_keys))
        self.webhooks = list(self.webhooks)

    @property
    def tenants(self) -> frozenset[str]:
        return frozenset(tenant_of_scope(v) for v in self.api_keys.values())


class _WebhookRule:
    """A ``Webhook``, or its dict (url, secret, types, tenant), made one."""

    def check(self, name: str, value: Any, config: Any) -> Any:
        from .event_log import Webhook  # the delivery machinery, only for a server that has webhooks

        if isinstance(value, Webhook):
            return value
        if not isinstance(value, Mapping) or not {"url", "secret"} <= set(value):
            raise InvalidInputError(f"{name} must be {self.text()}, got {value!r}")
        try:
            return Webhook.from_dict(dict(value))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{name} must be {self.text()}: {exc}") from None

    def text(self) -> str:
        return "a Webhook or a dict of url, secret and optional types, tenant"


_COUNT, _TIMEOUT = Number(1, integer=True), Number(0, 3600, open_low=True)
_SERVER_RULES: dict[str, Rule] = {
    "store": Instance((str, os.PathLike), "a directory, a SQLite file or a PostgreSQL URL", optional=True),
    "api_keys": Instance(Mapping, "a mapping of API key to tenant"),
    "memory_kwargs": Instance(Mapping, "a mapping of BeeWeave arguments"),
    "queue_dir": Instance((str, os.PathLike), "a directory", optional=True),
    "webhooks": Items(_WebhookRule()),
    "max_body_bytes": Number(1024, integer=True), "max_k": _COUNT, "max_flush_timeout": Number(0),
    "eager": FLAG, "read_timeout": _TIMEOUT, "keep_alive_timeout": _TIMEOUT, "max_connections": _COUNT,
    "tenant_concurrency": _COUNT, "tenant_queue": _COUNT, "max_events": _COUNT, "webhook_queue": _COUNT,
    "maintain_interval": Number(0, open_low=True, optional=True),
}
