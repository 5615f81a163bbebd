"""BeeWeave for LangChain: a callback handler that lets agents learn from their runs,
a retriever over BeeWeave memories, and a conversation memory.

These classes translate LangChain types to the engine and back; every behaviour
lives in ``beeweave_core``. Importing this package loads no model.
"""

from .callbacks import BeeWeaveCallbackHandler
from .memory import BeeWeaveMemory
from .middleware import BeeWeaveMiddleware
from .retriever import BeeWeaveRetriever
from .store import BeeWeaveStore

__all__ = ["BeeWeaveCallbackHandler", "BeeWeaveMemory", "BeeWeaveMiddleware", "BeeWeaveRetriever", "BeeWeaveStore"]
