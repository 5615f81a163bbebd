"""BeeWeave for LlamaIndex: a retriever, a node postprocessor, a memory block and a
memory (``BaseMemory``).

These classes only translate between LlamaIndex types and ``beeweave_core``; every
behaviour (search, ranking, expansion, ingestion) is the engine's.
Importing this package loads no model.
"""

from .memory import BeeWeaveMemory
from .memory_block import BeeWeaveMemoryBlock
from .postprocessor import BeeWeaveNodePostprocessor
from .retriever import BeeWeaveRetriever

__all__ = [
    "BeeWeaveRetriever",
    "BeeWeaveNodePostprocessor",
    "BeeWeaveMemoryBlock",
    "BeeWeaveMemory",
]
