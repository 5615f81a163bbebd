"""``BeeWeave``: the core engine with its network, lifecycle and ingestion layers."""

from __future__ import annotations

from .engine import MemoryCore
from .ingest.api import IngestMixin
from .lifecycle import LifecycleMixin
from .network import NetworkMixin

__all__ = ["BeeWeave"]


class BeeWeave(IngestMixin, LifecycleMixin, NetworkMixin, MemoryCore):
    __doc__ = MemoryCore.__doc__
