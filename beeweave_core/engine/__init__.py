"""The engine's parts, each a plain class given the shared context (:class:`Shared`):
``Records`` (validate -> embed -> write), ``Search`` (retrieve -> fuse -> rank),
``Graph`` (link, relate, expand, session views). ``beeweave_core.BeeWeave`` builds them
together with the lifecycle and ingestion parts."""

from .graph import Graph
from .search import Search
from .search_config import NetworkConfig, SearchConfig
from .shared import Hooks, Shared
from .writes import Records

__all__ = ["SearchConfig", "NetworkConfig", "Shared", "Hooks", "Records", "Search", "Graph"]
