"""``BeeWeaveRetriever``: BeeWeave's hybrid search as a LangChain retriever."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from pydantic import Field, PrivateAttr, SkipValidation

from beeweave_core.api import MemoryAPI
from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.filters import check_one_user_scope
from beeweave_core.records import SearchHit

from ._convert import hit_to_document

__all__ = ["BeeWeaveRetriever", "RETRIEVER_NAME"]

# LangChain puts this into every retrieval run's callback metadata ("ls_retriever_name");
# the callback handler recognises BeeWeave retrievals by it.
RETRIEVER_NAME = "beeweave"

logger = logging.getLogger(__name__)


class BeeWeaveRetriever(BaseRetriever):
    """Memories from a BeeWeave store, as LangChain ``Document`` objects.

    Every option is passed to :meth:`beeweave_core.BeeWeave.search`; the retriever only
    translates hits into documents. ``Document.metadata`` carries the memory's
    ``id``, ``score`` (the calibrated relevance in [0, 1], ``SearchHit.relevance``),
    ``rank_score`` (the fused ranking score), ``sources``, ``relationships``, ``user_id``,
    ``session_id``, ``agent_id``, ``tags``, ``entities``, ``timestamp``, ``superseded``,
    ``valid_from`` and ``invalid_at`` (a fact that changed: see ``as_of``) and its own ``metadata``.

    Relevance: left unset, ``abstain_below`` is the store's own "nothing relevant" gate
    (``SearchConfig.abstain_below``; with one, an off-topic question gets no documents);
    ``abstain_below=0`` turns any gate off.

    When the store is unavailable (a locked file, PostgreSQL down, the server
    unreachable) the retriever returns no documents: the failure is logged as a warning
    and counted in ``errors``, and the next call tries the store again. Bad input still
    raises ``InvalidInputError``, and a store closed by the program raises
    ``StoreClosedError`` (a use after close is the caller's bug, not an outage).

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[langchain]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_langchain import BeeWeaveRetriever

            memory = BeeWeave("memory.db")
            retriever = BeeWeaveRetriever(memory=memory, user_id="alice", k=4)

    Usage:
        .. code-block:: python

            docs = retriever.invoke("what is alice allergic to")
            docs = retriever.invoke("what is alice allergic to", k=2)  # k per call
            docs = await retriever.ainvoke("what is alice allergic to")
    """

    # SkipValidation: pydantic would check the protocol by isinstance; the type is for readers and mypy.
    memory: SkipValidation[MemoryAPI] = Field(description="The BeeWeave store (or a BeeWeaveClient) to search.")
    k: int = Field(default=DEFAULT_TOP_K, ge=0, description="How many memories to return (also an invoke(..., k=) argument).")
    user_id: str | None = Field(default=None, description="This user's memories and the shared knowledge they read "
                                                         "(scopes), never another user's.")
    session_id: str | None = Field(default=None, description="Only memories of this session (added to filters).")
    agent_id: str | None = Field(default=None, description="Only memories of this agent (added to filters).")
    filters: dict[str, Any] | None = Field(default=None, description="BeeWeave search filters (tags, since, type...).")
    expand: Any = Field(default=None, description="Graph expansion: True or an ExpandOptions.")
    rerank: Any = Field(default=None, description="A beeweave_core Reranker, e.g. CrossEncoderReranker.")
    mmr: float | None = Field(default=None, description="MMR lambda in [0, 1] for diverse results.")
    fusion: str | None = Field(default=None, description='"zscore", "rrf" or "weighted" (store default if None).')
    min_score: float | None = Field(default=None, description="Drop hits whose score is below this.")
    min_relevance: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Drop hits whose calibrated relevance is below this (None: the store's default, SearchConfig.min_relevance); "
                    "when nothing is relevant the retriever returns no documents.")
    abstain_below: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="No documents when no hit reaches this calibrated relevance (None: the store's "
                    "default gate, SearchConfig.abstain_below; 0: off, always the top k).")
    loosen: bool = Field(default=False, description="Relax tag/entity filters when they leave fewer than k hits.")
    scopes: list[str] | None = Field(
        default=None, description='Whose memories to read: "user" (user_id\'s own), "tenant", shared scopes such as '
                                  '"project:atlas/module:parser" (None: the store\'s default, the user\'s, the '
                                  "tenant's and the shared scopes granted to the user).")
    as_of: datetime | str | None = Field(
        default=None, description="Search the memory as it was at this time (a datetime or ISO 8601): nothing stored later, and of "
                                  "a fact that changed, the statement valid then first (None: now).")

    _failures: Failures = PrivateAttr(default_factory=lambda: Failures(logger))

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Here, not in a pydantic validator: that would wrap the error in a ValidationError.
        check_one_user_scope(self.user_id, self.filters)

    @property
    def errors(self) -> int:
        """How many searches found the store unavailable and returned no documents."""
        return self._failures.count

    def _search_kwargs(self, k: int | None) -> dict[str, Any]:
        check_one_user_scope(self.user_id, self.filters)  # fields may have been set since
        filters = dict(self.filters or {})
        if self.session_id is not None:
            filters["session_id"] = self.session_id
        if self.agent_id is not None:
            filters["agent_id"] = self.agent_id
        return {"user_id": self.user_id, "k": self.k if k is None else k, "filters": filters or None,
                "fusion": self.fusion, "min_score": self.min_score, "expand": self.expand,
                "rerank": self.rerank, "mmr": self.mmr, "loosen": self.loosen,
                "min_relevance": self.min_relevance, "abstain_below": self.abstain_below, "scopes": self.scopes,
                "as_of": self.as_of}

    def _search(self, query: str, k: int | None) -> list[Document]:
        none: list[SearchHit] = []
        hits = self._failures.unless_unavailable(
            "retriever", lambda: self.memory.search(query, **self._search_kwargs(k)), none)
        return [hit_to_document(h) for h in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        return self._search(query, k)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None) -> list[Document]:
        # The engine is blocking (SQLite, FAISS, the embedding model): keep it off the event loop.
        return await asyncio.to_thread(self._search, query, k)

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        # A fixed name, so that subclasses are recognised too.
        return LangSmithRetrieverParams(ls_retriever_name=RETRIEVER_NAME, ls_vector_store_provider="beeweave")
