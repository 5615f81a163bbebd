"""BeeWeave for LangChain and LangGraph: a store (``BeeWeaveStore``) and an agent middleware
(``BeeWeaveMiddleware``) for ``create_agent``, a callback handler that lets agents learn from
their runs, a retriever over BeeWeave memories, and a classic conversation memory.

These classes translate LangChain types to the engine and back; every behaviour
lives in ``beeweave_core``. Importing this package loads no model.
"""

import importlib.util as _util

from beeweave_core.errors import MissingDependencyError as _Missing

# A missing extra is named with the pip command that installs it, before a submodule
# fails on its first import with a bare "No module named ...". Nothing is imported here.
for _name in ("langchain_core", "langchain_classic", "langchain", "langgraph"):
    try:
        _found = _util.find_spec(_name) is not None
    except ImportError:  # a parent package is missing, or an import hook refuses the module
        _found = False
    if not _found:
        raise _Missing(f'beeweave_langchain needs the {_name} package: pip install "beeweave-memory[langchain]"')

from .callbacks import BeeWeaveCallbackHandler  # noqa: E402
from .memory import BeeWeaveMemory  # noqa: E402
from .middleware import BeeWeaveMiddleware  # noqa: E402
from .retriever import BeeWeaveRetriever  # noqa: E402
from .store import BeeWeaveStore  # noqa: E402

__all__ = ["BeeWeaveCallbackHandler", "BeeWeaveMemory", "BeeWeaveMiddleware", "BeeWeaveRetriever", "BeeWeaveStore"]
