"""The effective settings of a store or a server, for ``beeweave config show store|server``.

A store's settings are what ``beeweave --store X`` would open it with: the values recorded in it
(the embedding model, the tokenizer, the index's constants, read from a SQLite file opened
read-only, so nothing is created, migrated or loaded), the relevance gate its model implies, and
every engine configuration class as the command line builds it. A server's are its
``ServerConfig`` without secrets: API keys appear as a short digest beside their tenant,
webhook secrets and database passwords as ``***``.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Mapping
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any

from .errors import InvalidInputError, StoreUnavailableError

__all__ = ["store_settings", "server_settings", "render_settings", "plain"]

def plain(value: Any) -> Any:
    """``value`` as JSON: enums by value, durations in seconds, dataclasses and named tuples as
    objects (their private fields left out), sets sorted, other objects by class name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return f"<{type(value).__name__}>"


def _engine_configs() -> dict[str, Any]:
    """Each configuration ``BeeWeave`` takes, as the command line and the server open a store
    (neither passes one: each is its class's default)."""
    from .engine.search_config import NetworkConfig, SearchConfig
    from .ingest.config import IngestConfig
    from .lifecycle.config import LifecycleConfig
    from .scopes import ScopeConfig
    from .scoring import ScoringConfig

    return {cls.__name__: cls() for cls in (SearchConfig, NetworkConfig, ScoringConfig, ScopeConfig,
                                            LifecycleConfig, IngestConfig)}


def _read_meta(path: Path) -> dict[str, str]:
    """The ``meta`` table of a SQLite store, opened read-only (no migration, nothing written).

    Without a write-ahead log beside it (the store is closed and checkpointed) the file is read
    as immutable, so not even the WAL index (``-shm``) is created; with one (the store is open
    elsewhere), read-only through it, to see what it committed."""
    wal = path.with_name(path.name + "-wal").exists()
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{'mode=ro' if wal else 'immutable=1'}", uri=True)
        try:
            return dict(db.execute("SELECT key, value FROM meta").fetchall())
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StoreUnavailableError(f"cannot read the store {path}: {exc}") from None


def store_settings(store: str, *, tenant: str | None = None, embedder: str | None = None) -> dict[str, Any]:
    """What a store opens with (see the module docstring), as JSON-ready sections.

    ``embedder`` is the ``--embedder`` asked for; the store's recorded model wins when none is.
    A PostgreSQL store is described by its location only: its recorded values are in tables
    that only opening the store reads.
    """
    from .embedders import DEFAULT_MODEL_NAME
    from .index.config import IndexConfig
    from .options import mask_url
    from .relevance import calibration_for, default_gate
    from .server.stores import is_postgres_url, local_store_path
    from .tokenizer import TokenizerConfig

    out: dict[str, Any] = {"store": {"location": mask_url(store), "tenant": tenant}}
    meta: dict[str, str] = {}
    if is_postgres_url(store):
        out["store"].update(backend="postgresql", recorded="not read: a PostgreSQL store's recorded settings "
                                                            "are read when it is opened")
    else:
        path = local_store_path(store, tenant)
        if path is None:
            raise InvalidInputError(f"{store} is a server: its settings are `beeweave config show server` on it")
        if path.is_dir():
            names = sorted(p.stem for p in path.glob("*.db"))
            raise StoreUnavailableError(f"{path} is a directory of tenant stores: pass --tenant "
                                        f"({', '.join(names) or 'none yet'})")
        exists = path.is_file()
        meta = _read_meta(path) if exists else {}
        out["store"].update(backend="sqlite", path=str(path), exists=exists,
                            schema_version=meta.get("schema_version"))
    recorded = json.loads(meta["embedder"]) if "embedder" in meta else None
    model = embedder or (recorded or {}).get("name") or DEFAULT_MODEL_NAME
    out["embedder"] = {"name": model, "dim": (recorded or {}).get("dim") if model == (recorded or {}).get("name")
                       else None,
                       "source": "flag" if embedder else "store" if recorded else "default"}
    if recorded and embedder and recorded["name"] != embedder:
        out["embedder"]["recorded"] = recorded["name"]  # opening would refuse: the store's vectors are another model's
    configs: dict[str, tuple[str, Any]] = {
        "TokenizerConfig": ("store", TokenizerConfig.from_dict(json.loads(meta["tokenizer"])))
        if "tokenizer" in meta else ("default", TokenizerConfig()),
        "IndexConfig": ("store", IndexConfig.from_dict(json.loads(meta["index_config"])))
        if "index_config" in meta else ("default", IndexConfig()),
    }
    configs.update({name: ("default", cfg) for name, cfg in _engine_configs().items()})
    out["configs"] = {name: {"source": source, "values": plain(cfg)} for name, (source, cfg) in configs.items()}
    search = configs["SearchConfig"][1]
    calibration = calibration_for(model)
    out["relevance"] = {"abstain_below": default_gate(search.abstain_below, model),
                        "source": "SearchConfig" if search.abstain_below is not None
                        else "model" if calibration.abstain_below is not None else "none (model not calibrated)",
                        "tuned_min_relevance": calibration.min_relevance}
    return out


def server_settings(config: Any, **serving: Any) -> dict[str, Any]:
    """A ``ServerConfig`` (and how it is served: host, port...) without its secrets."""
    from .options import mask_url
    from .server.config import key_digest, tenant_of_scope

    secret = {"store", "api_keys", "webhooks"}  # shown below, without what they hold secret
    values = {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in secret}
    values["store"] = None if config.store is None else mask_url(str(config.store))
    # A key is shown as the start of its digest, which names it without giving it away.
    values["api_keys"] = {f"sha256:{key_digest(k).hex()[:12]}": plain(v) for k, v in sorted(
        config.api_keys.items(), key=lambda kv: tenant_of_scope(kv[1]))}
    values["webhooks"] = [{"url": mask_url(w.url), "secret": "***", "types": plain(w.types), "tenant": w.tenant}
                          for w in config.webhooks]
    return {"serving": plain(serving), "tenants": sorted(config.tenants), "ServerConfig": values}


def _rows(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _rows(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix, value


def render_settings(settings: Mapping[str, Any]) -> str:
    """The text form: one ``setting  value  source`` line per field, nested fields dotted."""
    lines: list[tuple[str, str, str]] = [("setting", "value", "from")]
    for section, body in settings.items():
        if section == "configs":
            for name, entry in body.items():
                lines += [(k, json.dumps(v, ensure_ascii=False), entry["source"]) for k, v in _rows(name, entry["values"])]
        else:
            source = body.get("source", "") if isinstance(body, dict) else ""
            lines += [(k, json.dumps(v, ensure_ascii=False), source) for k, v in _rows(section, body)
                      if not k.endswith(".source")]
    width = max(len(a) for a, _, _ in lines)
    vwidth = min(max(len(b) for _, b, _ in lines), 60)
    return "\n".join(f"{a:<{width}}  {b:<{vwidth}}  {c}".rstrip() for a, b, c in lines)
