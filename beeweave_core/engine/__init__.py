"""The engine's parts, each a plain class given the shared context (:class:`Shared`):
``Records`` (validate -> embed -> write), ``Search`` (retrieve -> fuse -> rank),
``Graph`` (link, relate, expand, session views). ``beeweave_core.BeeWeave`` builds them
together with the lifecycle and ingestion parts."""

from .config import NetworkConfig, SearchConfig
from .graph import Graph
from .records import Records
from .search import Search
from .shared import Hooks, Shared

__all__ = ["SearchConfig", "NetworkConfig", "Shared", "Hooks", "Records", "Search", "Graph"]
