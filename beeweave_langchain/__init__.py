"""BeeWeave for LangChain: a callback handler that lets agents learn from their runs,
a retriever over BeeWeave memories, and a conversation memory.

These classes translate LangChain types to the engine and back; every behaviour
lives in ``beeweave_core``.
"""

from .retriever import BeeWeaveRetriever

__all__ = ["BeeWeaveRetriever"]
