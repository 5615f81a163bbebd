"""``SearchHit`` -> LlamaIndex ``NodeWithScore``."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from beeweave_core import SearchHit

__all__ = ["hit_to_node"]

# The metadata an LLM (or a re-embedding) sees with the text; the rest is bookkeeping
# that would only crowd the prompt.
_SHOWN = frozenset({"timestamp", "tags"})


def hit_to_node(hit: SearchHit) -> NodeWithScore:
    """A new node for a memory: id and text from the chunk, every other field (JSON-friendly),
    the hit's sources (which retriever or graph edge reached it) and ``loosened`` as metadata."""
    data = hit.to_dict()
    chunk = data["chunk"]
    node_id, text = chunk.pop("id"), chunk.pop("raw_content")
    metadata = {**chunk, "sources": data["sources"], "loosened": data["loosened"]}
    hidden = [k for k in metadata if k not in _SHOWN]
    node = TextNode(id_=node_id, text=text, metadata=metadata,
                    excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=list(hidden))
    return NodeWithScore(node=node, score=hit.score)
