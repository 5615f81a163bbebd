"""BeeWeave for LlamaIndex: a retriever and a node postprocessor (memory block to follow).

These classes only translate between LlamaIndex types and ``beeweave_core``; every
behaviour (search, ranking, expansion, ingestion) is the engine's.
Importing this package loads no model.
"""

from .postprocessor import BeeWeaveNodePostprocessor
from .retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveRetriever",
    "BeeWeaveNodePostprocessor",
]
