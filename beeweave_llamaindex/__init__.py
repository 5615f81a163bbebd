"""BeeWeave for LlamaIndex: a retriever (node postprocessor and memory block to follow).

These classes only translate between LlamaIndex types and ``beeweave_core``; every
behaviour (search, ranking, expansion, ingestion) is the engine's.
Importing this package loads no model.
"""

from .retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveRetriever",
]
