"""``BeeWeaveNodePostprocessor``: BeeWeave's ranking and graph expansion for any retriever's nodes."""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from beeweave_core import BeeWeave, Candidate, ExpandOptions, InvalidInputError, Reranker

from .filters import to_beeweave_filters
from .nodes import hit_to_node

__all__ = ["BeeWeaveNodePostprocessor"]


class BeeWeaveNodePostprocessor(BaseNodePostprocessor):
    """Applies ``BeeWeave.postprocess`` to the nodes of any retriever.

    Nodes whose id is a stored memory get that memory's weight and confidence;
    all nodes can be reranked (a BeeWeave ``Reranker``) and diversified (MMR); with
    ``expand``, memories linked to the nodes come in as extra nodes.

    Setup:
        .. code-block:: bash

            pip install "beeweave-memory[llamaindex]"

    Instantiate:
        .. code-block:: python

            from beeweave_core import BeeWeave
            from beeweave_llamaindex import BeeWeaveNodePostprocessor

            memory = BeeWeave()
            post = BeeWeaveNodePostprocessor(memory, user_id="alice", expand=True, top_n=5)

    Usage:
        .. code-block:: python

            nodes = index.as_retriever().retrieve("deploy the service")
            for n in post.postprocess_nodes(nodes, query_str="deploy the service"):
                print(n.score, n.node.node_id)

            # or in a query engine
            engine = index.as_query_engine(llm=llm, node_postprocessors=[post])

    The caller's nodes are never modified. A node that is not a memory comes back as
    a deep copy with BeeWeave's score; a memory (given, or reached by expansion) comes
    back as a new node built like ``BeeWeaveRetriever``'s, whose ``metadata["sources"]``
    says how it was reached ("input", "rerank", "graph" with the edge type and origin).

    Scores: this re-ranks the nodes it is given, so a node's score stays on the given scale
    (the input score times the memory's weight and confidence, or the reranker's score), not
    BeeWeave's calibrated relevance, and there is no "nothing relevant" gate here: the retriever
    that found the nodes decides what is relevant (``BeeWeaveRetriever`` takes ``abstain_below``).

    Args:
        memory: the BeeWeave store.
        reranker: a BeeWeave ``Reranker`` (e.g. ``CrossEncoderReranker``); it needs a query.
        **config: the fields below.
    """

    user_id: str | None = Field(
        default=None, description="Scope: only this user's memories are recognised or expanded to.")
    filters: MetadataFilters | None = Field(
        default=None, description="LlamaIndex metadata filters (AND only) on the memories, as in BeeWeaveRetriever.")
    mmr: float | None = Field(
        default=None, description="MMR trade-off in [0, 1] (1 = relevance only); None: no diversification.")
    expand: bool | ExpandOptions = Field(
        default=False, description="Bring in memories linked to the nodes (True, or an ExpandOptions).")
    top_n: int | None = Field(
        default=None, description="Keep at most this many nodes before expansion; None: all.")

    _memory: BeeWeave = PrivateAttr()
    _reranker: Reranker | None = PrivateAttr(default=None)
    _bw_filters: dict[str, Any] = PrivateAttr(default_factory=dict)

    def __init__(self, memory: BeeWeave, *, reranker: Reranker | None = None, **config: Any) -> None:
        super().__init__(**config)
        self._memory = memory
        self._reranker = reranker
        self._bw_filters = to_beeweave_filters(self.filters)

    @classmethod
    def class_name(cls) -> str:
        return "BeeWeaveNodePostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None and self._reranker is not None:
            raise InvalidInputError("reranking needs a query: pass query_str= or query_bundle=")
        query = query_bundle.query_str if query_bundle is not None else ""
        candidates = [Candidate(id=n.node.node_id, text=n.node.get_content(), score=n.score,
                                metadata=dict(n.node.metadata)) for n in nodes]
        hits = self._memory.postprocess(query, candidates, user_id=self.user_id, filters=self._bw_filters or None,
                                        rerank=self._reranker, mmr=self.mmr, expand=self.expand, top_n=self.top_n)
        given = {n.node.node_id: n.node for n in nodes}
        out = []
        for h in hits:
            if h.chunk.metadata.get("external") and h.id in given:
                out.append(NodeWithScore(node=given[h.id].model_copy(deep=True), score=h.score))
            else:
                out.append(hit_to_node(h, h.score))
        return out
