"""BeeWeave for LlamaIndex: a retriever, a node postprocessor, a memory block and a
memory (``BaseMemory``).

These classes only translate between LlamaIndex types and ``beeweave_core``; every
behaviour (search, ranking, expansion, ingestion) is the engine's.
Importing this package loads no model.
"""

import importlib.util as _util

from beeweave_core.errors import MissingDependencyError as _Missing

# A missing extra is named with the pip command that installs it, before a submodule
# fails on its first import with a bare "No module named ...". Nothing is imported here.
for _name in ("llama_index.core",):
    try:
        _found = _util.find_spec(_name) is not None
    except ImportError:  # a parent package is missing, or an import hook refuses the module
        _found = False
    if not _found:
        raise _Missing(f'beeweave_llamaindex needs the {_name} package: pip install "beeweave-memory[llamaindex]"')

from .memory import BeeWeaveMemory  # noqa: E402
from .memory_block import BeeWeaveMemoryBlock  # noqa: E402
from .postprocessor import BeeWeaveNodePostprocessor  # noqa: E402
from .retriever import BeeWeaveRetriever  # noqa: E402

__all__ = [
    "BeeWeaveRetriever",
    "BeeWeaveNodePostprocessor",
    "BeeWeaveMemoryBlock",
    "BeeWeaveMemory",
]
