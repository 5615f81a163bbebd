"""Documents from a LlamaIndex ``VectorStoreIndex``, post-processed by BeeWeave.

The index retrieves documents as usual; ``BeeWeaveNodePostprocessor`` then applies
BeeWeave's ranking and graph expansion: a document that says what one of the user's
memories says pulls that memory in as an extra node, with how it was reached. The
index and the memory store share one embedding model. Offline with ``MockLLM``.

    python examples/llamaindex_document_postprocess.py
"""

from __future__ import annotations

from typing import Any

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import MockLLM

from beeweave_core import BeeWeave, Embedder
from beeweave_llamaindex import BeeWeaveNodePostprocessor

DOCUMENTS = [
    "Production deploys go through the blue-green pipeline and need an on-call approval.",
    "The staging database listens on port 5433 and is reset every night.",
    "Expense reports are due on the last Friday of the month.",
    "The EU Kubernetes cluster runs in eu-west-1 with three node pools.",
]
MEMORIES = [
    "Production deploys go through the blue-green pipeline and need an on-call approval from Alice.",
    "Alice rolled back the last production deploy because the canary failed.",
]


class BeeWeaveEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over a BeeWeave ``Embedder``, so that documents and
    memories live in one vector space."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        super().__init__(model_name=embedder.name, **kwargs)
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed_query(query).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed_documents([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed_documents(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def main(embedder: Any = None, question: str = "How do production deploys work?") -> Response:
    with BeeWeave(embedder=embedder) as memory:
        memory.add_many([{"content": text, "user_id": "alice", "session_id": "ops-review"} for text in MEMORIES])
        index = VectorStoreIndex.from_documents([Document(text=t) for t in DOCUMENTS],
                                                embed_model=BeeWeaveEmbedding(memory.embedder))
        beeweave = BeeWeaveNodePostprocessor(memory, user_id="alice", expand=True, top_n=2)
        engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=3, node_postprocessors=[beeweave])
        response = engine.query(question)
        print(f"Q: {question}")
        for n in response.source_nodes:
            graph = n.node.metadata.get("sources", {}).get("graph")
            how = f"memory, linked by a {graph['via']} edge" if graph else "document"
            print(f"  [{n.score:.3f}] {n.node.get_content()}  ({how})")
        return response


if __name__ == "__main__":
    main()
