"""``BeeWeaveRetriever``: BeeWeave's hybrid search as a LlamaIndex retriever."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from beeweave_core import InvalidInputError
from beeweave_core.api import MemoryAPI
from beeweave_core.defaults import DEFAULT_TOP_K
from beeweave_core.degrade import Failures
from beeweave_core.filters import check_one_user_scope
from beeweave_core.records import SearchHit
from beeweave_core.validation import check_number

from .filters import to_beeweave_filters
from .nodes import hit_to_node

if TYPE_CHECKING:
    from beeweave_core import ExpandOptions, Reranker

__all__ = ["BeeWeaveRetriever"]

logger = logging.getLogger(__name__)


class BeeWeaveRetriever(BaseRetriever):
    """Retrieves memories from a BeeWeave store (hybrid BM25 + vector search).

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[llamaindex]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_llamaindex import BeeWeaveRetriever

            memory = BeeWeave()
            memory.add("The user prefers answers in Chinese.", user_id="alice")
            retriever = BeeWeaveRetriever(memory, user_id="alice", similarity_top_k=3)

    Usage:
        .. code-block:: python

            for n in retriever.retrieve("language preference"):
                print(n.score, n.node.get_content(), n.node.metadata["sources"])

            # or in a query engine
            from llama_index.core.query_engine import RetrieverQueryEngine
            engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

    Each result is ``NodeWithScore(TextNode(id_=memory id, text=raw content, metadata=...),
    score=calibrated relevance)``: the score is ``SearchHit.relevance`` in [0, 1], comparable
    across queries (``SimilarityPostprocessor`` can cut on it); the metadata holds the memory's
    fields (tags, timestamp, session_id...), its relationships, ``sources`` (which retrievers
    found it), ``loosened`` and ``rank_score`` (the fused score that ranked it in this search).

    Left unset, ``abstain_below`` is the store's own "nothing relevant" gate
    (``SearchConfig.abstain_below``; with one, an off-topic question gets no nodes);
    ``abstain_below=0`` turns any gate off.

    Args:
        memory: the BeeWeave store.
        similarity_top_k: how many memories to return.
        user_id: this user's memories and the shared knowledge they read, never another
            user's (``None``: every user's).
        scopes: whose memories to read: ``"user"``, ``"tenant"``, shared scopes such as
            ``"project:atlas"`` (``None``: the store's default, the user's, the tenant's and the
            scopes granted to the user; see ``beeweave_core.scopes``).
        session_id: only memories of this session.
        filters: LlamaIndex ``MetadataFilters`` (AND only) on user_id, agent_id,
            session_id, type, intent, status (EQ / IN), tags (IN / ANY / ALL /
            CONTAINS), entities (IN / ANY / CONTAINS) and timestamp (GT / GTE / LT / LTE,
            inclusive bounds). Anything else raises ``InvalidInputError``.
        fusion, min_score, expand, rerank, mmr, loosen: passed to ``BeeWeave.search``.
        min_relevance: drop nodes whose calibrated relevance is below this (``None``: the
            store's default, ``SearchConfig.min_relevance``); when nothing is relevant the retriever returns no nodes.
        abstain_below: no nodes when no hit reaches this calibrated relevance (``None``: the
            store's default gate, ``SearchConfig.abstain_below``; ``0``: off, always the top k;
            ``beeweave_core.relevance.DEFAULT_ABSTAIN_BELOW`` is the default model's tuned gate); when one does, every hit comes back as ranked.
        as_of: search the memory as it was at this time (a datetime or ISO string): nothing
            stored later, and of a fact that changed, the statement valid then first (``None``:
            now; a changed fact's old value then comes with ``superseded`` in its metadata).

    A ``QueryBundle.embedding`` is not used: it comes from LlamaIndex's embedding
    model, not the store's, so BeeWeave embeds the query string itself.

    When the store is unavailable (a locked file, PostgreSQL down, the server
    unreachable) the retriever returns no nodes: the failure is logged as a warning and
    counted in ``errors``, and the next call tries the store again. Bad input still
    raises ``InvalidInputError``, and a store closed by the program raises
    ``StoreClosedError``.
    """

    def __init__(self, memory: MemoryAPI, *, similarity_top_k: int = DEFAULT_TOP_K,
                 user_id: str | None = None, session_id: str | None = None,
                 filters: MetadataFilters | None = None, fusion: str | None = None,
                 min_score: float | None = None, expand: bool | ExpandOptions | None = None,
                 rerank: Reranker | None = None, mmr: float | None = None, loosen: bool = False,
                 min_relevance: float | None = None, abstain_below: float | None = None,
                 scopes: Sequence[str] | None = None, as_of: datetime | str | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        for name, gate in (("min_relevance", min_relevance), ("abstain_below", abstain_below)):
            if gate is not None:
                check_number(name, gate, low=0.0, high=1.0)  # refused here, not at the first retrieval
        bw_filters = to_beeweave_filters(filters)
        check_one_user_scope(user_id, bw_filters)
        if session_id is not None:
            if "session_id" in bw_filters:
                raise InvalidInputError("session_id is given both as the scope and in filters; give it once")
            bw_filters["session_id"] = session_id
        self.memory = memory
        self.similarity_top_k = similarity_top_k
        self.user_id = user_id
        self.session_id = session_id
        self.filters = filters
        self._search_kwargs: dict[str, Any] = dict(
            user_id=user_id, filters=bw_filters or None, fusion=fusion, min_score=min_score,
            expand=expand, rerank=rerank, mmr=mmr, loosen=loosen, min_relevance=min_relevance,
            abstain_below=abstain_below, scopes=None if scopes is None else list(scopes), as_of=as_of)
        self._failures = Failures(logger)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def errors(self) -> int:
        """How many retrievals found the store unavailable and returned no nodes."""
        return self._failures.count

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        none: list[SearchHit] = []
        hits = self._failures.unless_unavailable("retriever", lambda: self.memory.search(
            query_bundle.query_str, k=self.similarity_top_k, **self._search_kwargs), none)
        return [hit_to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The engine is synchronous (SQLite, FAISS, the embedder): run it off the event loop.
        return await asyncio.to_thread(self._retrieve, query_bundle)
