"""BeeWeave for LlamaIndex: a retriever, a node postprocessor and a memory block.

These classes only translate between LlamaIndex types and ``beeweave_core``; every
behaviour (search, ranking, expansion, ingestion) is the engine's.
Importing this package loads no model.
"""

from .memory_block import BeeWeaveMemoryBlock
from .postprocessor import BeeWeaveNodePostprocessor
from .retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveRetriever",
    "BeeWeaveNodePostprocessor",
    "BeeWeaveMemoryBlock",
]
