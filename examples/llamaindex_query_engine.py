"""A LlamaIndex query engine over BeeWeave memories, offline with ``MockLLM``.

``BeeWeaveRetriever`` scopes the search to one user and translates LlamaIndex
``MetadataFilters``; the engine answers from the memories it retrieved. MockLLM
echoes its prompt, so the output shows exactly what the model would have read.

    python examples/llamaindex_query_engine.py
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from beeweave_core import BeeWeave
from beeweave_llamaindex import BeeWeaveRetriever

MEMORIES = [
    ("alice", "Alice is allergic to peanuts.", ["health"]),
    ("alice", "Alice prefers answers in Chinese.", ["preference"]),
    ("alice", "Alice drinks oolong tea in the afternoon.", ["preference", "food"]),
    ("alice", "Alice's team deploys on Tuesdays.", ["work"]),
    ("bob", "Bob is allergic to shellfish.", ["health"]),
]


def main(embedder: Any = None, question: str = "What food should Alice avoid?") -> Response:
    with BeeWeave(embedder=embedder) as memory:
        memory.add_many([{"content": text, "user_id": user, "tags": tags} for user, text, tags in MEMORIES])
        personal = MetadataFilters(filters=[
            MetadataFilter(key="tags", value=["health", "food"], operator=FilterOperator.ANY)])
        retriever = BeeWeaveRetriever(memory, user_id="alice", filters=personal, similarity_top_k=2)
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        response = engine.query(question)
        print(f"Q: {question}\n--- prompt MockLLM answered from ---\n{response}\n---")
        for n in response.source_nodes:
            print(f"  [{n.score:.3f}] {n.node.get_content()}  (tags {n.node.metadata['tags']}, "
                  f"found by {', '.join(n.node.metadata['sources'])})")
        return response


if __name__ == "__main__":
    main()
